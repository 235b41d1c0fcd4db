"""How a calibration section times one call: ``measure`` / ``median_of`` give seconds and the extra
peak resident bytes of a call, ``drawn`` stores a rate's draws and their median, ``settle`` moves the
run's long-lived objects out of the collector's reach. Read by refimpl/lab/bench/calibrate_sections.py
and calibrate_hf.py. No vLLM counterpart."""
from __future__ import annotations

import contextlib
import ctypes
import gc
import importlib
import time
from typing import Any, Callable, Optional

import numpy as np

from refimpl.lab.bench.fits import median_draw
from refimpl.utils.mem_utils import RssPeakSampler, rss_bytes

__all__ = ["DRAWS", "TIMED", "drawn", "measure", "median_of", "settle"]

DRAWS = 3  # draws of each dominant rate inside one run (issue 43): hashing, the full-size HF frame, the encoder
# seconds inside the timed calls of ``measure`` and their count, since the process started (read by
# scripts/calibrate_sections.py: how much of a section's wall the timed calls are)
TIMED: dict[str, float] = {"seconds": 0.0, "calls": 0}


def settle(r: dict) -> None:
    """After the imports and the HF processors' first build: what a start-up imports before its phases
    imported, ``rss.base`` read, then every object alive moved out of the cyclic collector's reach
    (``gc.freeze``): they live to the end of the run, and each ``measure`` then collects only what the
    sections made (0.3 s a call before, with the ~400k objects of torch and transformers: ~100 calls,
    a fifth of a run; the timed calls are unchanged, as a full collection inside one needs a quarter
    of the long-lived objects new)."""
    importlib.import_module("refimpl.worker.gpu_model_runner")
    r["rss.base"] = rss_bytes()
    gc.collect()
    gc.freeze()


def _status(key: str) -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key))


def measure(fn: Callable[[], Any]) -> tuple[float, int]:
    """(seconds, extra peak resident bytes) of ``fn()``: free heap memory handed back first
    (glibc's malloc_trim, so that ``fn``'s allocations show), then the kernel's high-water mark
    reset (/proc/self/clear_refs), else a 5 ms RSS sampler. What ``fn`` returns is dropped."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        rss0, sampler = _status("VmRSS:"), None
    except OSError:
        rss0, sampler = rss_bytes(), RssPeakSampler().__enter__()
    t0 = time.perf_counter()
    fn()
    dt = time.perf_counter() - t0
    TIMED["seconds"] += dt
    TIMED["calls"] += 1
    if sampler is not None:
        sampler.__exit__(None, None, None)
        return dt, max(0, sampler.peak - rss0)
    return dt, max(0, _status("VmHWM:") - rss0)


def median_of(fn: Callable[[], Any], n: int = 3) -> tuple[float, int]:
    runs = [measure(fn) for _ in range(n)]
    return float(np.median([r[0] for r in runs])), int(np.median([r[1] for r in runs]))


def drawn(r: dict, draws: Optional[dict], key: str, values: list[float]) -> None:
    """``r[key]`` the median of ``values`` (one rate's draws inside this run); every draw kept in
    ``draws[key]`` (the Result's summary then holds their median with min, max and IQR)."""
    r[key] = median_draw(values)
    if draws is not None:
        draws[key] = [float(v) for v in values]
