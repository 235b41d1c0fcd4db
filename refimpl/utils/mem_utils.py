"""Process memory probes (bytes): the CPU stand-in for vLLM's CUDA ``memory_profiling``
(``vllm/utils``); ``peak_rss_bytes`` is Linux only.
"""
from __future__ import annotations

import resource
import threading

import psutil


def peak_rss_bytes() -> int:
    """Peak resident set size of this process so far (bytes; Linux ru_maxrss is KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def rss_bytes() -> int:
    """Current resident set size of this process (bytes)."""
    return psutil.Process().memory_info().rss


class RssPeakSampler:
    """Samples this process's RSS every ``interval`` seconds in a thread; ``peak`` in bytes."""

    def __init__(self, interval: float = 0.005):
        self._proc, self._interval = psutil.Process(), interval
        self.peak = self._proc.memory_info().rss
        self._stop = threading.Event()

    def _loop(self):
        while not self._stop.wait(self._interval):
            self.peak = max(self.peak, self._proc.memory_info().rss)

    def __enter__(self):
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._proc.memory_info().rss)
