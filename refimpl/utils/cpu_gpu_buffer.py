"""A host buffer and its device twin, filled with numpy and copied once, non-blocking.

Mirrors ``CpuGpuBuffer`` of ``vllm/v1/utils.py`` (0.10.2+): the host tensor is pinned where CUDA is
available (so ``copy_(non_blocking=True)`` does not wait), numpy writes into it without a torch op.
On a CPU device the "device" tensor is the host tensor itself (vLLM's ``cpu.to("cpu")`` is the same
tensor) and ``copy_to_gpu`` copies nothing.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import torch

__all__ = ["CpuGpuBuffer", "StagingBuffer"]


class CpuGpuBuffer:
    """``cpu`` (pinned when CUDA is available and ``pin_memory`` is not False), ``np`` (its numpy view),
    ``gpu`` (on ``device``). Shapes and dtype as ``torch.zeros(*size, dtype=dtype)``."""

    def __init__(self, *size: int, dtype: torch.dtype, device: torch.device, pin_memory: Optional[bool] = None):
        device = torch.device(device)
        pin = torch.cuda.is_available() if pin_memory is None else pin_memory
        self.cpu = torch.zeros(*size, dtype=dtype, device="cpu", pin_memory=pin and device.type != "cpu")
        self.np: np.ndarray = self.cpu.numpy()
        self.gpu = self.cpu if device.type == "cpu" else torch.zeros_like(self.cpu, device=device)

    def copy_to_gpu(self, n: Optional[int] = None) -> torch.Tensor:
        """The first ``n`` elements (all by default) copied host-to-device, non-blocking; the device view."""
        if self.gpu is self.cpu:
            return self.gpu if n is None else self.gpu[:n]
        if n is None:
            return self.gpu.copy_(self.cpu, non_blocking=True)
        return self.gpu[:n].copy_(self.cpu[:n], non_blocking=True)


class StagingBuffer:
    """All of a step's int64 inputs in one flat CpuGpuBuffer: ``stage`` packs named numpy arrays,
    copies once and returns device views of each array's shape. Grows (doubling) when a step needs
    more. The host may refill it once the step's copy has run: the runner reads the sampled ids back
    at the end of each step, after which every copy the step queued has completed; on CUDA an event
    recorded after each copy is waited on before the next fill, which covers a step that reads
    nothing back (a partial prefill) and otherwise returns at once.
    ``num_copies``: host-to-device copies issued (one per ``stage``)."""

    def __init__(self, device: torch.device, capacity: int = 1 << 14, pin_memory: Optional[bool] = None):
        self.device, self.pin_memory, self.num_copies = torch.device(device), pin_memory, 0
        self.buffer = CpuGpuBuffer(capacity, dtype=torch.int64, device=self.device, pin_memory=pin_memory)
        self._copied: Optional[torch.cuda.Event] = None

    @property
    def capacity(self) -> int:
        return self.buffer.np.shape[0]

    def stage(self, arrays: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
        """Device int64 tensors with ``arrays``' names and shapes, from one non-blocking copy."""
        sizes = [int(a.size) for a in arrays.values()]
        total = sum(sizes)
        if total > self.capacity:
            self.buffer = CpuGpuBuffer(max(total, 2 * self.capacity), dtype=torch.int64, device=self.device,
                                       pin_memory=self.pin_memory)
        if self._copied is not None:
            self._copied.synchronize()              # the last copy out of the host buffer is done
        host, off = self.buffer.np, 0
        for a, n in zip(arrays.values(), sizes):
            host[off:off + n] = a.reshape(-1)
            off += n
        flat = self.buffer.copy_to_gpu(total)
        if self.device.type == "cuda":
            self._copied = torch.cuda.Event()
            self._copied.record()
        self.num_copies += 1
        parts = flat.split(sizes) if len(sizes) > 1 else (flat,)
        return {k: (p if a.ndim == 1 else p.view(a.shape)) for (k, a), p in zip(arrays.items(), parts)}
