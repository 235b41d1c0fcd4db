"""Content hashing and the per-process processing cache.

Mirrors ``vllm/multimodal/hasher.py`` (``MultiModalHasher``) and ``ProcessingCache`` in
``vllm/multimodal/processing.py`` as of vLLM 0.9.0 (PR #17935 kept it on during profiling and
added ``reset_processor_cache``): one entry per multimodal item, keyed by a blake3 hash of the
model id, the modality, the item's content and the HF-processor kwargs; the value is that
item's processed tensors; an LRU bounded in bytes.

Left out: vLLM's ``LRUCache`` base (cachetools), the per-item metadata wrappers
(``ProcessingCacheItem``) and the P0/P1 mirror caches of the V1 engine (owned elsewhere in
refimpl). An item larger than the whole capacity: vLLM 0.9.0 raised cachetools'
``ValueError("value too large")`` (start-up aborts when the profiling dummy is that item,
vLLM issue #52835); PR #53016 serves it uncached instead. ``put(..., oversize=)`` picks one.

Byte path: chunks go to blake3 as they are, arrays and tensors as views of their own buffers
(no copy; vLLM PR #24925, 0.11.0). vLLM 0.9.0's and 0.9.2's copying paths are in
refimpl/multimodal/hasher.py.

Thread safety (ours; vLLM uses its cache from one front-end thread): every method holds one
``threading.RLock``, since ``put`` and ``get`` are compound updates (dict + byte count + LRU
order). See docs/reliability.md.
"""
from __future__ import annotations

import logging
import math
import threading
from collections import OrderedDict
from typing import Any, Iterator, Optional

import numpy as np
import torch
from blake3 import blake3
from PIL import Image

from refimpl.errors import CacheItemTooLargeError

logger = logging.getLogger(__name__)
GiB = 1 << 30
Item = dict[str, torch.Tensor]  # one item's processed tensors


def value_too_large(size: int, capacity_bytes: int) -> CacheItemTooLargeError:
    """What ``put(..., oversize="raise")`` raises for an item of ``size`` bytes: vLLM 0.9.0's
    cachetools ValueError("value too large"), naming the setting and its limit in GiB."""
    return CacheItemTooLargeError("mm_processor_cache_gb", capacity_bytes / GiB,
                                  f"value too large: one processed item of {size} bytes ({size / GiB:.6g} "
                                  f"GiB) exceeds the processing cache of {capacity_bytes} bytes "
                                  "(vLLM 0.9.0 behaviour)")


