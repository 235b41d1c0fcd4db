"""The byte paths of vLLM's ``MultiModalHasher`` across versions, for the start-up variants.

Mirrors ``vllm/multimodal/hasher.py`` as released in vLLM 0.8.5, 0.9.0, 0.9.2 and 0.11.0. All
feed blake3 the key and value bytes of every (nested) item; they differ in what they read and
in how many full-size copies of an item they make on the way (per hash, hits included):

``v0.8.5``  ``serialize_item`` returns ``tobytes()`` of an ndarray, tensor (via ``.numpy()``)
            or PIL image as it is: 1 copy; no dtype, shape or mode, so two arrays with the same
            bytes and another shape share a key.
``v0.9.0``  ``serialize_item`` returns one ``bytes`` per item: an ndarray is copied by
            ``tobytes()``, its (key, value) pairs are glued with ``+`` and then with
            ``b"".join``: 3 copies of an ndarray; a tensor goes through ``.numpy()`` and one
            more ``+``: 4; a PIL image is converted to RGBA and read with ``np.asarray`` first: 6.
``v0.9.2``  PR #19484 ("Do not copy array during hashing") hands the array's buffer instead of
            ``tobytes()``; the ``+`` and ``join`` stay: 2 copies of an ndarray.
``stream``  PR #24925 ("Don't convert memoryviews to bytes during hashing", vLLM 0.11.0) yields
            key and value chunks straight into blake3: no copy of a contiguous array. refimpl's
            own ``MultiModalHasher`` (refimpl/multimodal/cache.py) takes this path.

The ``v0.9.*`` paths hash what vLLM 0.9 hashed (images as RGBA pixels, arrays as dtype, shape,
data; kwargs in call order), so their keys differ from refimpl's ``MultiModalHasher``; a
process uses one path throughout. Left out: the pickle fallback's warning, ``hash_prompt_mm_data``.
"""
from __future__ import annotations

import pickle
from typing import Any, Iterator, Union

import numpy as np
import torch
from blake3 import blake3
from PIL import Image

BYTE_PATHS = ("v0.8.5", "v0.9.0", "v0.9.2", "stream")
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
    """blake3 hex digest (64 chars) of ``kwargs`` by vLLM 0.9.0's byte path (``copy_arrays``
    True) or 0.9.2's (False, PR #19484). Kwargs are hashed in call order, as vLLM does."""
    h = blake3()
    for k, v in kwargs.items():
        for kb, vb in _iter_item_to_bytes(k, v, copy_arrays):
            h.update(kb)
            h.update(vb)
    return h.hexdigest()


def hash_kwargs_by(byte_path: str, **kwargs: Any) -> str:
    """Hash ``kwargs`` by ``byte_path`` (one of BYTE_PATHS). Raises ValueError for another path.

    ``stream`` is refimpl's ``MultiModalHasher.hash_kwargs`` (keys sorted, refimpl's content
    identification, no copy of contiguous arrays).
    """
    if byte_path == "stream":
        from refimpl.multimodal.cache import MultiModalHasher
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
