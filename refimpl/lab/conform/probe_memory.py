"""The conformance probe's memory (probe.py, beside it, imports this file by its folder: both run
INSIDE vLLM's interpreter and import nothing of refimpl): its resident bytes sampled on a thread,
and the wait until a setting's predicted peak fits in what the machine has available.
"""
from __future__ import annotations

import os
import resource
import threading
import time


class RssPeak:
    """The probe's resident bytes (/proc/self/statm), sampled every 10 ms on a thread: ``take()``
    gives the peak since the last take (a spike shorter than a sample can be missed) and the
    process's high-water mark (``ru_maxrss``, exact but never falling)."""

    def __init__(self):
        self.page = os.sysconf("SC_PAGE_SIZE")
        self.peak = self.now()
        threading.Thread(target=self._run, daemon=True).start()

    def now(self) -> int:
        try:
            with open("/proc/self/statm") as f:
                return int(f.read().split()[1]) * self.page
        except OSError:
            return 0

    def _run(self):
        while True:
            self.peak = max(self.peak, self.now())
            time.sleep(0.01)

    def take(self) -> dict:
        now = self.now()
        peak, self.peak = max(self.peak, now), now
        return {"peak_bytes": peak, "maxrss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}


def available_bytes() -> int:
    with open("/proc/meminfo") as f:
        fields = dict(line.split(":", 1) for line in f)
    return int(fields["MemAvailable"].split()[0]) * 1024


def wait_for_memory(need: int, rss: "RssPeak", wait_s: float) -> float:
    """Waits until the setting's predicted peak ``need`` (bytes, the probe's own included) fits in
    what is available; returns the seconds waited. Raises MemoryError after ``wait_s`` seconds."""
    t0 = time.monotonic()
    while (free := available_bytes()) < need - rss.now():
        if time.monotonic() - t0 > wait_s:
            raise MemoryError(f"predicted peak {need / 2**30:.1f} GiB; {free / 2**30:.1f} GiB available "
                              f"beside the probe's {rss.now() / 2**30:.1f} GiB after {wait_s:.0f} s")
        time.sleep(5)
    return time.monotonic() - t0
