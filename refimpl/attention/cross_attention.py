"""Cross-attention of encoder-decoder models (Whisper): the per-step metadata and two ways
of reading a request's cross K/V from its paged blocks.

``CrossAttentionBuilder`` mirrors ``CrossAttentionBuilder`` and ``_get_cross_slot_mapping``
of ``vllm/attention/layers/cross_attention.py`` (vLLM 0.10.2). ``build`` reads the encoder
length through ``vllm_config.get_encoder_len("metadata")`` on every step: under the
``registry`` encoder-length variant that is the uncached registry lookup of vLLM 0.10.2's hot
path (see refimpl/variants.py). Tensors are int64 on the runner's device;
``query_start_loc_cpu`` is host-side, as vLLM's metadata keeps ``*_cpu`` copies for the host.

A request's cross K/V (1500 positions for Whisper, 94 blocks of 16) are written once, on its
first step, by slot mapping (``write_kv``), and never change. vLLM's kernels then read them
through the block table on every step. Plain torch has no such kernel, so refimpl offers two
reads (``CacheConfig.cross_attention_read``; tokens identical either way, checked by
tests/test_whisper_runner.py and tests/test_real_weights.py):

* ``"dense-once"`` (default): right after the write, ``gather_cross_kv`` copies the request's
  blocks once into a head-major (2, H, seq_len, D) tensor per layer; every later step runs one
  unmasked SDPA per request on it (``dense_cross_attention``). Cost: one copy per request and
  the extra memory of that copy while the request runs; the reads do not depend on where the
  blocks lie in the pool. On one CPU thread this SDPA is faster than on the block-layout
  views below (``scripts/cross_attention_read_microbench.py`` times one step of each;
  ``scripts/cross_attention_fragmentation.py`` serves a workload with each).
* ``"paged-runs"``: no copy. ``key_segments`` (computed once per request) turns the block
  table into runs of consecutive slots and ``cross_attention`` reads them as views of the
  cache (block-major, so each head's keys are strided by H x D). A request whose blocks form
  several runs (blocks freed by finished requests come back out of order) pays one matmul pair
  per run, so this read slows down as the pool fragments.

Left out: the attention-backend wrapper (``create_cross_attention_backend``).
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
    """Cross-attention metadata of one step.

    ``seq_lens`` (B,) encoder length per request; ``block_table`` (B, max_cross_blocks);
    ``slot_mapping`` (sum of encoder_seq_lens,) slots for the cross K/V written this step
    (requests on their first decoder step, in batch order); ``query_start_loc_cpu`` the
    (B + 1,) query offsets as host ints.
    """
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

    def build(self, query_start_loc: np.ndarray, encoder_seq_lens: np.ndarray,
              cross_block_ids: list[list[int]]) -> CrossAttentionMetadata:
        """``query_start_loc`` (B + 1,) and ``encoder_seq_lens`` (B,) int64: encoder positions
        whose K/V are written this step (0 for requests past their first step). Raises
        EncoderLengthMismatchError when the length read is not the model's or a request's cross
        blocks cannot hold it (the review warning on PR #24989)."""
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
        slots = compute_slot_mapping(table, req_idx, pos, self.block_size)

        def to(a):
            return torch.from_numpy(np.ascontiguousarray(a, dtype=np.int64)).to(self.device)
        return CrossAttentionMetadata(
            query_start_loc=to(query_start_loc), seq_lens=to(np.full(len(cross_block_ids), enc_len)),
            max_seq_len=enc_len, block_table=to(table), slot_mapping=to(slots),
            query_start_loc_cpu=[int(x) for x in query_start_loc])


def key_segments(block_ids: Sequence[int], seq_len: int, block_size: int) -> list[tuple[int, int]]:
    """Runs ``(first_slot, num_slots)`` covering exactly the first ``seq_len`` slots of a
    request, for order-free (non-causal) attention.

    The full blocks (``seq_len // block_size`` of them) are sorted by id and merged where
    consecutive; the partly used last block contributes its first ``seq_len % block_size``
    slots (merged into the run it follows, if any). Raises ValueError when ``block_ids``
    holds fewer than ``ceil(seq_len / block_size)`` blocks.
    """
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
    """Non-causal attention of flattened ``query`` (T, H, D) on each request's ``segments``.

    ``query_start_loc`` (B + 1,) host ints; ``segments[b]`` the ``key_segments`` of request
    ``b``. Keys and values are only read as views of ``kv_cache``, never copied: a request
    whose keys are one run gets one unmasked SDPA; one with several runs gets its scores
    (H, q, seq_len) computed run by run, one softmax over all of them (the same softmax as
    the unsplit attention), and the output summed run by run. Returns (T, H, D) in the
    query dtype.
    """
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
    """One request's cross K/V copied out of ``kv_cache`` (2, num_blocks, block_size, H, D)
    into a contiguous head-major (2, H, seq_len, D) tensor, positions in block-table order.

    Raises ValueError when ``block_ids`` cannot hold ``seq_len`` positions.
    """
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
    ``max_num_seqs``) running requests x 2 (K, V) x decoder layers x ``max_source_positions`` (1500 for Whisper)
    x ``d_model`` x dtype bytes, from the model's shipped config (about 18 MiB per request for
    whisper-tiny in float32, 234 MiB for whisper-large-v3 in float16). 0 under ``"paged-runs"``
    and for decoder-only models. refimpl's: vLLM's kernels read the blocks and hold no copy."""
    mc = vllm_config.model_config
    if not mc.is_encoder_decoder or vllm_config.cache_config.cross_attention_read != "dense-once":
        return 0
    d = mc.hf_config_dict
    itemsize = getattr(torch, mc.dtype).itemsize
    per_request = 2 * d["decoder_layers"] * d["max_source_positions"] * d["d_model"] * itemsize
    return (vllm_config.scheduler_config.max_num_seqs if running is None else running) * per_request


def dense_cross_attention(query: torch.Tensor, query_start_loc: Sequence[int],
                          kvs: Sequence[torch.Tensor], *, scale: float = 1.0) -> torch.Tensor:
    """Non-causal attention of flattened ``query`` (T, H, D) on each request's dense cross K/V.

    ``query_start_loc`` (B + 1,) host ints; ``kvs[b]`` request ``b``'s ``gather_cross_kv``
    (2, H, seq_len, D). One unmasked SDPA per request. Returns (T, H, D) in the query dtype.
    """
    if query.shape[0] == 0:
        return query
    out_dtype = query.dtype
    outs = []
    for b, kv in enumerate(kvs):
        q = query[query_start_loc[b]:query_start_loc[b + 1]].to(kv.dtype).transpose(0, 1)   # (H, q, D)
        o = F.scaled_dot_product_attention(q[None], kv[0][None], kv[1][None], scale=scale)[0]
        outs.append(o.transpose(0, 1))
    return (torch.cat(outs) if len(outs) > 1 else outs[0]).to(out_dtype)
