"""Messages between the front end (P0) and the engine core (P1): pickle protocol 5, tensors out of band.

vLLM 0.9.0 (``vllm/v1/serial_utils.py``) encodes with msgpack and sends each tensor's
backing buffer as its own ZMQ frame, without copying it into the message. We do the same
with the standard library: a pickler whose ``reducer_override`` turns a CPU tensor into a
numpy array, which pickle 5 hands to ``buffer_callback`` as an out-of-band buffer; the frames
are ``[header, buffer, buffer, ...]``. Decoding copies each buffer once into a writable
bytearray (torch refuses read-only memory), then rebuilds the tensors on it.

Pickle runs code while it loads. ``decode`` is only called on frames that came from the
process this engine spawned (see ``core_client``: private IPC directory, per-engine secret).
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
