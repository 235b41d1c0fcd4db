"""Count the ATen ops a piece of code dispatches, and the ones that make the host wait for the device.

Not a vLLM file: the check a vLLM performance engineer makes by hand (design-notes "A step a GPU
can see"). A ``TorchDispatchMode`` sees every op below autograd, on any device, so the count is
the same on the CPU as on a GPU and needs none::

    with DispatchCounter() as c:
        engine.step()
    c.num_ops, c.num_syncs, c.syncs          # ops, sync-inducing ops, which ones

Sync-inducing (``SYNC_OPS``): a device-to-host read of a value (``aten._local_scalar_dense``,
``aten.item``, ``aten.is_nonzero``), an op whose output size depends on the data (``aten.nonzero``,
``aten.masked_select``, boolean indexing, ``aten.repeat_interleave`` with tensor repeats and no
``output_size``), and a blocking copy between the CPU and another device (seen only where a second
device exists: on a CPU-only run every tensor is on the CPU). ``Tensor.tolist()`` reads memory
without dispatching a read op: on a GPU it is one device-to-host copy, counted there.
"""
from __future__ import annotations

from collections import Counter
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["SYNC_OPS", "DispatchCounter", "is_sync"]

# Ops that read a device value to the host, or whose output shape depends on device data.
SYNC_OPS = frozenset({"aten._local_scalar_dense", "aten.item", "aten.is_nonzero", "aten.nonzero",
                      "aten.masked_select", "aten.unique", "aten._unique2", "aten.nonzero_static_"})
_COPIES = frozenset({"aten._to_copy", "aten.copy_"})


def _device_of(x: Any) -> torch.device | None:
    return x.device if isinstance(x, torch.Tensor) else None


def is_sync(name: str, args: tuple, kwargs: dict) -> bool:
    """Whether op ``name`` (an overload packet, e.g. ``"aten.nonzero"``) called on ``args`` /
    ``kwargs`` makes the host wait for the device (module docstring)."""
    if name in SYNC_OPS:
        return True
    if name == "aten.repeat_interleave":     # tensor repeats: output size read from the device
        repeats = args[0] if len(args) == 1 else args[1] if len(args) > 1 else kwargs.get("repeats")
        return isinstance(repeats, torch.Tensor) and kwargs.get("output_size") is None
    if name in ("aten.index", "aten.index_put", "aten.index_put_"):   # boolean masks: a nonzero inside
        indices = args[1] if len(args) > 1 else kwargs.get("indices", ())
        return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in indices or ())
    if name in _COPIES:
        if name == "aten.copy_":
            dst, src = _device_of(args[0]), _device_of(args[1])
            non_blocking = bool(args[2]) if len(args) > 2 else bool(kwargs.get("non_blocking", False))
        else:
            src, dst = _device_of(args[0]), kwargs.get("device") or _device_of(args[0])
            non_blocking = bool(kwargs.get("non_blocking", False))
        if src is None or dst is None:
            return False
        src_t, dst_t = torch.device(src).type, torch.device(dst).type
        if src_t == dst_t:
            return False
        return dst_t == "cpu" or not non_blocking      # device-to-host always waits; host-to-device if blocking
    return False


class DispatchCounter(TorchDispatchMode):
    """Counts ops (``ops``: overload packet name -> calls) and sync-inducing ops (``syncs``) while
    active. ``num_ops`` / ``num_syncs``: totals; ``reset()`` zeroes both. Re-enterable: use one
    counter per measured span, or ``reset()`` between spans."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: Counter[str] = Counter()
        self.syncs: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = str(func.overloadpacket)
        name = name if name.startswith("aten.") else f"aten.{name}"
        self.ops[name] += 1
        if is_sync(name, args, kwargs):
            self.syncs[name] += 1
        return func(*args, **kwargs)

    @property
    def num_ops(self) -> int:
        return sum(self.ops.values())

    @property
    def num_syncs(self) -> int:
        return sum(self.syncs.values())

    def reset(self) -> None:
        self.ops.clear()
        self.syncs.clear()
