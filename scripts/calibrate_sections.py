"""Seconds of each section of one ``refimpl bench calibrate`` run (refimpl/lab/bench/calibrate.py),
in this process, the sections of ``calibrate_sections.plan`` in the order ``run_once`` takes them:
where a calibration's time goes (a run records the same in its ``sections_s``), and how much of each
section is inside its timed calls (``calibrate_measure.measure``) rather than around them.
A run peaks near 5 GiB (the 1 GiB hashes): run it under the big-memory lock on a shared machine.

    flock /tmp/refimpl-bigmem.lock env PYTHONPATH=. OMP_NUM_THREADS=1 .venv/bin/python scripts/calibrate_sections.py

Prints the imports' seconds, then one line per section (wall s, s inside the timed calls, calls) and
the total (seconds, wall clock).
"""
from __future__ import annotations

import gc
import importlib
import time

import tyro

t_start = time.perf_counter()


def main() -> None:
    """Time each section of one calibration run in this process (no flags but --help)."""
    from refimpl.lab.bench import calibrate_sections as c
    from refimpl.lab.bench.calibrate_measure import TIMED
    from refimpl.lab.bench.common import set_single_thread
    from refimpl.lab.bench.specs import CalibrateSpec
    set_single_thread()
    importlib.import_module("refimpl.lab.bench.startup").set_numpy_hugepage(False)
    print(f"imports {time.perf_counter() - t_start:.1f}", flush=True)
    r: dict = {}
    draws: dict = {}
    try:  # as calibrate_sections.run_plan, section by section
        for section in c.plan(CalibrateSpec()):
            inside, calls, t0 = TIMED["seconds"], TIMED["calls"], time.perf_counter()
            section.fn(r, draws)
            print(f"{section.name} {time.perf_counter() - t0:.1f} s, {TIMED['seconds'] - inside:.1f} s inside "
                  f"{int(TIMED['calls'] - calls)} timed calls", flush=True)
    finally:
        gc.unfreeze()
    print(f"total {time.perf_counter() - t_start:.1f}")


if __name__ == "__main__":
    tyro.cli(main)
