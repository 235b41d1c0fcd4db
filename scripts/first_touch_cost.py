"""What touching memory costs on this machine: first touch, again right after a free, and again after
a pause (a VM whose guest reports freed pages to its host pays the host's fault on every page it
touches after the report; bare metal pays about the same each time).

Fills ``--gib`` arrays of 1 GiB (int64, np.full, as start-up's dummy video is built) three times in
one process: first, again right after freeing them, and again after ``--pause`` seconds; prints each
round's seconds per GiB (median [min, max] of the arrays) and the kernel's free-page-reporting state
(/sys/module/page_reporting) with how much it reported during the run.

    python scripts/first_touch_cost.py [--gib 6] [--pause 20]
"""
from __future__ import annotations

import argparse
import platform
import statistics
import time

import numpy as np

from refimpl.lab.env import page_reporting, reported_gib


def fill_round(gib: int) -> list[float]:
    """Seconds of each 1 GiB fill, all kept alive until the round ends (each is new memory)."""
    keep, out = [], []
    for _ in range(gib):
        t = time.perf_counter()
        keep.append(np.full(2**27, 255, dtype=np.int64))
        out.append(time.perf_counter() - t)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=int, default=6, help="GiB per round (1 GiB arrays)")
    ap.add_argument("--pause", type=float, default=20.0, help="seconds before the third round")
    a = ap.parse_args()
    before = reported_gib()
    rounds = {"first touch": fill_round(a.gib), "right after a free": fill_round(a.gib)}
    time.sleep(a.pause)
    rounds[f"after {a.pause:g} s idle"] = fill_round(a.gib)
    after = reported_gib()
    print(f"# {platform.processor() or platform.machine()}, python {platform.python_version()}, numpy {np.__version__}")
    print("| round | s per GiB: median [min, max] | total s |\n|---|---|---|")
    for k, ts in rounds.items():
        print(f"| {k} | {statistics.median(ts):.2f} [{min(ts):.2f}, {max(ts):.2f}] | {sum(ts):.1f} |")
    if before is not None and after is not None:
        settings = ", ".join(f"{k}={v}" for k, v in (page_reporting() or {}).items())
        print(f"free page reporting: {settings}; {after - before:.1f} GiB reported to the host during this run")
    else:
        print("free page reporting: none (no /sys/module/page_reporting)")


if __name__ == "__main__":
    main()
