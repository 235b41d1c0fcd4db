"""Cost of a ProcessingCache hit as refimpl serves it (a new dict and a check of the tensors' version
counters, no data copied) against cloning the tensors on every hit (issue 8, kind 3)."""
from __future__ import annotations

import torch

from refimpl.lab.bench.schema import Result
from refimpl.lab.probes.common import check_fits, result, timed, variant
from refimpl.lab.probes.specs import CacheHitSpec
from refimpl.multimodal.cache import ProcessingCache

__all__ = ["WAYS", "cache_hit"]

WAYS = ("hit", "hit-and-clone")


def cache_hit(spec: CacheHitSpec) -> Result:
    """One item (``pixel_values`` (rows, 1176) float32 and ``image_grid_thw`` (3,) int64; 65536 rows: a
    3584 x 3584 image of Qwen2.5-VL-3B, 308 MB) served ``repeats`` times per way, torch on one thread;
    each run ``{"s"}``. ``params``: the item's bytes, ``hits`` counted by the cache and ``invalidated``
    (0: no hit saw a changed tensor)."""
    spec.check()
    check_fits("rows", 2 * spec.rows * 1176 * 4, f"the item and its clone ({spec.rows} rows of 1176 float32)")
    torch.set_num_threads(1)
    item = {"pixel_values": torch.rand(spec.rows, 1176), "image_grid_thw": torch.tensor([1, 256, 256])}
    cache = ProcessingCache(2 * sum(t.nbytes for t in item.values()) + (1 << 20))
    cache.put("k", item)
    ways = {"hit": lambda: cache.get("k"),
            "hit-and-clone": lambda: {k: t.clone() for k, t in (cache.get("k") or {}).items()}}
    runs = {w: [{"s": s} for s in timed(fn, spec.repeats)] for w, fn in ways.items()}
    return result(spec, {w: variant(r, ["s"]) for w, r in runs.items()},
                  item_bytes=sum(t.nbytes for t in item.values()), hits=cache.hits, invalidated=cache.invalidated)
