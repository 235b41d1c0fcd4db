"""``device_timer``: the seconds of a block of device work, for start-up phases (not the serving step).

On CUDA the device is synchronised on entry and on exit, so the seconds are the work's, not its
dispatch's (a start-up pays the two syncs once; the serving step never uses this). On the CPU:
wall seconds of the block.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

import torch


@dataclass
class Elapsed:
    """Seconds of the timed block, set when it ends (0.0 until then)."""
    seconds: float = 0.0


@contextmanager
def device_timer(device: torch.device) -> Iterator[Elapsed]:
    """Time the block on ``device`` (wall seconds; synchronised on CUDA); the Elapsed is filled on exit."""
    cuda = device.type == "cuda"
    out = Elapsed()
    if cuda:
        torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    try:
        yield out
    finally:
        if cuda:
            torch.cuda.synchronize(device)
        out.seconds = time.perf_counter() - t0
