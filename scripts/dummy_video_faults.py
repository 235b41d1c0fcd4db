"""Page faults and seconds of building vLLM 0.9's int64 dummy video, with numpy's huge-page
madvise on and off (fresh process per measurement, interleaved on/off).

    python scripts/dummy_video_faults.py --frames 2 --pairs 5

With the kernel's THP ``enabled=madvise`` and ``defrag=madvise`` (see
refimpl.lab.bench.startup.thp_state), numpy madvises large arrays to huge pages; when free huge
pages are short, the kernel compacts memory synchronously while the array faults in. Each
line: np.full seconds and minor faults, then ``tobytes`` (a malloc'd bytes copy, as vLLM
0.9.0's hasher makes: 4 KiB pages) seconds and minor faults, and AnonHugePages of the process.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys

CHILD = r"""
import resource, time, numpy as np
f = int(__import__("sys").argv[1])
r0 = resource.getrusage(resource.RUSAGE_SELF); t0 = time.perf_counter()
a = np.full((f, 3584, 3584, 3), 255)
t1 = time.perf_counter(); r1 = resource.getrusage(resource.RUSAGE_SELF)
b = a.tobytes()
t2 = time.perf_counter(); r2 = resource.getrusage(resource.RUSAGE_SELF)
hp = [ln for ln in open("/proc/self/smaps_rollup") if ln.startswith("AnonHugePages")][0].split()[1]
print(f"np.full {t1 - t0:.2f} s {r1.ru_minflt - r0.ru_minflt} faults | tobytes {t2 - t1:.2f} s "
      f"{r2.ru_minflt - r1.ru_minflt} faults | AnonHugePages {hp} kB")
"""


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--frames", type=int, default=2, help="frames of 3584x3584x3 int64 (2: 616 MB)")
    p.add_argument("--pairs", type=int, default=5)
    a = p.parse_args()
    for i in range(a.pairs):
        for hp in ("1", "0"):
            out = subprocess.run([sys.executable, "-c", CHILD, str(a.frames)], capture_output=True, text=True,
                                 env={**os.environ, "NUMPY_MADVISE_HUGEPAGE": hp}, check=True).stdout
            print(f"pair {i + 1} hugepage-madvise={hp}: {out.strip()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
