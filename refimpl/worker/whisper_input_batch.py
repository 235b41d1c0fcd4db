"""The Whisper runner's request states and the step's inputs: what vLLM keeps in
``vllm/v1/worker/gpu_input_batch.py`` (``CachedRequestState``) and the state / input half of
``gpu_model_runner.py`` (``_update_states``, ``_prepare_inputs``), 0.10.2.

``WhisperInputBatch`` is a base of ``WhisperRunner`` (worker/whisper_runner.py), which sets the
attributes declared here in its ``__init__``; the methods are the runner's own (no extra call per
step). The step's int64 inputs are filled with numpy into one staging buffer (``StagingBuffer``)
and copied once, non-blocking; ``max_q`` and ``needs_encoder`` stay host values.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

from refimpl.attention.cross_attention import CrossAttentionBuilder
from refimpl.attention.paged_attention import (
    build_attention_mask,
    compute_slot_mapping,
    pad_block_table,
    query_padding,
)
from refimpl.utils.cpu_gpu_buffer import StagingBuffer
from refimpl.worker.cross_kv_slots import CrossKVSlots


@dataclass
class CachedRequestState:
    """The runner's copy of a request: token ids (prompt + sampled), blocks, progress."""
    req_id: str
    token_ids: list[int]
    input_features: Optional[torch.Tensor]
    block_ids: tuple[list[int], list[int]]          # (self-attention, cross-attention)
    num_computed_tokens: int
    sampling_params: object
    generator: Optional[torch.Generator] = None
    cross_kv_written: bool = False


