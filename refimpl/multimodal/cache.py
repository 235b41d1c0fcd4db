"""Content hashing and the per-process processing cache.

Mirrors ``MultiModalHasher`` (``vllm/multimodal/hasher.py``) and ``ProcessingCache``
(``vllm/multimodal/processing.py``, 0.9.0): one entry per item keyed by a blake3 hash of model,
modality, content and HF kwargs, the value its tensors; an LRU bounded in bytes. The hasher
copies nothing (0.11.0's path; older ones in hasher.py). Thread-safe (ours, one RLock). Left
out: cachetools' ``LRUCache`` base, ``ProcessingCacheItem``, the P0/P1 mirrors.
"""
from __future__ import annotations

import logging
import math
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Iterator, Optional

import numpy as np
from blake3 import blake3
from PIL import Image

from refimpl.config.checks import check_size
from refimpl.errors import CacheItemTooLargeError
from refimpl.utils.lazy_torch import is_tensor  # no torch at import: the explorer's dry plans use this cache

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)
GiB = 1 << 30
Item = dict[str, "torch.Tensor"]  # one item's processed tensors


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
        # one tag for every PIL image class: a decoded PngImageFile and the same pixels as an Image
        yield f"<{key}:{'Image' if isinstance(obj, Image.Image) else type(obj).__name__}>".encode()
        if isinstance(obj, Image.Image):
            yield from cls.iter_image_bytes(obj)
        elif is_tensor(obj):
            import torch

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
        """What a PIL image's pixels depend on: mode, size, the palette with its own mode ("P"/"PA"),
        the ``transparency`` key, then the raw data; nothing converted. EXIF orientation is left out:
        the parser has already applied it (``normalize_image``), as the pixels hashed are processed."""
        yield f"{img.mode}|{img.size}|".encode()
        if img.palette is not None and img.mode in ("P", "PA"):
            pal_mode = img.palette.mode
            yield f"palette={pal_mode}|".encode()
            yield bytes(img.getpalette(pal_mode) or ())
        yield f"transparency={img.info.get('transparency')!r}|".encode()
        yield img.tobytes()

    @classmethod
    def hash_kwargs(cls, **kwargs: Any) -> str:
        """blake3 hex digest over all kwargs in sorted-key order (the cache passes model_id, modality,
        item and the HF-processor kwargs). Raises TypeError for a value it cannot serialize."""
        h = blake3()
        for k in sorted(kwargs):
            for chunk in cls.iter_item_bytes(k, kwargs[k]):
                h.update(chunk)
        return h.hexdigest()


def item_nbytes(value: Item) -> int:
    """Bytes held by one cached item (sum of its tensors' ``nbytes``)."""
    return sum(t.nbytes for t in value.values() if is_tensor(t))


def _ceil_gib(nbytes: int) -> float:
    """``nbytes`` in GiB rounded up to 6 significant digits (a setting that holds it)."""
    digits = 5 - math.floor(math.log10(nbytes / GiB))
    return math.ceil(nbytes / GiB * 10 ** digits) / 10 ** digits


def _trackable(t):
    """``t``, or a normal clone of an inference tensor (those keep no version counter)."""
    if is_tensor(t) and t.is_inference():
        import torch

        with torch.inference_mode(False):
            return t.clone()
    return t


def _tensor_versions(value: Item) -> tuple[int, ...]:
    return tuple(t._version for t in value.values() if is_tensor(t))


class ProcessingCache:
    """LRU of processed items bounded by ``capacity_bytes`` (bytes; 0 stores nothing). Counters:
    ``hits``, ``misses``, ``evictions``, ``rejected`` (larger than the capacity), ``invalidated``,
    ``bytes`` (held now)."""

    def __init__(self, capacity_bytes: int):
        self.capacity_bytes = int(check_size("capacity_bytes", capacity_bytes))
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
        """A new dict of the cached item's tensors for ``key``, or None; counts a hit or a miss.

        No tensor is copied: each get and put hands out its own dict, and an entry whose tensors were
        changed in place since stored (torch's ``_version``) is dropped as a miss (``invalidated``).
        Writes that bypass the version counter (``.data``, ``.numpy()`` views) are not seen."""
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

    def put(self, key: str, value: Item, oversize: str = "skip", *, nbytes: Optional[int] = None) -> bool:
        """Store ``value``; True if stored. An item alone larger than the capacity is not stored and
        evicts nothing: ``oversize="skip"`` returns False, ``"raise"`` raises CacheItemTooLargeError
        (a ValueError("value too large ..."), as 0.9.0's cachetools cache). ``nbytes`` (ours) sizes
        the entry instead of its tensors: a start-up plan stores ``{}`` of the processed size."""
        size = item_nbytes(value) if nbytes is None else nbytes
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
        """Drop every entry and zero every counter, as vLLM's ``LRUCache.clear``; the capacity is kept
        (the registry's ``ProcessingStats`` are reset by ``MultiModalRegistry.reset_stats``)."""
        with self._lock:
            self._data.clear()
            self._versions.clear()
            self.bytes = 0
            self.hits = self.misses = self.evictions = self.rejected = self.invalidated = 0

    @property
    def order(self) -> tuple[str, ...]:
        """The keys from least to most recently used (the next eviction first)."""
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
