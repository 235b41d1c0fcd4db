"""The fresh-process worker: one measured run of one variant of a spec, written as JSON.

    python -m refimpl.bench.worker --spec '{"bench": "startup", "spec": {...}}' \
        --variant cache-reset --output-json run.json

Started by ``refimpl.bench.orchestrate.run_fresh`` (and by the py-spy flame graphs of
``refimpl.analysis``); the spec is ``BenchSpec.to_json()``, the output one run record.
"""
from __future__ import annotations

import argparse
import sys
from typing import Optional

from refimpl.bench.common import write_json
from refimpl.bench.orchestrate import BenchSpec, bench_module, spec_from_json


def worker_command(spec: BenchSpec, variant: str, output_json: str) -> list[str]:
    """The command line of one worker run (for a profiler such as py-spy to wrap)."""
    return [sys.executable, "-m", "refimpl.bench.worker", "--spec", spec.to_json(),
            "--variant", variant, "--output-json", output_json]


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m refimpl.bench.worker", description=__doc__)
    p.add_argument("--spec", required=True, help="BenchSpec.to_json()")
    p.add_argument("--variant", required=True)
    p.add_argument("--output-json", required=True)
    args = p.parse_args(argv)
    spec = spec_from_json(args.spec)
    write_json(args.output_json, bench_module(spec.bench).run_once(spec, args.variant))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
