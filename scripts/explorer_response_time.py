"""The explorer's response time per control change: each control changed and changed back, 5 rounds,
on the committed calibration (ExploreStudy.exercise). Run: .venv/bin/python scripts/explorer_response_time.py"""
import statistics
import time

from refimpl.lab.explore.explorer_panels import ExploreStudy

t0 = time.perf_counter()
study = ExploreStudy(mode="stored")
p = study.explorer()
print(f"first build (imports done, first explore) {time.perf_counter() - t0:.2f} s")
rounds = [study.exercise() for _ in range(5)]
for k in rounds[0]:
    xs = [r[k] for r in rounds]
    print(f"{k:22s} median {1e3 * statistics.median(xs):7.1f} ms  [min {1e3 * min(xs):.1f}, max {1e3 * max(xs):.1f}]")
allx = [t for _, t in p.timings]
print(f"all {len(allx)} changes: median {1e3 * statistics.median(allx):.1f} ms, max {1e3 * max(allx):.1f} ms")
