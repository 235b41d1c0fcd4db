"""Seconds of each section of one ``refimpl bench calibrate`` run (refimpl/lab/bench/calibrate.py),
in this process, in the order ``run_once`` takes them: where a calibration's minute goes.
A run peaks near 5 GiB (the 1 GiB hashes): run it under the big-memory lock on a shared machine.

    flock /tmp/refimpl-bigmem.lock env PYTHONPATH=. OMP_NUM_THREADS=1 .venv/bin/python scripts/calibrate_sections.py

Prints one line per section and the total (seconds, wall clock).
"""
from __future__ import annotations

import importlib
import time

t_start = time.perf_counter()
from refimpl.config import SUPPORTED_MODELS  # noqa: E402
from refimpl.lab.bench import calibrate_sections as c  # noqa: E402
from refimpl.lab.bench.common import set_single_thread  # noqa: E402
from refimpl.lab.bench.specs import CalibrateSpec  # noqa: E402


def main() -> None:
    set_single_thread()
    importlib.import_module("refimpl.lab.bench.startup").set_numpy_hugepage(False)
    print(f"imports {time.perf_counter() - t_start:.1f}", flush=True)
    spec, r = CalibrateSpec(), {}
    size, qwen = spec.size_mib << 20, next(m for m in spec.models if m.startswith("qwen"))
    sections = [("first use", c.first_use, (r, spec.models)), ("fills", c.fills, (r, size)),
                ("hashes", c.hashes, (r, size)), ("copies", c.copies, (r, size)),
                ("large", c.large, (r, spec.large_mib << 20)), ("HF processor", c.hf_qwen, (r, size, qwen)),
                *((f"model {m}", c.model, (r, m)) for m in (qwen, "whisper-tiny")),
                *((f"whisper {m}", c.whisper, (r, m)) for m in SUPPORTED_MODELS if m.startswith("whisper"))]
    for name, fn, args in sections:
        t = time.perf_counter()
        fn(*args)
        print(f"{name} {time.perf_counter() - t:.1f}", flush=True)
    print(f"total {time.perf_counter() - t_start:.1f}")


if __name__ == "__main__":
    main()
