"""Counting HF-processor passes on a registry, with and without items (what a start-up row
changes: vLLM PR #17935's cache during profiling, the formula rows' skipped lookups)."""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, Optional


@dataclass
class HFPassCount:
    """HF-processor passes counted by ``count_hf_passes``: ``with_items`` (images, videos or
    audio processed) and ``without_items`` (the cached path's text-only pass, an all-cached
    prompt's empty pass)."""
    with_items: int = 0
    without_items: int = 0

    @property
    def total(self) -> int:
        return self.with_items + self.without_items

    def add(self, with_items: bool) -> None:
        if with_items:
            self.with_items += 1
        else:
            self.without_items += 1


@contextmanager
def count_hf_passes(registry: Optional[Any] = None) -> Iterator[HFPassCount]:
    """Count the HF-processor passes the processors of ``registry`` (default: the process-global
    ``MULTIMODAL_REGISTRY``) make inside the ``with`` block, an EngineCore start-up included
    (which zeroes ``registry.stats``: the count does not depend on it). Counts are final at
    the block's end: ``with count_hf_passes(reg) as n: EngineCore(cfg, "0.9.0", mm_registry=reg)``,
    then ``n.with_items``, ``n.without_items``, ``n.total``."""
    from refimpl.multimodal import MULTIMODAL_REGISTRY
    count = HFPassCount()
    watchers = (registry or MULTIMODAL_REGISTRY).stats._watchers
    watchers.append(count)
    try:
        yield count
    finally:
        watchers.remove(count)