class WhisperInputBatch:
    """The runner's requests (``requests``: req_id -> CachedRequestState) and the building of a
    step's inputs from a SchedulerOutput. A base of WhisperRunner, which sets every attribute below."""
    device: torch.device
    dtype: torch.dtype
    block_size: int
    encoder_len: int
    requests: dict[str, CachedRequestState]
    cross_builder: CrossAttentionBuilder
    dense_cross: bool
    cross_slots: CrossKVSlots
    staging: StagingBuffer
    debug_checks: bool

    # ---- state -------------------------------------------------------------------------
    def _update_states(self, so) -> dict[str, str]:
        """Drop finished requests; keep a preempted one's state (as vLLM), so its seeded generator
        continues when it is re-sent, but free its cross K/V row (it is encoded again); rebuild the
        rest from the re-sent data. Returns req_id -> error of new requests whose state could not be
        set up (they run nothing this step)."""
        for rid in so.finished_req_ids:
            self.requests.pop(rid, None)
            self.cross_slots.remove(rid)
        for rid in so.preempted_req_ids:
            self.cross_slots.remove(rid)
        errors: dict[str, str] = {}
        for nr in so.scheduled_new_reqs:
            old = self.requests.pop(nr.req_id, None)     # a request resumed after preemption
            self.cross_slots.remove(nr.req_id)
            try:
                self.requests[nr.req_id] = self._new_request_state(nr, old)
            except Exception as e:  # noqa: BLE001 - this request fails, the batch goes on
                errors[nr.req_id] = f"{type(e).__name__}: {e}"
                continue
            if self.dense_cross:
                self.cross_slots.add(nr.req_id)
        cached = so.scheduled_cached_reqs
        for i, rid in enumerate(cached.req_ids):
            st = self.requests[rid]
            st.num_computed_tokens = cached.num_computed_tokens[i]
            new = cached.new_block_ids[i]
            if new is not None:
                for group, ids in zip(st.block_ids, new):
                    group.extend(ids)
        return errors

    def _new_request_state(self, nr, old: Optional[CachedRequestState]) -> CachedRequestState:
        """Everything one request holds: its generator and its features on the device (copied
        non-blocking); its cross K/V row is taken after (``CrossKVSlots.add``)."""
        sp = nr.sampling_params
        gen = old.generator if old is not None else None
        if gen is None and sp.seed is not None:
            gen = torch.Generator(device=self.device).manual_seed(int(sp.seed))
        feats = nr.mm_inputs[0]["input_features"].to(self.device, self.dtype, non_blocking=True) \
            if nr.mm_inputs else None
        return CachedRequestState(nr.req_id, list(nr.prompt_token_ids), feats,
                                  (list(nr.block_ids[0]), list(nr.block_ids[1])), nr.num_computed_tokens, sp, gen)

    def state_bytes(self) -> dict[str, int]:
        """req_id -> bytes of the tensors the runner holds for it (features, its cross K/V row)."""
        rows = self.cross_slots.row_bytes
        return {rid: (st.input_features.numel() * st.input_features.element_size()
                      if st.input_features is not None else 0) + (rows if rid in self.cross_slots.row_of else 0)
                for rid, st in self.requests.items()}

    # ---- inputs ------------------------------------------------------------------------
    def _prepare_inputs(self, so, req_ids: list[str]) -> dict:
        """The step's inputs, built on the host with numpy and staged in one copy (names as in
        vLLM's ``_prepare_inputs``); ``max_q`` and ``needs_encoder`` stay host values."""
        bs, states = self.block_size, [self.requests[r] for r in req_ids]
        num_reqs = len(req_ids)
        q_lens = np.fromiter((so.num_scheduled_tokens[r] for r in req_ids), np.int64, num_reqs)
        starts = np.fromiter((s.num_computed_tokens for s in states), np.int64, num_reqs)
        qsl = np.zeros(num_reqs + 1, dtype=np.int64)
        np.cumsum(q_lens, out=qsl[1:])
        req_idx, local_idx, max_q = query_padding(qsl)
        positions = starts[req_idx] + local_idx
        input_ids = np.fromiter((t for s, a, n in zip(states, starts, q_lens) for t in s.token_ids[a:a + n]),
                                np.int64, int(qsl[-1]))
        table = pad_block_table([s.block_ids[0] for s in states])
        needs_enc = [not s.cross_kv_written for s in states]
        enc_seq_lens = np.where(needs_enc, self.encoder_len, 0).astype(np.int64)
        _, cross = self.cross_builder.build_host(enc_seq_lens, [s.block_ids[1] for s in states])
        slot_mapping = compute_slot_mapping(table, req_idx, positions, bs)
        host = dict(input_ids=input_ids, positions=positions, query_start_loc=qsl, seq_lens=starts + q_lens,
                    block_table=table, slot_mapping=slot_mapping, logits_indices=qsl[1:] - 1)
        if max_q > 1:
            host |= dict(req_idx=req_idx, local_idx=local_idx)
        if any(needs_enc):
            host["cross_slot_mapping"] = cross["slot_mapping"]
        if self.dense_cross:
            if any(needs_enc):
                host["cross_rows_written"] = np.array([self.cross_slots.row_of[r] for r, need in
                                                       zip(req_ids, needs_enc) if need], dtype=np.int64)
            rows = self.cross_slots.rows(req_ids)
            if rows is not None:
                host["cross_rows"] = np.asarray(rows, dtype=np.int64)
        else:
            host["cross_block_table"] = cross["block_table"][:, :-(-self.encoder_len // bs)]
        if self.debug_checks:
            self._check_step(host, cross, num_reqs)
        inp = self.staging.stage(host)
        inp["self_mask"] = build_attention_mask(inp["query_start_loc"], inp["seq_lens"], table.shape[1] * bs,
                                                causal=True, max_q=max_q)
        inp["padding"] = (inp["req_idx"], inp["local_idx"], max_q) if max_q > 1 else None
        inp["needs_encoder"] = needs_enc
        return inp

    def _check_step(self, host: dict, cross: dict, num_reqs: int) -> None:
        """What the step takes as true by construction, checked on the host (``debug_checks``)."""
        for name in ("slot_mapping", "cross_slot_mapping"):
            if name in host and (host[name] < 0).any():
                raise AssertionError(f"{name} has a slot < 0: {host[name][host[name] < 0][:4]}")
        if (cross["seq_lens"] != self.encoder_len).any():
            raise AssertionError("a request's cross length is not the encoder length")
        if self.dense_cross and len(self.cross_slots.req_ids) < num_reqs:
            raise AssertionError("a running request holds no cross K/V row")
