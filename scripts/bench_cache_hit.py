"""Cost of a ProcessingCache hit as refimpl serves it (a new dict + a check of the tensors'
version counters, no data copied) against cloning the tensors on every hit, for one item
of the shape of Qwen2.5-VL-3B's worst-case image (3584 x 3584 -> pixel_values (65536, 1176)
float32, 308 MB; image_grid_thw (3,) int64). Issue 8, kind 3.

    PYTHONPATH=. .venv/bin/python scripts/bench_cache_hit.py [--repeats 15]

Prints median [min, max] seconds per hit for both ways, torch on one thread.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from refimpl.multimodal.cache import ProcessingCache


def _time(fn, repeats: int) -> list[float]:
    fn()  # untimed warm-up
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args()
    torch.set_num_threads(1)
    item = {"pixel_values": torch.rand(65536, 1176), "image_grid_thw": torch.tensor([1, 256, 256])}
    cache = ProcessingCache(1 << 30)
    cache.put("k", item)
    ways = {"hit (dict + version check)": lambda: cache.get("k"),
            "hit + clone of every tensor": lambda: {k: t.clone() for k, t in cache.get("k").items()}}
    nbytes = sum(t.nbytes for t in item.values())
    print(f"item: {nbytes / 1e6:.0f} MB, torch {torch.__version__}, {args.repeats} repeats, 1 thread")
    for name, fn in ways.items():
        ts = _time(fn, args.repeats)
        print(f"{name:30s} median {statistics.median(ts) * 1e3:10.4f} ms  "
              f"[{min(ts) * 1e3:.4f}, {max(ts) * 1e3:.4f}]")
    assert cache.hits == 2 * (args.repeats + 1) and cache.invalidated == 0


if __name__ == "__main__":
    main()