class MultiModalHasher:
    """Deterministic content hashes (hex strings, 64 chars) of kwargs made of items and scalars."""

    @classmethod
    def iter_item_bytes(cls, key: str, obj: Any) -> Iterator[bytes | memoryview]:
        """Bytes that identify ``obj`` under ``key``: type tag, then shape/dtype/mode, then data."""
        yield f"<{key}:{type(obj).__name__}>".encode()
        if isinstance(obj, Image.Image):
            yield from cls.iter_image_bytes(obj)
        elif isinstance(obj, torch.Tensor):
            t = obj.detach().cpu().resolve_conj().resolve_neg().contiguous()
            yield f"{t.dtype}|{tuple(t.shape)}|".encode()
            # The tensor's own buffer, no copy (vLLM PR #24925's byte path).
            yield t.reshape(-1).view(torch.uint8).numpy().data if t.numel() else b""
        elif isinstance(obj, np.ndarray):
            a = np.ascontiguousarray(obj)
            yield f"{a.dtype.str}|{a.shape}|".encode()
            yield a.reshape(-1).view(np.uint8).data  # the array's own buffer, no copy (#24925)
        elif isinstance(obj, (bytes, bytearray)):
            yield f"{len(obj)}|".encode()
            yield bytes(obj)
        elif isinstance(obj, dict):
            for k in sorted(obj):
                yield from cls.iter_item_bytes(f"{key}.{k}", obj[k])
        elif isinstance(obj, (list, tuple)):
            yield f"len={len(obj)}|".encode()
            for i, x in enumerate(obj):
                yield from cls.iter_item_bytes(f"{key}.{i}", x)
        elif obj is None or isinstance(obj, (str, int, float, bool, np.generic)):
            yield repr(obj).encode()
        else:
            raise TypeError(f"cannot hash {type(obj).__name__} for key {key!r}")

    @classmethod
    def iter_image_bytes(cls, img: Image.Image) -> Iterator[bytes]:
        """Everything of a PIL image that its pixels depend on: mode, size, the palette with
        its own mode (a "P"/"PA" image's bytes are indices into it; RGBA palettes carry
        alpha), the transparency key of ``info`` (PIL applies it when converting "P"/"L"/
        "RGB" to an alpha mode), then the raw data. Nothing is converted (no copy beyond
        ``tobytes``). EXIF orientation is left out on purpose: transformers' processors do
        not apply it to PIL inputs (only ``load_image`` from a path/URL does), so two images
        differing only there give the same pixel_values. Issue 8, kind 2: keys without the
        palette served one "P" image the other's pixel_values."""
        yield f"{img.mode}|{img.size}|".encode()
        if img.palette is not None and img.mode in ("P", "PA"):
            pal_mode = img.palette.mode
            yield f"palette={pal_mode}|".encode()
            yield bytes(img.getpalette(pal_mode) or ())
        yield f"transparency={img.info.get('transparency')!r}|".encode()
        yield img.tobytes()

    @classmethod
    def hash_kwargs(cls, **kwargs: Any) -> str:
        """blake3 hex digest over all kwargs in sorted-key order.

        The processing cache calls it as ``hash_kwargs(model_id=..., modality=..., item=...,
        **hf_processor_mm_kwargs)``. Raises TypeError for values it cannot serialize.
        """
        h = blake3()
        for k in sorted(kwargs):
            for chunk in cls.iter_item_bytes(k, kwargs[k]):
                h.update(chunk)
        return h.hexdigest()


def item_nbytes(value: Item) -> int:
    """Bytes held by one cached item (sum of its tensors' ``nbytes``)."""
    return sum(t.nbytes for t in value.values() if isinstance(t, torch.Tensor))


def _ceil_gib(nbytes: int) -> float:
    """``nbytes`` in GiB rounded up to 6 significant digits (a setting that holds it)."""
    digits = 5 - math.floor(math.log10(nbytes / GiB))
    return math.ceil(nbytes / GiB * 10 ** digits) / 10 ** digits


def _trackable(t):
    """``t``, or a normal clone of an inference tensor (those keep no version counter)."""
    if isinstance(t, torch.Tensor) and t.is_inference():
        with torch.inference_mode(False):
            return t.clone()
    return t


def _tensor_versions(value: Item) -> tuple[int, ...]:
    return tuple(t._version for t in value.values() if isinstance(t, torch.Tensor))


