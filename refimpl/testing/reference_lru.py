"""ReferenceLRU: a model of the processing cache's bookkeeping (keys and sizes), to compare with.

Follows ``ProcessingCache`` (vLLM's ``LRUCache`` bounded in bytes): ``get`` refreshes and counts;
``put`` replaces or evicts least-recent entries until it fits; an item above the capacity is
not stored and evicts nothing; ``reset`` zeroes everything. Left out: values, ``invalidated``,
pinning.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any


class ReferenceLRU:
    """LRU in bytes: ``capacity_bytes``; ``order`` (least recent first), ``bytes``, ``hits``,
    ``misses``, ``evictions``, ``rejected``; ``last_evicted``: the keys the last ``put`` or
    ``set_capacity`` evicted, oldest first."""

    def __init__(self, capacity_bytes: int):
        self.capacity_bytes = int(capacity_bytes)
        self._sizes: OrderedDict[str, int] = OrderedDict()
        self.hits = self.misses = self.evictions = self.rejected = 0
        self.last_evicted: list[str] = []

    @property
    def order(self) -> tuple[str, ...]:
        return tuple(self._sizes)

    @property
    def bytes(self) -> int:
        return sum(self._sizes.values())

    def __len__(self) -> int:
        return len(self._sizes)

    def __contains__(self, key: str) -> bool:
        return key in self._sizes

    def get(self, key: str) -> bool:
        """True (a hit, now most recent) or False (a miss)."""
        if key not in self._sizes:
            self.misses += 1
            return False
        self._sizes.move_to_end(key)
        self.hits += 1
        return True

    def put(self, key: str, nbytes: int) -> bool:
        """Store ``key`` of ``nbytes``; False (nothing changed but ``rejected``) when it alone
        exceeds the capacity."""
        self.last_evicted = []
        if nbytes > self.capacity_bytes:
            self.rejected += 1
            return False
        self._sizes.pop(key, None)
        self._evict_to(self.capacity_bytes - nbytes)
        self._sizes[key] = nbytes
        return True

    def set_capacity(self, capacity_bytes: int) -> None:
        self.last_evicted = []
        self.capacity_bytes = int(capacity_bytes)
        self._evict_to(self.capacity_bytes)

    def reset(self) -> None:
        self._sizes.clear()
        self.hits = self.misses = self.evictions = self.rejected = 0
        self.last_evicted = []

    def _evict_to(self, limit: int) -> None:
        while self._sizes and self.bytes > limit:
            key, _ = self._sizes.popitem(last=False)
            self.last_evicted.append(key)
            self.evictions += 1

    def state(self) -> dict[str, Any]:
        """{order, bytes, hits, misses}: what ``mismatches`` compares."""
        return dict(order=self.order, bytes=self.bytes, hits=self.hits, misses=self.misses)

    def mismatches(self, cache: Any) -> list[str]:
        """What differs between this model and ``cache`` ([] when they agree): a
        ProcessingCache (``order``, ``bytes``, ``hits``, ``misses``) or a vLLM ``LRUCache``
        (``order``, ``currsize``, ``stat()`` -> hits and total lookups)."""
        if hasattr(cache, "stat"):
            info = cache.stat()
            got = dict(order=tuple(cache.order), bytes=cache.currsize, hits=info.hits,
                       misses=info.total - info.hits)
        else:
            got = dict(order=tuple(cache.order), bytes=cache.bytes, hits=cache.hits, misses=cache.misses)
        want = self.state()
        return [f"{k}: expected {want[k]!r}, got {got[k]!r}" for k in want if want[k] != got[k]]
