"""The mirrored multimodal input caches of the two-process engine (P0 front end, P1 engine core).

Mirrors ``vllm/v1/engine/mm_input_cache.py`` (0.9.0, with 0.9.1's fixed ``use_cache``): two
LRUs of the same byte capacity; ``get_and_update_p0`` replaces an item P1 holds by None (only
its hash crosses), ``get_and_update_p1`` fills it back. They agree while both see the same
puts and touches and are reset together. Oversize items are skipped under every row.
``fault`` (MIRROR_FAULTS; None: vLLM's intended behaviour) reproduces how they fall out of step:

  ``reset-p1-only``      a reset clears P1's mirror but not P0's -> KeyError in P1.
  ``capacity-mismatch``  P1's mirror has half the capacity -> KeyError in P1.
  ``evict-loop``         a miss in P1 leaves a ghost key that every eviction picks again
                         (bounded by EVICT_LOOP_BOUND -> EvictionLoopError).
  ``reorder``            P0 records a request's items last to first -> the LRU orders differ
                         -> KeyError in P1.

The upstream reports behind each are in docs/background.md. Left out: several front ends on
one engine core (vLLM turns the cache off there); P0 keeps the full items, as 0.9.0.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Optional, Sequence

from refimpl.errors import RefimplError
from refimpl.multimodal.cache import Item, item_nbytes

MIRROR_FAULTS = (None, "reset-p1-only", "capacity-mismatch", "evict-loop", "reorder")
EVICT_LOOP_BOUND = 10_000


class EvictionLoopError(RefimplError, RuntimeError):
    """The unguarded eviction loop (fault ``evict-loop``) ran EVICT_LOOP_BOUND times."""


class MirroredProcessingCache:
    """An LRU of ``{mm_hash: item}`` bounded by ``capacity_bytes``. ``use_cache`` False sends every
    item whole. Counters: ``evictions``, ``hits`` (P0: sent as a hash; P1: filled from the mirror)."""

    def __init__(self, capacity_bytes: int, *, use_cache: bool = True,
                 fault: Optional[str] = None):
        if fault not in MIRROR_FAULTS:
            raise RefimplError("mirror_fault", MIRROR_FAULTS, f"unknown fault {fault!r}")
        self.capacity_bytes, self.use_cache, self.fault = int(capacity_bytes), use_cache, fault
        # LRU order and data apart, as cachetools' LRUCache: only a fault lets them differ
        self._order: OrderedDict[str, None] = OrderedDict()
        self._data: dict[str, tuple[Item, int]] = {}
        self.bytes = self.evictions = self.hits = 0

    @classmethod
    def for_p0(cls, capacity_bytes: int, use_cache: bool = True,
               fault: Optional[str] = None) -> "MirroredProcessingCache":
        """The front end's mirror (``Processor.mm_input_cache_client``) under ``fault``."""
        return cls(capacity_bytes, use_cache=use_cache,
                   fault=fault if fault in ("evict-loop", "reorder") else None)

    @classmethod
    def for_p1(cls, capacity_bytes: int, use_cache: bool = True,
               fault: Optional[str] = None) -> "MirroredProcessingCache":
        """The engine core's mirror (``EngineCore.mm_input_cache_server``) under ``fault``."""
        if fault == "capacity-mismatch":
            capacity_bytes //= 2
        return cls(capacity_bytes, use_cache=use_cache, fault=fault if fault == "evict-loop" else None)

    def keys(self) -> list[str]:
        """Hashes in LRU order, least recently used first (the order eviction follows)."""
        return list(self._order)

    def __contains__(self, mm_hash: str) -> bool:  # holds data for it
        return mm_hash in self._data

    def _touch(self, mm_hash: str) -> Optional[Item]:
        if mm_hash in self._data or self.fault == "evict-loop":  # the fault: a ghost key
            self._order[mm_hash] = None
            self._order.move_to_end(mm_hash)
        entry = self._data.get(mm_hash)
        return None if entry is None else entry[0]

    def _put(self, mm_hash: str, item: Item) -> None:
        size = item_nbytes(item)
        old = self._data.pop(mm_hash, None)
        self._order.pop(mm_hash, None)
        if old is not None:
            self.bytes -= old[1]
        if size > self.capacity_bytes:
            return  # larger than the whole cache: not stored, on both sides alike
        spins = 0
        while self.bytes + size > self.capacity_bytes:
            oldest = next(iter(self._order))
            entry = self._data.pop(oldest, None)
            if entry is None:  # a ghost: nothing freed, and it stays the oldest key
                spins += 1
                if spins >= EVICT_LOOP_BOUND:
                    raise EvictionLoopError(
                        "mm_input_cache", self.capacity_bytes,
                        f"eviction did not terminate after {spins} iterations "
                        f"(ghost key {oldest!r} holds no data)")
                continue
            del self._order[oldest]
            self.bytes -= entry[1]
            self.evictions += 1
        self._order[mm_hash] = None
        self._data[mm_hash] = (item, size)
        self.bytes += size

    def get_and_update_p0(self, mm_inputs: Sequence[Item],
                          mm_hashes: Sequence[str]) -> list[Optional[Item]]:
        """Front end: each item P1 already holds becomes None; the others are recorded as sent."""
        if not self.use_cache:
            return list(mm_inputs)
        pairs = list(zip(mm_inputs, mm_hashes, strict=True))
        out: list[Optional[Item]] = [None] * len(pairs)
        order = range(len(pairs))
        if self.fault == "reorder":  # the items finished in another order than P1 takes them
            order = order[::-1]
        for i in order:
            item, h = pairs[i]
            if self._touch(h) is not None:
                self.hits += 1
            else:
                self._put(h, item)
                out[i] = item
        return out

    def get_and_update_p1(self, mm_inputs: Sequence[Optional[Item]],
                          mm_hashes: Sequence[str]) -> list[Item]:
        """Engine core: fill each None from the mirror, store each item sent with data. Raises
        KeyError naming the hash for a None this mirror lacks (the mirrors fell out of step)."""
        if not self.use_cache:
            return list(mm_inputs)  # type: ignore[arg-type]
        out: list[Item] = []
        for item, h in zip(mm_inputs, mm_hashes, strict=True):
            if item is None:
                item = self._touch(h)
                if item is None:
                    raise KeyError(h)
                self.hits += 1
            else:
                self._put(h, item)
            out.append(item)
        return out

    def reset(self) -> bool:
        """Drop every entry (bytes -> 0)."""
        self._order.clear()
        self._data.clear()
        self.bytes = 0
        return True

    def stats(self) -> dict[str, int]:
        return dict(entries=len(self._data), bytes=self.bytes, capacity_bytes=self.capacity_bytes,
                    hits=self.hits, evictions=self.evictions)