class ProcessingCache:
    """LRU of processed items bounded by ``capacity_bytes`` (bytes; 0 stores nothing).

    Counters: ``hits``, ``misses``, ``evictions``, ``rejected`` (items larger than the
    capacity, not stored) and ``bytes`` (currently held). ``get`` refreshes recency; ``put``
    evicts least-recently-used entries until the new one fits. Thread-safe: every method
    holds ``self._lock`` (an RLock), see the module docstring.
    """

    def __init__(self, capacity_bytes: int):
        self.capacity_bytes = int(capacity_bytes)
        self._data: OrderedDict[str, tuple[Item, int]] = OrderedDict()
        self._versions: dict[str, tuple[int, ...]] = {}  # key -> tensors' _version at put
        self._lock = threading.RLock()
        self.hits = self.misses = self.evictions = self.rejected = self.bytes = 0
        self.invalidated = 0  # entries a caller modified in place, dropped at the next get
        self._warned_capacity: Optional[int] = None  # warn once per capacity about oversize items

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)

    def __contains__(self, key: str) -> bool:
        with self._lock:
            return key in self._data

    def get(self, key: str) -> Optional[Item]:
        """A new dict holding the cached item's tensors for ``key``, or None; counts a hit
        or a miss.

        Hits equal fresh processing whatever callers did to earlier results (issue 8, kind
        3), without copying tensor data: every get and put hands out its own dict (so
        popping or replacing keys touches no entry), and an entry whose tensors were
        modified in place since they were stored (torch bumps a tensor's ``_version`` on
        every in-place op, through any view or ``detach()``) is dropped and reported as a
        miss (``invalidated``). Writes that bypass torch's version counter (``.data``,
        ``.numpy()`` views, raw storage) are not seen; cloning on every hit would cover
        them at the cost of a full copy per hit (scripts/bench_cache_hit.py measures both).
        """
        with self._lock:
            entry = self._data.get(key)
            if entry is not None and _tensor_versions(entry[0]) != self._versions[key]:
                self._drop(key)
                self.invalidated += 1
                entry = None
            if entry is None:
                self.misses += 1
                return None
            self._data.move_to_end(key)
            self.hits += 1
            return dict(entry[0])

    def _drop(self, key: str) -> None:
        _, sz = self._data.pop(key)
        del self._versions[key]
        self.bytes -= sz

    def put(self, key: str, value: Item, oversize: str = "skip") -> bool:
        """Store ``value``; True if stored. An item alone larger than the capacity is not
        stored and nothing is evicted: ``oversize="skip"`` returns False (vLLM PR #53016),
        ``"raise"`` raises CacheItemTooLargeError, a ValueError("value too large ...") as
        vLLM 0.9.0's cachetools cache did (issue #52835)."""
        size = item_nbytes(value)
        with self._lock:
            if size > self.capacity_bytes:
                self.rejected += 1
                if oversize == "raise":
                    raise value_too_large(size, self.capacity_bytes)
                if self._warned_capacity != self.capacity_bytes:
                    self._warned_capacity = self.capacity_bytes
                    logger.warning(
                        "mm_processor_cache_gb=%.6g (%d bytes) is smaller than one processed "
                        "item (%d bytes, %.6g GiB): the item is not cached, so start-up processes "
                        "its dummy data on every pass, as without the cache (no PR #17935 "
                        "saving). Set mm_processor_cache_gb >= %.6g to cache it.",
                        self.capacity_bytes / GiB, self.capacity_bytes, size, size / GiB,
                        _ceil_gib(size))
                return False
            if key in self._data:
                self._drop(key)
            while self._data and self.bytes + size > self.capacity_bytes:
                self._drop(next(iter(self._data)))
                self.evictions += 1
            value = {k: _trackable(t) for k, t in value.items()}
            self._data[key] = (value, size)
            self._versions[key] = _tensor_versions(value)
            self.bytes += size
            return True

    def set_capacity(self, capacity_bytes: int) -> None:
        """Change the bound (bytes), evicting LRU entries until the cache fits."""
        with self._lock:
            self.capacity_bytes = int(capacity_bytes)
            while self._data and self.bytes > self.capacity_bytes:
                self._drop(next(iter(self._data)))
                self.evictions += 1

    def reset(self) -> None:
        """Drop every entry (their tensors are freed once no caller holds them); bytes -> 0,
        and every counter (hits, misses, evictions, rejected, invalidated) -> 0, as vLLM's
        ``LRUCache.clear`` zeroes its hit / query counts (0.8.5 to 0.11.0, ``vllm/utils``).
        The capacity is kept. The registry's ``ProcessingStats`` are not this cache's: they
        are reset by ``MultiModalRegistry.reset_stats``."""
        with self._lock:
            self._data.clear()
            self._versions.clear()
            self.bytes = 0
            self.hits = self.misses = self.evictions = self.rejected = self.invalidated = 0

    @property
    def order(self) -> tuple[str, ...]:
        """The keys from least to most recently used (the next eviction first), as vLLM's
        ``LRUCache.order``."""
        with self._lock:
            return tuple(self._data)

    def entry_bytes(self, key: str) -> int:
        """Bytes held by the entry ``key`` (KeyError if absent); counts no hit or miss."""
        with self._lock:
            return self._data[key][1]

    def stats(self) -> dict[str, int]:
        with self._lock:
            return dict(entries=len(self._data), bytes=self.bytes, capacity_bytes=self.capacity_bytes,
                        hits=self.hits, misses=self.misses, evictions=self.evictions,
                        rejected=self.rejected, invalidated=self.invalidated)
