"""The running requests' cross-attention K/V, one row per request, where one batched call reads them.

Plays the part of ``vllm/v1/worker/gpu_input_batch.py``'s ``InputBatch`` for the "dense-once" read:
a request takes a row when the runner first sees it, the rows stay dense (``condense`` on finish or
preemption moves the last row into the hole, as ``InputBatch.condense`` does), and the runner orders
its batch by row, so a step's cross K/V are the view ``[:, :B]`` of one tensor per layer::

    layer tensor: (2, capacity, num_heads, encoder_len, head_dim)   [0] = K, [1] = V

vLLM's kernels read cross K/V from the paged blocks; plain torch has no such kernel, so the rows are
a copy written once per request (``dense_copy_bytes`` budgets them). Capacity grows by doubling up to
``max_num_seqs`` (beyond it only if more requests hold rows) and is kept for the engine's life, as
vLLM's persistent batch is: a round of requests after the first allocates nothing (``release`` frees
the tensors where a caller wants the memory back while the engine idles).
"""
from __future__ import annotations

from typing import Optional

import torch

__all__ = ["CrossKVSlots"]


class CrossKVSlots:
    """Rows of per-layer cross K/V: ``row_of`` (req_id -> row), ``req_ids`` (row -> req_id), ``layers``
    (one tensor per decoder layer, or none while no request holds a row)."""

    def __init__(self, num_layers: int, num_heads: int, encoder_len: int, head_dim: int,
                 dtype: torch.dtype, device: torch.device, max_rows: int):
        self.num_layers, self.shape = num_layers, (num_heads, encoder_len, head_dim)
        self.dtype, self.device, self.max_rows = dtype, device, max_rows
        self.layers: list[torch.Tensor] = []
        self.req_ids: list[str] = []
        self.row_of: dict[str, int] = {}

    @property
    def capacity(self) -> int:
        return self.layers[0].shape[1] if self.layers else 0

    @property
    def row_bytes(self) -> int:
        """Bytes one request's rows take over all layers (K and V)."""
        h, n, d = self.shape
        return self.num_layers * 2 * h * n * d * torch.empty((), dtype=self.dtype).element_size()

    def add(self, req_id: str) -> int:
        """A row for ``req_id`` (the next free one; capacity grown if full). Its K/V are written later."""
        if req_id in self.row_of:
            return self.row_of[req_id]
        n = len(self.req_ids)
        if n == self.capacity:
            self._grow(max(n + 1, min(2 * n, self.max_rows)))
        self.req_ids.append(req_id)
        self.row_of[req_id] = n
        return n

    def _grow(self, capacity: int) -> None:
        n = len(self.req_ids)
        new = [torch.empty((2, capacity, *self.shape), dtype=self.dtype, device=self.device)
               for _ in range(self.num_layers)]
        for old, t in zip(self.layers, new):
            t[:, :n].copy_(old[:, :n])
        self.layers = new

    def remove(self, req_id: str) -> None:
        """Free ``req_id``'s row (nothing if it holds none): the last row moves into it (condense).
        The tensors stay allocated (``release`` frees them)."""
        row = self.row_of.pop(req_id, None)
        if row is None:
            return
        last = len(self.req_ids) - 1
        if row != last:
            moved = self.req_ids[last]
            for t in self.layers:
                t[:, row].copy_(t[:, last])
            self.req_ids[row], self.row_of[moved] = moved, row
        self.req_ids.pop()

    def release(self) -> None:
        """Free the tensors while no request holds a row (the next ``add`` allocates again).

        Raises:
            RuntimeError: a request still holds a row.
        """
        if self.req_ids:
            raise RuntimeError(f"{len(self.req_ids)} requests hold cross K/V rows: remove them first")
        self.layers = []

    def rows(self, req_ids: list[str]) -> Optional[list[int]]:
        """Rows of ``req_ids`` in order; None when they are exactly 0..len-1 (the batch is a view)."""
        rows = [self.row_of[r] for r in req_ids]
        return None if rows == list(range(len(rows))) else rows
