"""Cross-attention metadata of encoder-decoder models (Whisper), built every step.

Mirrors ``CrossAttentionBuilder`` and ``_get_cross_slot_mapping`` of
``vllm/attention/layers/cross_attention.py`` (vLLM 0.10.2). ``build`` reads the encoder
length through ``vllm_config.get_encoder_len("metadata")`` on every step: under the
``registry`` encoder-length variant that is the uncached registry lookup of vLLM 0.10.2's hot
path (see refimpl/variants.py). Tensors are int64 on the runner's device; ``segments`` and
``query_start_loc_cpu`` are host-side, as vLLM's metadata keeps ``*_cpu`` copies for the host.

Left out: the attention-backend wrapper (``create_cross_attention_backend``): the builder
returns refimpl's own metadata for ``paged_attention``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

from refimpl.attention.paged_attention import compute_slot_mapping, key_segments, pad_block_table
from refimpl.errors import EncoderLengthMismatchError


@dataclass
class CrossAttentionMetadata:
    """Cross-attention metadata of one step.

    ``seq_lens`` (B,) encoder length per request; ``block_table`` (B, max_cross_blocks);
    ``slot_mapping`` (sum of encoder_seq_lens,) slots for the cross K/V written this step
    (requests on their first decoder step, in batch order); ``segments`` per request, the
    ``key_segments`` runs ``(first_slot, num_slots)`` its cross K/V are read from;
    ``query_start_loc_cpu`` the (B + 1,) query offsets as host ints.
    """
    query_start_loc: torch.Tensor
    seq_lens: torch.Tensor
    max_seq_len: int
    block_table: torch.Tensor
    slot_mapping: torch.Tensor
    segments: list[list[tuple[int, int]]]
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
            segments=[key_segments(b, enc_len, self.block_size) for b in cross_block_ids],
            query_start_loc_cpu=[int(x) for x in query_start_loc])
