"""The fresh-process worker: one measured run of one variant of a spec, written as JSON.

    python -m refimpl.bench.worker --spec '{"bench": "startup", "spec": {...}}' \
        --variant 0.9.0 --output-json run.json

Started by ``refimpl.bench.orchestrate.run_fresh`` (and by the py-spy flame graphs of
``refimpl.analysis``); the spec is ``BenchSpec.to_json()``, the output one run record. A
refimpl error (a bad setting, too little memory...) is written instead as
``{"refimpl_error": {type, module, field, limit, message}}`` and the worker exits with
``REFIMPL_ERROR_EXIT`` (3), so the parent raises that same error again; any other exception is
a crash (its traceback on stderr, exit 1). The worker ends when the process that started it
ends (``fresh.die_with_parent``), so killing a bench or a report leaves no worker behind.
"""
from __future__ import annotations

import argparse
import sys
from typing import Optional

from refimpl.bench.bench_spec import BenchSpec, bench_module, spec_from_json
from refimpl.bench.common import write_json
from refimpl.bench.fresh import REFIMPL_ERROR_EXIT, die_with_parent, refimpl_error_record


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
    die_with_parent()
    from refimpl.errors import RefimplError
    try:
        spec = spec_from_json(args.spec)
        run = bench_module(spec.bench).run_once(spec, args.variant)
    except RefimplError as e:
        write_json(args.output_json, {"refimpl_error": refimpl_error_record(e)})
        print(f"refimpl error: {type(e).__name__}: {e}", file=sys.stderr)
        return REFIMPL_ERROR_EXIT
    write_json(args.output_json, run)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
