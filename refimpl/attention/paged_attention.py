"""Paged attention on a block-table KV cache, in plain torch.

Plays the role of vLLM's attention backends (``vllm/v1/attention/backends/flash_attn.py``:
``reshape_and_cache_flash`` writes K/V by slot mapping, the kernel reads K/V through block
tables). Layout per decoder layer, shared by every KV-cache group (self- and cross-attention
blocks come from one BlockPool, so their block ids are disjoint)::

    kv_cache: (2, num_blocks, block_size, num_heads, head_dim)   [0] = K, [1] = V
    slot = block_id * block_size + offset_in_block

Read path here: ``paged_attention`` (decoder self-attention, and the general reference)
gathers each request's blocks into a padded batch ``(B, max_blocks * block_size)`` and runs
``torch.nn.functional.scaled_dot_product_attention`` with a boolean mask (key ``j`` visible
iff ``j < seq_len`` and, when causal, ``j <= position of the query``). The mask depends only
on the step's metadata, so ``build_attention_mask`` makes it once per step and every layer
reuses it. Self-attention holds few blocks (the decoded tokens), so the copy is small.
Cross-attention (1500 keys per request, written once) reads its blocks another way: see
refimpl/attention/cross_attention.py.

What vLLM's kernels do instead: FlashAttention / FlashInfer read K/V through the block table
inside the kernel, block by block, with an online softmax (split-KV for long contexts), so
they never materialise a gathered copy nor a mask, whatever the fragmentation of the pool.

Left out: FlashAttention / FlashInfer kernels, cascade attention, sliding windows, fp8 KV.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import torch
import torch.nn.functional as F


def pad_block_table(blocks: list[list[int]]) -> np.ndarray:
    """Block ids per request -> (B, max_blocks) int64, rows zero-padded (at least 1 column)."""
    width = max((len(b) for b in blocks), default=0)
    table = np.zeros((len(blocks), max(width, 1)), dtype=np.int64)
    for i, b in enumerate(blocks):
        table[i, :len(b)] = b
    return table


def compute_slot_mapping(table: np.ndarray, req_idx: np.ndarray, positions: np.ndarray,
                         block_size: int) -> np.ndarray:
    """Slot of each token: ``table[req, pos // block_size] * block_size + pos % block_size``.

    ``req_idx`` / ``positions`` (N,) int64 -> (N,) int64 (vLLM: ``BlockTable.compute_slot_mapping``).
    """
    return table[req_idx, positions // block_size] * block_size + positions % block_size


def write_kv(kv_cache: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
             slot_mapping: torch.Tensor) -> None:
    """Scatter ``key``/``value`` (N, H, D) into ``kv_cache`` at ``slot_mapping`` (N,) int64.

    Slots < 0 are skipped (vLLM's padding slot id is -1).
    """
    if key.shape[0] == 0:
        return
    flat = kv_cache.view(2, -1, kv_cache.shape[-2], kv_cache.shape[-1])
    valid = slot_mapping >= 0
    if not bool(valid.all()):
        key, value, slot_mapping = key[valid], value[valid], slot_mapping[valid]
    flat[0].index_copy_(0, slot_mapping, key.to(flat.dtype))
    flat[1].index_copy_(0, slot_mapping, value.to(flat.dtype))


def pad_queries(query: torch.Tensor, query_start_loc: torch.Tensor):
    """Flattened queries (T, H, D) -> padded (B, max_q, H, D), plus (req_idx, local_idx) (T,).

    ``query_start_loc`` (B + 1,) int64 holds cumulative query lengths starting at 0. When
    every request has one query (a pure decode step) the padded batch is a view of ``query``.
    """
    num_reqs, num_tokens = query_start_loc.shape[0] - 1, query.shape[0]
    if num_tokens == num_reqs:
        idx = torch.arange(num_tokens, device=query.device)
        return query.unsqueeze(1), idx, torch.zeros_like(idx)
    q_lens = query_start_loc[1:] - query_start_loc[:-1]
    req_idx = torch.repeat_interleave(torch.arange(num_reqs, device=query.device), q_lens)
    local_idx = torch.arange(num_tokens, device=query.device) - query_start_loc[req_idx]
    max_q = int(q_lens.max()) if num_reqs else 0
    padded = query.new_zeros(num_reqs, max_q, *query.shape[1:])
    padded[req_idx, local_idx] = query
    return padded, req_idx, local_idx


def gather_kv(kv_cache: torch.Tensor, block_table: torch.Tensor):
    """K and V of each request (B, H, max_blocks * block_size, D) read through ``block_table``.

    ``block_table`` (B, max_blocks) int64; padding entries may hold any valid block id.
    """
    kv = kv_cache[:, block_table]                  # (2, B, nb, bs, H, D)
    two, b, nb, bs, h, d = kv.shape
    kv = kv.reshape(2, b, nb * bs, h, d).transpose(2, 3)
    return kv[0], kv[1]


def build_attention_mask(query_start_loc: torch.Tensor, seq_lens: torch.Tensor, max_k: int,
                         *, causal: bool) -> torch.Tensor:
    """Boolean mask (B, 1, max_q, max_k) for ``paged_attention``, built once per step.

    Key ``j`` is visible to query ``i`` of request ``b`` iff ``j < seq_lens[b]`` and, with
    ``causal``, ``j <= seq_lens[b] - q_len[b] + i``. Padded query rows see key 0 (their
    output is dropped; an all-False row would give NaN). ``max_k``: gathered keys per request
    (``block_table.shape[1] * block_size``).
    """
    q_lens = query_start_loc[1:] - query_start_loc[:-1]
    max_q = int(q_lens.max()) if q_lens.numel() else 0
    key_pos = torch.arange(max_k, device=seq_lens.device)
    mask = key_pos[None, None, :] < seq_lens[:, None, None]            # (B, 1, K)
    if causal and max_q > 1:
        q_pos = (seq_lens - q_lens)[:, None] + torch.arange(max_q, device=seq_lens.device)[None]
        mask = mask & (key_pos[None, None, :] <= q_pos[:, :, None])    # (B, Q, K)
    else:       # one query per request: its causal limit is seq_len - 1, the length limit
        mask = mask.expand(-1, max_q, -1)
    mask = mask.clone()
    mask[..., 0] = True
    return mask[:, None]


def paged_attention(query: torch.Tensor, kv_cache: torch.Tensor, query_start_loc: torch.Tensor,
                    seq_lens: torch.Tensor, block_table: torch.Tensor, *, causal: bool,
                    scale: float = 1.0, mask: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Attention of flattened ``query`` (T, H, D) against the paged KV of each request.

    Request ``b`` owns queries ``query_start_loc[b]:query_start_loc[b+1]`` and attends to
    its first ``seq_lens[b]`` cached keys. With ``causal`` the queries are the last
    ``q_len`` positions of the sequence (query ``i`` sees keys ``<= seq_len - q_len + i``);
    without it (cross-attention) every query sees all ``seq_lens[b]`` keys. ``scale`` is the
    softmax scale (1.0 when the queries are pre-scaled, as Whisper's are). ``mask``: the
    step's ``build_attention_mask`` (built here when None). Returns (T, H, D) in the query dtype.
    """
    if query.shape[0] == 0:
        return query
    q_pad, req_idx, local_idx = pad_queries(query, query_start_loc)
    k, v = gather_kv(kv_cache, block_table)
    if mask is None:
        mask = build_attention_mask(query_start_loc, seq_lens, k.shape[2], causal=causal)
    if k.dtype != query.dtype:
        k, v = k.to(query.dtype), v.to(query.dtype)
    out = F.scaled_dot_product_attention(q_pad.transpose(1, 2), k, v, attn_mask=mask, scale=scale)
    return out.transpose(1, 2)[req_idx, local_idx]
