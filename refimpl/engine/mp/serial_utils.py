"""Messages between the front end (P0) and the engine core (P1): pickle 5, tensors out of band.

As ``vllm/v1/serial_utils.py`` (0.9.0, msgpack): each tensor's buffer is its own ZMQ frame,
not copied into the message; decoding copies each once into a writable bytearray. Pickle runs
code while loading: ``decode`` only reads frames from the engine's own child (core_client).
"""
from __future__ import annotations

import io
import pickle
from typing import Any, Sequence

import numpy as np
import torch


def _rebuild_tensor(arr: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    return torch.from_numpy(arr).view(dtype)


def _rebuild_scalar(value, dtype: torch.dtype) -> torch.Tensor:
    return torch.tensor(value, dtype=dtype)


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj):
        if not (isinstance(obj, torch.Tensor) and obj.device.type == "cpu" and obj.numel()):
            return NotImplemented
        t = obj.detach()
        if t.dim() == 0:
            return _rebuild_scalar, (t.item(), t.dtype)
        # Viewed as bytes so every dtype (bfloat16 too) has a numpy counterpart.
        return _rebuild_tensor, (t.contiguous().view(torch.uint8).numpy(), t.dtype)


def encode(obj: Any) -> list[bytes | memoryview]:
    """Frames of ``obj``: the pickle stream, then one frame per tensor / array buffer (zero-copy)."""
    buffers: list[pickle.PickleBuffer] = []
    f = io.BytesIO()
    _Pickler(f, protocol=5, buffer_callback=buffers.append).dump(obj)
    return [f.getbuffer(), *(b.raw() for b in buffers)]


def decode(frames: Sequence[bytes | memoryview]) -> Any:
    """Inverse of ``encode``. Only for frames from the engine's own child / parent."""
    return pickle.loads(frames[0], buffers=[bytearray(b) for b in frames[1:]])


def nbytes(frames: Sequence[bytes | memoryview]) -> int:
    """Bytes the frames put on the wire."""
    return sum(memoryview(b).nbytes for b in frames)
