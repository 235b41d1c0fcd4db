"""Paged attention on a block-table KV cache, in plain torch.

Plays vLLM's attention backends (``v1/attention/backends/flash_attn.py``): K/V written by slot
mapping, read through block tables, self- and cross-attention blocks from one pool::

    kv_cache: (2, num_blocks, block_size, num_heads, head_dim)   [0] = K, [1] = V
    slot = block_id * block_size + offset_in_block

Left out: FlashAttention / FlashInfer (in-kernel block reads, no gathered copy or mask),
cascade attention, sliding windows, fp8 KV.
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
    """Slot of each token (``BlockTable.compute_slot_mapping``): ``req_idx`` / ``positions`` (N,) int64
    -> (N,) int64."""
    return table[req_idx, positions // block_size] * block_size + positions % block_size


def reshape_and_cache(kv_cache: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                      slot_mapping: torch.Tensor) -> None:
    """Scatter ``key``/``value`` (N, H, D) into ``kv_cache`` at ``slot_mapping`` (N,) int64, every slot
    valid (>= 0, by construction of the runner's host slot mapping): no data-dependent branch, so the
    host never waits for the device (vLLM's ``reshape_and_cache_flash``, which skips slot -1 in-kernel)."""
    flat = kv_cache.view(2, -1, kv_cache.shape[-2], kv_cache.shape[-1])
    flat[0].index_copy_(0, slot_mapping, key.to(flat.dtype))
    flat[1].index_copy_(0, slot_mapping, value.to(flat.dtype))


def write_kv(kv_cache: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
             slot_mapping: torch.Tensor) -> None:
    """Scatter ``key``/``value`` (N, H, D) into ``kv_cache`` at ``slot_mapping`` (N,); slots < 0 skipped.
    Reads the mask back to the host (one sync): the serving step calls ``reshape_and_cache``."""
    if key.shape[0] == 0:
        return
    valid = slot_mapping >= 0
    if not bool(valid.all()):
        key, value, slot_mapping = key[valid], value[valid], slot_mapping[valid]
    reshape_and_cache(kv_cache, key, value, slot_mapping)


def query_padding(query_start_loc: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Host side of ``pad_queries``: ``query_start_loc`` (B + 1,) int64 -> (req_idx, local_idx) (T,) int64
    and max_q, all from numpy (no device read)."""
    q_lens = np.diff(query_start_loc)
    req_idx = np.repeat(np.arange(len(q_lens)), q_lens)
    local_idx = np.arange(int(query_start_loc[-1])) - query_start_loc[:-1][req_idx]
    return req_idx, local_idx, int(q_lens.max(initial=0))


def pad_queries(query: torch.Tensor, query_start_loc: torch.Tensor,
                padding: Optional[tuple[torch.Tensor, torch.Tensor, int]] = None):
    """Flattened queries (T, H, D) -> padded (B, max_q, H, D) and (req_idx, local_idx) (T,);
    ``query_start_loc`` (B + 1,) int64. A pure decode step gives a view. ``padding``: (req_idx,
    local_idx, max_q) from ``query_padding`` on the device; without it they are derived on the
    device, which reads max_q back to the host (a sync)."""
    num_reqs, num_tokens = query_start_loc.shape[0] - 1, query.shape[0]
    if num_tokens == num_reqs:
        idx = torch.arange(num_tokens, device=query.device)
        return query.unsqueeze(1), idx, torch.zeros_like(idx)
    if padding is not None:
        req_idx, local_idx, max_q = padding
    else:
        q_lens = query_start_loc[1:] - query_start_loc[:-1]
        req_idx = torch.repeat_interleave(torch.arange(num_reqs, device=query.device), q_lens)
        local_idx = torch.arange(num_tokens, device=query.device) - query_start_loc[req_idx]
        max_q = int(q_lens.max()) if num_reqs else 0
    padded = query.new_zeros(num_reqs, max_q, *query.shape[1:])
    padded[req_idx, local_idx] = query
    return padded, req_idx, local_idx


def gather_kv(kv_cache: torch.Tensor, block_table: torch.Tensor):
    """K and V of each request (B, H, max_blocks * block_size, D) through ``block_table`` (B, max_blocks)."""
    kv = kv_cache[:, block_table]                  # (2, B, nb, bs, H, D)
    two, b, nb, bs, h, d = kv.shape
    kv = kv.reshape(2, b, nb * bs, h, d).transpose(2, 3)
    return kv[0], kv[1]


def build_attention_mask(query_start_loc: torch.Tensor, seq_lens: torch.Tensor, max_k: int,
                         *, causal: bool, max_q: Optional[int] = None) -> torch.Tensor:
    """Boolean mask (B, 1, max_q, max_k), once per step: key j visible to query i of request b iff
    j < seq_lens[b] and, causal, j <= seq_lens[b] - q_len[b] + i. Padded rows see key 0. ``max_q``
    from the host (else read back from the device: a sync)."""
    q_lens = query_start_loc[1:] - query_start_loc[:-1]
    if max_q is None:
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
                    scale: float = 1.0, mask: Optional[torch.Tensor] = None,
                    padding: Optional[tuple[torch.Tensor, torch.Tensor, int]] = None) -> torch.Tensor:
    """Attention of ``query`` (T, H, D) against each request's first ``seq_lens[b]`` cached keys;
    ``causal``: the queries are the last q_len positions. ``scale``: softmax scale (1.0 for
    pre-scaled queries); ``mask``: the step's (built when None); ``padding``: ``pad_queries``'.
    Returns (T, H, D) in the query dtype."""
    if query.shape[0] == 0:
        return query
    decode = query.shape[0] == query_start_loc.shape[0] - 1     # one query per request
    if decode:
        q_pad = query.unsqueeze(1)
    else:
        q_pad, req_idx, local_idx = pad_queries(query, query_start_loc, padding)
    k, v = gather_kv(kv_cache, block_table)
    if mask is None:
        mask = build_attention_mask(query_start_loc, seq_lens, k.shape[2], causal=causal)
    if k.dtype != query.dtype:
        k, v = k.to(query.dtype), v.to(query.dtype)
    out = F.scaled_dot_product_attention(q_pad.transpose(1, 2), k, v, attn_mask=mask, scale=scale)
    if decode:
        return out.transpose(1, 2).squeeze(1)
    return out.transpose(1, 2)[req_idx, local_idx]
