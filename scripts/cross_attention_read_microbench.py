"""The two cross-attention reads of refimpl/attention/cross_attention.py on one decode step,
timed in isolation: whisper-tiny's shape (H = 6 heads of D = 64, 1500 encoder positions,
block size 16, 94 blocks per request), B requests of one query each, torch on one thread.

* paged-runs: ``cross_attention`` on views of the paged cache (block-major, each head's keys
  strided by H x D), every request's blocks one run (the best case: a fresh pool);
* dense-once: ``dense_cross_attention`` on each request's ``gather_cross_kv`` copy (head-major,
  contiguous), the copy itself timed separately (made once per request, per layer).

Prints the median of ``--iters`` timed calls (ms, after one untimed call) and the ratio.

    PYTHONPATH=. .venv/bin/python scripts/cross_attention_read_microbench.py --batch 16
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from refimpl.attention.cross_attention import (
    cross_attention,
    dense_cross_attention,
    gather_cross_kv,
    key_segments,
)
from refimpl.lab.bench.common import set_single_thread


def timed_ms(fn, iters: int) -> float:
    fn()
    times = []
    for _ in range(iters):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--iters", type=int, default=30)
    args = p.parse_args()
    set_single_thread()
    b, h, d, length, bs = args.batch, 6, 64, 1500, 16
    nb = -(-length // bs)
    g = torch.Generator().manual_seed(0)
    kv = torch.randn(2, b * nb + 1, bs, h, d, generator=g)
    blocks = [list(range(1 + i * nb, 1 + (i + 1) * nb)) for i in range(b)]
    q = torch.randn(b, h, d, generator=g)
    qsl = list(range(b + 1))
    segs = [key_segments(ids, length, bs) for ids in blocks]
    dense = [gather_cross_kv(kv, ids, length) for ids in blocks]
    torch.testing.assert_close(cross_attention(q, kv, qsl, segs), dense_cross_attention(q, qsl, dense))
    paged_ms = timed_ms(lambda: cross_attention(q, kv, qsl, segs), args.iters)
    dense_ms = timed_ms(lambda: dense_cross_attention(q, qsl, dense), args.iters)
    copy_ms = timed_ms(lambda: [gather_cross_kv(kv, ids, length) for ids in blocks], args.iters)
    print(f"{b} requests x 1 query, {length} keys, {h} heads x {d}, one layer, torch threads "
          f"{torch.get_num_threads()}: paged-runs {paged_ms:.2f} ms, dense-once {dense_ms:.2f} ms per step "
          f"(paged / dense {paged_ms / dense_ms:.2f}x); the dense copies {copy_ms:.2f} ms, once per request")


if __name__ == "__main__":
    main()
