"""The byte paths of vLLM's ``MultiModalHasher`` by release, for the start-up rows.

Mirrors ``vllm/multimodal/hasher.py`` of 0.8.5, 0.9.0, 0.9.2 and 0.11.0 (full copies per hash):

  ``v0.8.5``  ``tobytes()`` of the raw data: 1; no dtype, shape or mode in the key.
  ``v0.9.0``  ``tobytes()``, glued with ``+`` and ``b"".join``: 3 (tensor 4, PIL image 6).
  ``v0.9.2``  the array's buffer instead of ``tobytes()``: 2.
  ``stream``  chunks straight into blake3: none (refimpl's ``MultiModalHasher``).

The ``v0.9.*`` keys differ from refimpl's. Left out: the pickle fallback, ``hash_prompt_mm_data``.
"""
from __future__ import annotations

import pickle
from typing import Any, Iterator, Union

import numpy as np
import torch
from blake3 import blake3
from PIL import Image

from refimpl.multimodal.cache import MultiModalHasher
from refimpl.multimodal.hash_paths import BYTE_PATHS, HASH_COPIES  # noqa: F401 - their torch-free home; importable here as before

Buf = Union[bytes, memoryview]


def _serialize_item(obj: Any, copy_arrays: bool) -> Buf:
    """One item as bytes, the vLLM 0.9 way (``copy_arrays``: 0.9.0's ``tobytes()``)."""
    if isinstance(obj, (bytes, memoryview)):
        return obj
    if isinstance(obj, str):
        return obj.encode("utf-8")
    if isinstance(obj, (int, float)):
        return np.array(obj).tobytes()
    if isinstance(obj, Image.Image):
        rgba = obj if obj.mode == "RGBA" else obj.convert("RGBA")  # vLLM: convert_image_mode
        return _item_to_bytes("image", np.asarray(rgba), copy_arrays)
    if isinstance(obj, torch.Tensor):
        return _item_to_bytes("tensor", obj.numpy(), copy_arrays)
    if isinstance(obj, np.ndarray):
        data = obj.tobytes() if copy_arrays or not obj.flags.c_contiguous else obj.data
        return _item_to_bytes("ndarray", {"dtype": obj.dtype.str, "shape": obj.shape, "data": data},
                              copy_arrays)
    return pickle.dumps(obj)


def _iter_item_to_bytes(key: str, obj: Any, copy_arrays: bool) -> Iterator[tuple[bytes, Buf]]:
    """(key bytes, value bytes) of each leaf; lists and dicts recurse with dotted keys."""
    if isinstance(obj, (list, tuple)):
        for i, elem in enumerate(obj):
            yield from _iter_item_to_bytes(f"{key}.{i}", elem, copy_arrays)
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from _iter_item_to_bytes(f"{key}.{k}", v, copy_arrays)
    else:
        yield key.encode("utf-8"), _serialize_item(obj, copy_arrays)


def _item_to_bytes(key: str, obj: Any, copy_arrays: bool) -> bytes:
    # Each pair is glued with + (one copy of the value), then all pairs are joined (one more
    # copy, unless there is a single pair: CPython returns that bytes object itself).
    return b"".join([kb + vb for kb, vb in _iter_item_to_bytes(key, obj, copy_arrays)])


def _serialize_v085(obj: Any) -> bytes:
    """One item as bytes, the vLLM 0.8.5 way: the raw data alone."""
    if isinstance(obj, str):
        return obj.encode("utf-8")
    if isinstance(obj, bytes):
        return obj
    if isinstance(obj, Image.Image):
        return obj.tobytes()
    if isinstance(obj, torch.Tensor):
        obj = obj.numpy()
    if isinstance(obj, (int, float)):
        obj = np.array(obj)
    return obj.tobytes() if isinstance(obj, np.ndarray) else pickle.dumps(obj)


def _iter_v085(key: str, obj: Any) -> Iterator[tuple[bytes, bytes]]:
    if isinstance(obj, (list, tuple)):
        for i, elem in enumerate(obj):
            yield from _iter_v085(f"{key}.{i}", elem)
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from _iter_v085(f"{key}.{k}", v)
    else:
        yield key.encode("utf-8"), _serialize_v085(obj)


def hash_kwargs_v09(copy_arrays: bool, **kwargs: Any) -> str:
    """blake3 hex digest of ``kwargs`` in call order by 0.9.0's byte path (``copy_arrays``) or 0.9.2's."""
    h = blake3()
    for k, v in kwargs.items():
        for kb, vb in _iter_item_to_bytes(k, v, copy_arrays):
            h.update(kb)
            h.update(vb)
    return h.hexdigest()


def hash_kwargs_by(byte_path: str, **kwargs: Any) -> str:
    """Hash ``kwargs`` by ``byte_path`` (one of BYTE_PATHS). Raises ValueError for another path."""
    if byte_path == "stream":
        return MultiModalHasher.hash_kwargs(**kwargs)
    if byte_path not in BYTE_PATHS:
        raise ValueError(f"unknown hash byte path {byte_path!r}; one of {BYTE_PATHS}")
    if byte_path == "v0.8.5":
        h = blake3()
        for k, v in kwargs.items():
            for kb, vb in _iter_v085(k, v):
                h.update(kb)
                h.update(vb)
        return h.hexdigest()
    return hash_kwargs_v09(byte_path == "v0.9.0", **kwargs)
