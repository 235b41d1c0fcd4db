"""Cross-attention of encoder-decoder models (Whisper): per-step metadata and the reads of the
running requests' cross K/V.

``CrossAttentionBuilder`` mirrors ``vllm/attention/layers/cross_attention.py`` (0.10.2); ``build`` /
``build_host`` read ``get_encoder_len("metadata")`` every step. The K/V are written once; plain
torch has no paged kernel, so ``CacheConfig.cross_attention_read`` picks the read (same tokens),
each one ``batched_cross_attention`` call per layer for all running requests: ``"dense-once"`` on
their rows of one tensor per layer (``worker/cross_kv_slots.py``), ``"paged-runs"`` on one gather
of their blocks (``gather_cross_kv_batched``). The per-request reads (``gather_cross_kv`` +
``dense_cross_attention``, ``key_segments`` + ``cross_attention``: the runner's until issue 42)
stay as references. Left out: ``create_cross_attention_backend``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from refimpl.attention.paged_attention import compute_slot_mapping, pad_block_table
from refimpl.errors import EncoderLengthMismatchError


@dataclass
class CrossAttentionMetadata:
    """One step's cross-attention metadata: ``seq_lens`` (B,), ``block_table`` (B, max_cross_blocks),
    ``slot_mapping`` (slots written this step, requests on their first step), ``query_start_loc_cpu``."""
    query_start_loc: torch.Tensor
    seq_lens: torch.Tensor
    max_seq_len: int
    block_table: torch.Tensor
    slot_mapping: torch.Tensor
    query_start_loc_cpu: list[int]


class CrossAttentionBuilder:
    """Builds CrossAttentionMetadata every step. ``model_encoder_len``: the model's
    ``max_source_positions`` (tokens), when known, to refuse any other length."""

    def __init__(self, vllm_config, block_size: int, device: torch.device,
                 model_encoder_len: Optional[int] = None):
        self.vllm_config, self.block_size, self.device = vllm_config, block_size, device
        self.model_encoder_len = model_encoder_len

    def build_host(self, encoder_seq_lens: np.ndarray,
                   cross_block_ids: list[list[int]]) -> tuple[int, dict[str, np.ndarray]]:
        """The step's metadata on the host: the encoder length read and numpy int64 arrays (staged by
        the runner, no device copy here): ``seq_lens`` (B,), ``block_table`` (B, max_cross_blocks), ``slot_mapping`` (slots written this
        step). ``encoder_seq_lens`` (B,) int64, 0 past a request's first step. Reads the encoder length
        (``get_encoder_len("metadata")``) once. Raises EncoderLengthMismatchError when the length read
        is not the model's or a request's cross blocks cannot hold it."""
        enc_len = self.vllm_config.get_encoder_len("metadata")      # hot path, every step
        if self.model_encoder_len is not None and enc_len != self.model_encoder_len:
            raise EncoderLengthMismatchError("encoder_len (metadata)", self.model_encoder_len,
                                             f"got {enc_len}")
        table = pad_block_table(cross_block_ids)
        capacity = min((len(b) for b in cross_block_ids), default=0) * self.block_size
        if cross_block_ids and max(enc_len, int(encoder_seq_lens.max(initial=0))) > capacity:
            raise EncoderLengthMismatchError(
                "cross_attention_blocks", capacity,
                f"encoder length {enc_len} exceeds the {capacity} slots of a request's cross blocks")
        req_idx = np.repeat(np.arange(len(cross_block_ids)), encoder_seq_lens)
        pos = np.concatenate([np.arange(n) for n in encoder_seq_lens]) if len(req_idx) else \
            np.zeros(0, dtype=np.int64)
        return enc_len, {"seq_lens": np.full(len(cross_block_ids), enc_len, dtype=np.int64), "block_table": table,
                "slot_mapping": compute_slot_mapping(table, req_idx, pos, self.block_size)}

    def build(self, query_start_loc: np.ndarray, encoder_seq_lens: np.ndarray,
              cross_block_ids: list[list[int]]) -> CrossAttentionMetadata:
        """Metadata from ``query_start_loc`` (B + 1,) and ``encoder_seq_lens`` (B,) int64 (0 past the first
        step), as device tensors (``build_host``'s arrays, each copied on its own). Raises as
        ``build_host``."""
        enc_len, host = self.build_host(encoder_seq_lens, cross_block_ids)

        def to(a):
            return torch.from_numpy(np.ascontiguousarray(a, dtype=np.int64)).to(self.device)
        return CrossAttentionMetadata(
            query_start_loc=to(query_start_loc), seq_lens=to(host["seq_lens"]),
            max_seq_len=enc_len,
            block_table=to(host["block_table"]), slot_mapping=to(host["slot_mapping"]),
            query_start_loc_cpu=[int(x) for x in query_start_loc])


def key_segments(block_ids: Sequence[int], seq_len: int, block_size: int) -> list[tuple[int, int]]:
    """Runs ``(first_slot, num_slots)`` covering the first ``seq_len`` slots of a request (order-free
    attention): full blocks sorted by id and merged where consecutive, then the last block's used
    slots. Raises ValueError when ``block_ids`` cannot hold ``seq_len``."""
    n_full, rem = divmod(seq_len, block_size)
    if len(block_ids) < n_full + (rem > 0):
        raise ValueError(f"{len(block_ids)} blocks cannot hold {seq_len} keys of block size {block_size}")
    ids = np.sort(np.asarray(block_ids[:n_full], dtype=np.int64))
    segs: list[tuple[int, int]] = []
    if n_full:
        breaks = np.flatnonzero(np.diff(ids) != 1) + 1
        segs = [(int(r[0]) * block_size, len(r) * block_size) for r in np.split(ids, breaks)]
    if rem:
        tail = int(block_ids[n_full]) * block_size
        ends = [s + n for s, n in segs]
        if tail in ends:
            i = ends.index(tail)
            segs[i] = (segs[i][0], segs[i][1] + rem)
        else:
            segs.append((tail, rem))
    return segs


def cross_attention(query: torch.Tensor, kv_cache: torch.Tensor, query_start_loc: Sequence[int],
                    segments: Sequence[Sequence[tuple[int, int]]], *, scale: float = 1.0) -> torch.Tensor:
    """Non-causal attention of ``query`` (T, H, D) on each request's ``segments``, read as views of
    ``kv_cache``: one SDPA for one run; several runs get scores run by run and one softmax.
    ``query_start_loc`` (B + 1,) host ints. Returns (T, H, D) in the query dtype."""
    if query.shape[0] == 0:
        return query
    h, d = kv_cache.shape[-2], kv_cache.shape[-1]
    flat, out_dtype = kv_cache.view(2, -1, h, d), query.dtype
    query = query.to(flat.dtype)           # no-op when the cache has the model dtype
    outs = []
    for b, segs in enumerate(segments):
        q = query[query_start_loc[b]:query_start_loc[b + 1]].transpose(0, 1)       # (H, q, D)
        if len(segs) == 1:
            s, n = segs[0]
            o = F.scaled_dot_product_attention(q[None], flat[0, s:s + n].transpose(0, 1)[None],
                                               flat[1, s:s + n].transpose(0, 1)[None], scale=scale)[0]
        else:
            scores = torch.cat([torch.matmul(q, flat[0, s:s + n].permute(1, 2, 0)) for s, n in segs], -1)
            probs = torch.softmax(scores * scale if scale != 1.0 else scores, dim=-1)     # (H, q, seq_len)
            o, off = None, 0
            for s, n in segs:
                part = torch.matmul(probs[..., off:off + n], flat[1, s:s + n].transpose(0, 1))
                o, off = (part if o is None else o.add_(part)), off + n
        outs.append(o.transpose(0, 1))
    return (torch.cat(outs) if len(outs) > 1 else outs[0]).to(out_dtype)


def gather_cross_kv(kv_cache: torch.Tensor, block_ids: Sequence[int], seq_len: int) -> torch.Tensor:
    """One request's cross K/V from ``kv_cache`` (2, num_blocks, block_size, H, D) as a contiguous
    (2, H, seq_len, D) copy. Raises ValueError when ``block_ids`` cannot hold ``seq_len``."""
    bs = kv_cache.shape[2]
    if len(block_ids) * bs < seq_len:
        raise ValueError(f"{len(block_ids)} blocks cannot hold {seq_len} keys of block size {bs}")
    n = -(-seq_len // bs)
    idx = torch.as_tensor(list(block_ids[:n]), dtype=torch.long, device=kv_cache.device)
    kv = kv_cache.index_select(1, idx)                      # (2, n, bs, H, D): whole blocks
    kv = kv.reshape(2, n * bs, *kv.shape[-2:])[:, :seq_len]
    return kv.transpose(1, 2).contiguous()


def dense_copy_bytes(vllm_config, running: Optional[int] = None) -> int:
    """Most bytes the ``"dense-once"`` read holds outside the KV cache: ``running`` (default
    max_num_seqs) x 2 x decoder layers x max_source_positions x d_model x dtype bytes; 0 under
    ``"paged-runs"`` and for decoder-only models (vLLM's kernels hold no copy)."""
    mc = vllm_config.model_config
    if not mc.is_encoder_decoder or vllm_config.cache_config.cross_attention_read != "dense-once":
        return 0
    d = mc.hf_config_dict
    itemsize = getattr(torch, mc.dtype).itemsize
    per_request = 2 * d["decoder_layers"] * d["max_source_positions"] * d["d_model"] * itemsize
    return (vllm_config.scheduler_config.max_num_seqs if running is None else running) * per_request


def dense_cross_attention(query: torch.Tensor, query_start_loc: Sequence[int],
                          kvs: Sequence[torch.Tensor], *, scale: float = 1.0) -> torch.Tensor:
    """Attention of ``query`` (T, H, D) on each request's ``gather_cross_kv`` copy, one unmasked SDPA
    per request. Returns (T, H, D) in the query dtype."""
    if query.shape[0] == 0:
        return query
    out_dtype = query.dtype
    outs = []
    for b, kv in enumerate(kvs):
        q = query[query_start_loc[b]:query_start_loc[b + 1]].to(kv.dtype).transpose(0, 1)   # (H, q, D)
        o = F.scaled_dot_product_attention(q[None], kv[0][None], kv[1][None], scale=scale)[0]
        outs.append(o.transpose(0, 1))
    return (torch.cat(outs) if len(outs) > 1 else outs[0]).to(out_dtype)


def batched_cross_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *,
                            padding: Optional[tuple[torch.Tensor, torch.Tensor, int]] = None,
                            scale: float = 1.0) -> torch.Tensor:
    """Attention of ``query`` (T, H, D) on all running requests' cross K/V at once: ``key`` /
    ``value`` (B, H, L, D), every request ``L`` keys (the encoder length), so one unmasked SDPA.
    One query per request (T == B) needs no ``padding``; otherwise ``padding`` = (req_idx,
    local_idx, max_q) of ``paged_attention.query_padding`` on the device. Returns (T, H, D) in the
    query dtype."""
    if query.shape[0] == 0:
        return query
    out_dtype, q = query.dtype, query.to(key.dtype)
    if padding is None:                                            # (B, H, 1, D)
        return F.scaled_dot_product_attention(q.unsqueeze(2), key, value, scale=scale).squeeze(2).to(out_dtype)
    req_idx, local_idx, max_q = padding
    q_pad = q.new_zeros(key.shape[0], max_q, *q.shape[1:])
    q_pad[req_idx, local_idx] = q
    out = F.scaled_dot_product_attention(q_pad.transpose(1, 2), key, value, scale=scale)
    return out.transpose(1, 2)[req_idx, local_idx].to(out_dtype)


def gather_cross_kv_batched(kv_cache: torch.Tensor, block_table: torch.Tensor,
                            seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """All requests' cross K and V from their paged blocks in one gather: ``block_table`` (B, n) the
    first n = ceil(seq_len / block_size) cross blocks of each request -> K, V (B, H, seq_len, D)."""
    kv = kv_cache[:, block_table]                                 # (2, B, n, bs, H, D)
    two, b, n, bs, h, d = kv.shape
    kv = kv.view(2, b, n * bs, h, d)[:, :, :seq_len].transpose(2, 3)
    return kv[0], kv[1]
