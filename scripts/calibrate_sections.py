"""Seconds of each section of one ``refimpl bench calibrate`` run (refimpl/lab/bench/calibrate.py),
in this process, the sections of ``calibrate_sections.plan`` in the order ``run_once`` takes them:
where a calibration's time goes (a run records the same in its ``sections_s``).
A run peaks near 5 GiB (the 1 GiB hashes): run it under the big-memory lock on a shared machine.

    flock /tmp/refimpl-bigmem.lock env PYTHONPATH=. OMP_NUM_THREADS=1 .venv/bin/python scripts/calibrate_sections.py

Prints one line per section and the total (seconds, wall clock).
"""
from __future__ import annotations

import importlib
import time

t_start = time.perf_counter()
from refimpl.lab.bench import calibrate_sections as c  # noqa: E402
from refimpl.lab.bench.common import set_single_thread  # noqa: E402
from refimpl.lab.bench.specs import CalibrateSpec  # noqa: E402


def main() -> None:
    set_single_thread()
    importlib.import_module("refimpl.lab.bench.startup").set_numpy_hugepage(False)
    print(f"imports {time.perf_counter() - t_start:.1f}", flush=True)
    for name, seconds in c.run_plan(c.plan(CalibrateSpec()), {}, {}).items():
        print(f"{name} {seconds:.1f}")
    print(f"total {time.perf_counter() - t_start:.1f}")


if __name__ == "__main__":
    main()
