"""Whisper on a paged KV cache: encoder once per request, batched decode.

Mirrors the Whisper path of ``vllm/v1/worker/gpu_model_runner.py`` (0.10.2) and the decoder
layer order of ``model_executor/models/whisper.py``; the math is the transformers model's
modules. The encoder length is read once at init (``get_encoder_len("runner")``).

A step the GPU can see (issue 42): the step's int64 inputs are filled with numpy into one staging
buffer (``CpuGpuBuffer``) and copied once, non-blocking; lengths and indices come from the host; no
device value is read back inside the step but the sampled ids; cross-attention is one call per layer
for all running requests (``CrossKVSlots`` rows for "dense-once", one block gather for
"paged-runs"); ``torch.cuda.synchronize()`` only when ``synchronize_timings`` asks for the split;
``forward_events`` (worker/forward_events.py) records CUDA events around the model section instead.
``debug_checks`` (or ``REFIMPL_DEBUG_STEP=1``) checks once per step, on the host, what the step
takes as true by construction. Left out: CUDA graphs, chunked encoder inputs, the encoder cache,
logprobs, penalties, spec decode.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

from refimpl.attention.cross_attention import (
    CrossAttentionBuilder,
    batched_cross_attention,
    gather_cross_kv_batched,
)
from refimpl.attention.paged_attention import (
    build_attention_mask,
    compute_slot_mapping,
    pad_block_table,
    paged_attention,
    query_padding,
    reshape_and_cache,
)
from refimpl.errors import EncoderLengthMismatchError
from refimpl.outputs import ModelRunnerOutput
from refimpl.sample.sampler import Sampler
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


class WhisperRunner:
    """Paged-KV Whisper execution for GPUModelRunner. ``kv_caches``: per decoder layer (2,
    num_blocks, block_size, num_heads, head_dim) in the model dtype; ``step_timings``: seconds of
    "prepare", "model", "sample" (host seconds; device-inclusive only with ``synchronize_timings``).
    Raises EncoderLengthMismatchError when the length read at init or by the metadata builder is
    not ``max_source_positions``."""

    def __init__(self, vllm_config, model, kv_caches: list[torch.Tensor],
                 step_timings: Optional[dict[str, float]] = None):
        self.vllm_config, self.model, self.kv_caches = vllm_config, model, kv_caches
        self.device = kv_caches[0].device
        self.block_size = vllm_config.cache_config.block_size
        self.encoder_len = vllm_config.get_encoder_len("runner")     # read once (PR #24989)
        dec_cfg = model.config
        if self.encoder_len != dec_cfg.max_source_positions:
            raise EncoderLengthMismatchError(
                "encoder_len (runner)", dec_cfg.max_source_positions,
                f"{self.encoder_len} != the encoder's output length (max_source_positions)")
        self.dtype = model.model.encoder.conv1.weight.dtype
        self.num_heads = dec_cfg.decoder_attention_heads
        self.head_dim = dec_cfg.d_model // self.num_heads
        self.requests: dict[str, CachedRequestState] = {}
        self.cross_builder = CrossAttentionBuilder(vllm_config, self.block_size, self.device,
                                                   dec_cfg.max_source_positions)
        self.dense_cross = vllm_config.cache_config.cross_attention_read == "dense-once"
        self.cross_slots = CrossKVSlots(len(kv_caches), self.num_heads, self.encoder_len, self.head_dim,
                                        kv_caches[0].dtype, self.device, vllm_config.scheduler_config.max_num_seqs)
        self.staging = StagingBuffer(self.device)
        self.sampler = Sampler()
        self.synchronize_timings = False
        self.forward_events = None  # a ForwardEvents (CUDA): events around each step's model section
        self.debug_checks = os.environ.get("REFIMPL_DEBUG_STEP", "") not in ("", "0")
        self.step_timings = step_timings if step_timings is not None else {}
        for k in ("prepare", "model", "sample"):
            self.step_timings.setdefault(k, 0.0)

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

    # ---- model -------------------------------------------------------------------------
    def _encode(self, states: list[CachedRequestState]) -> torch.Tensor:
        """Encoder on the stacked input_features (k, n_mels, 3000) -> (k * 1500, d_model)."""
        out = self.model.model.encoder(torch.stack([s.input_features for s in states])).last_hidden_state
        return out[:, :self.encoder_len].reshape(-1, out.shape[-1])

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        return x.view(x.shape[0], self.num_heads, self.head_dim)

    def _write_cross(self, li: int, kv: torch.Tensor, key: torch.Tensor, value: torch.Tensor, inp: dict) -> None:
        """Cross K/V of the requests encoded this step, (k * L, H, D): into their paged cross blocks
        (vLLM's write) and, "dense-once", into their rows of the layer's slot tensor."""
        reshape_and_cache(kv, key, value, inp["cross_slot_mapping"])
        if self.dense_cross:
            rows, t = inp["cross_rows_written"], self.cross_slots.layers[li]
            for i, x in enumerate((key, value)):
                t[i].index_copy_(0, rows, x.view(-1, self.encoder_len, self.num_heads, self.head_dim)
                                 .transpose(1, 2).to(t.dtype))

    def _cross_kv(self, li: int, kv: torch.Tensor, inp: dict, num_reqs: int) -> tuple[torch.Tensor, torch.Tensor]:
        """K, V (B, H, L, D) of the batch's requests: a view of the slot rows (or one index_select
        when the batch is not rows 0..B-1), or one gather of the paged cross blocks."""
        if not self.dense_cross:
            return gather_cross_kv_batched(kv, inp["cross_block_table"], self.encoder_len)
        t = self.cross_slots.layers[li]
        if "cross_rows" in inp:
            t = t.index_select(1, inp["cross_rows"])
            return t[0], t[1]
        return t[0, :num_reqs], t[1, :num_reqs]

    @torch.inference_mode()
    def forward(self, inp: dict, states: list[CachedRequestState], encoder_out: Optional[torch.Tensor],
                encoded: Optional[list[CachedRequestState]] = None) -> torch.Tensor:
        """Decoder over the batch of ``states``; ``encoder_out`` (k * 1500, d_model) of the requests
        encoded this step, whose cross K/V this step writes. Logits (B, vocab) of each last token."""
        dec, qsl, pad = self.model.model.decoder, inp["query_start_loc"], inp["padding"]
        num_reqs = len(states)
        x = dec.embed_tokens(inp["input_ids"]) + dec.embed_positions.weight[inp["positions"]]
        for li, (layer, kv) in enumerate(zip(dec.layers, self.kv_caches)):
            sa = layer.self_attn
            h = layer.self_attn_layer_norm(x)
            reshape_and_cache(kv, self._heads(sa.k_proj(h)), self._heads(sa.v_proj(h)), inp["slot_mapping"])
            o = paged_attention(self._heads(sa.q_proj(h) * sa.scaling), kv, qsl, inp["seq_lens"],
                                inp["block_table"], causal=True, mask=inp["self_mask"], padding=pad)
            x = x + sa.out_proj(o.reshape(x.shape[0], -1))
            ca = layer.encoder_attn
            if encoder_out is not None:
                self._write_cross(li, kv, self._heads(ca.k_proj(encoder_out)), self._heads(ca.v_proj(encoder_out)),
                                  inp)
            h = layer.encoder_attn_layer_norm(x)
            k, v = self._cross_kv(li, kv, inp, num_reqs)
            o = batched_cross_attention(self._heads(ca.q_proj(h) * ca.scaling), k, v, padding=pad)
            x = x + ca.out_proj(o.reshape(x.shape[0], -1))
            h = layer.final_layer_norm(x)
            x = x + layer.fc2(layer.activation_fn(layer.fc1(h)))
        if x.shape[0] != num_reqs:
            x = x[inp["logits_indices"]]
        return self.model.proj_out(dec.layer_norm(x))

    def _sync(self) -> float:
        if self.synchronize_timings and self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.perf_counter()

    def execute_model(self, so):
        """One step for SchedulerOutput ``so``; returns ModelRunnerOutput (one token per request
        that reached the end of its known tokens, [] for a partial prefill). The batch is ordered
        by cross K/V row ("dense-once"), so its rows are a view."""
        t0 = self._sync()
        errors = self._update_states(so)
        req_ids = [r for r, n in so.num_scheduled_tokens.items() if n > 0 and r not in errors]
        if not req_ids:
            return ModelRunnerOutput(req_ids=[], req_id_to_index={}, sampled_token_ids=[], req_errors=errors)
        if self.dense_cross:
            req_ids.sort(key=self.cross_slots.row_of.__getitem__)
        states = [self.requests[r] for r in req_ids]
        inp = self._prepare_inputs(so, req_ids)
        t1, events = self._sync(), self.forward_events
        if events is not None:
            events.start()
        with torch.inference_mode():
            enc_states = [s for s, need in zip(states, inp["needs_encoder"]) if need]
            encoder_out = self._encode(enc_states) if enc_states else None
            logits = self.forward(inp, states, encoder_out, enc_states)
        if events is not None:
            events.stop()
        for s in enc_states:
            s.cross_kv_written = True
        t2 = self._sync()
        # Rows still inside their prompt (a partial prefill) get no token and draw nothing
        # from their generator (vLLM samples them and rewinds the generator's offset).
        done = [i for i, st in enumerate(states)
                if st.num_computed_tokens + so.num_scheduled_tokens[st.req_id] >= len(st.token_ids)]
        rows = logits if len(done) == len(states) else logits[done]
        tokens = dict(zip(done, self.sampler(rows, [states[i].sampling_params for i in done],
                                             [states[i].generator for i in done])))   # the one read back
        sampled: list[list[int]] = []
        for i, st in enumerate(states):
            if i in tokens:
                st.token_ids.append(tokens[i])
            sampled.append([tokens[i]] if i in tokens else [])
        t3 = self._sync()
        for k, dt in (("prepare", t1 - t0), ("model", t2 - t1), ("sample", t3 - t2)):
            self.step_timings[k] = self.step_timings.get(k, 0.0) + dt
        return ModelRunnerOutput(req_ids=req_ids, req_id_to_index={r: i for i, r in enumerate(req_ids)},
                                 sampled_token_ids=sampled, req_errors=errors)
