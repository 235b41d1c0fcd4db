"""The mirrored multimodal input caches of the two-process engine (P0 front end, P1 engine core).

Mirrors ``vllm/v1/engine/mm_input_cache.py`` at vLLM 0.9.0: one ``MirroredProcessingCache``
in the front-end process (``Processor.mm_input_cache_client``) and one in the engine-core
process (``EngineCore.mm_input_cache_server``), both LRUs of the same byte capacity
(``VLLM_MM_INPUT_CACHE_GIB``; here ``ModelConfig.mm_processor_cache_gb``).
``get_and_update_p0`` replaces an item P1 already holds by ``None`` (only its hash crosses
the process boundary); ``get_and_update_p1`` fills every ``None`` back from its own copy and
stores every item that came with data. Both sides see the same put / touch sequence, so
they agree as long as they have the same capacity and are reset together.

Failure kinds reproduced by ``fault`` (MIRROR_FAULTS; None is vLLM's intended behaviour):
  ``reset-p1-only``      a reset reaches P1's mirror but not P0's (vllm-omni #6972: the
                         engine side cleared, the front end's record kept): P0 later sends a
                         hash alone for an item P1 no longer has -> ``KeyError`` in P1, the
                         error of vLLM #17227 and of the review of PR #16273.
  ``capacity-mismatch``  P1's mirror is built with half the capacity, so P1 evicts items
                         P0 still believes sent -> ``KeyError`` in P1 (the same drift that
                         vLLM #46747 saw from a different put order, there as
                         ``assert mm_item is not None``).
  ``evict-loop``         a lookup of a hash P1 lacks leaves a "ghost" key in the LRU order
                         with no data (vLLM's ``LRUCache.touch`` before PR #43595, issue
                         #43941, where the request failed and serving went on). Once the
                         ghost is the oldest key, every eviction picks it, frees nothing and
                         picks it again: the eviction loop never ends. Here it is bounded by
                         ``EVICT_LOOP_BOUND`` iterations and raises ``EvictionLoopError``.
  ``reorder``            P0 updates its mirror with a request's items in another order than
                         P1 (P0 processes items concurrently, P1 ingests them serially: PR
                         #46747's analysis of vLLM #31404, the concurrency crash, and the
                         drift of PR #34749): here P0 takes a request's items last to first.
                         The two LRU orders differ, the next eviction removes different
                         items on each side, and a later hit sends a hash P1 has evicted ->
                         ``KeyError`` in P1 (upstream ``assert mm_item is not None``).

vLLM 0.9.0 itself built ``use_cache`` inverted (checked in the 0.9.0 wheel: the local named
``disable_mm_preprocessor_cache`` held "the cache is on", and ``use_cache`` its negation), so
with the preprocessor cache on, the default, its mirrors were off and every item crossed
whole; ``disable_mm_preprocessor_cache=True`` turned them on. PR #19068 fixed it (first in
0.9.1). refimpl implements the fixed mirror; the transport figures are what the fix saves.
The mirrors skip an item larger than their capacity under every start-up row, also those that
reproduce vLLM's raising LRU (0.9.0's mirrors were cachetools LRUs too): deliberate, the
rows' "raise" is about the processing cache at start-up.

Not reproduced: several front ends sharing one engine core's mirror (API-server scale-out,
data parallelism without one front end per engine core): each P0 mirror misses the other's
puts, so P1 evicts what a P0 believes sent. vLLM turns the cache off there (PR #21839;
#23717 keeps it where the mapping is one-to-one); refimpl has one front end per engine core.

Left out: vLLM 0.9.0 also stored the full item on the P0 side; we do too (the tensors are the
same objects the processing cache holds, so no extra bytes). Later vLLM (PR #23018) keeps
only keys on P0.
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
    """An LRU of ``{mm_hash: item}`` bounded by ``capacity_bytes`` (bytes).

    ``use_cache`` False (the user disabled the preprocessor cache) sends every item whole, as
    vLLM. ``fault`` is one of MIRROR_FAULTS. Counters: ``evictions``, ``hits`` (P0: items
    replaced by their hash; P1: items filled from the mirror).
    """

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
        """Engine core: fill each None from the mirror, store each item sent with data.

        Raises KeyError naming the hash when a None arrives for an item this mirror lacks
        (the upstream failure; it means the mirrors fell out of step).
        """
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
