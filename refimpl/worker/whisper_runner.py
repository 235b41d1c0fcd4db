"""Whisper on a paged KV cache: encoder once per request, batched decode.

Mirrors the Whisper path of ``vllm/v1/worker/gpu_model_runner.py`` (0.10.2) and the decoder
layer order of ``model_executor/models/whisper.py``; the math is the transformers model's
modules. The encoder length is read once at init (``get_encoder_len("runner")``). Left out:
CUDA graphs, chunked encoder inputs, the encoder cache, logprobs, penalties, spec decode.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import torch

from refimpl.attention.cross_attention import (
    CrossAttentionBuilder,
    cross_attention,
    dense_cross_attention,
    gather_cross_kv,
    key_segments,
)
from refimpl.attention.paged_attention import (
    build_attention_mask,
    compute_slot_mapping,
    pad_block_table,
    paged_attention,
    write_kv,
)
from refimpl.errors import EncoderLengthMismatchError
from refimpl.outputs import ModelRunnerOutput
from refimpl.sample.sampler import Sampler


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
    cross_kv: list[torch.Tensor] = field(default_factory=list)   # dense-once: (2, H, L, D) per layer
    cross_segments: list[tuple[int, int]] = field(default_factory=list)   # paged-runs: key runs


class WhisperRunner:
    """Paged-KV Whisper execution for GPUModelRunner. ``kv_caches``: per decoder layer (2,
    num_blocks, block_size, num_heads, head_dim) in the model dtype; ``step_timings``: seconds of
    "prepare", "model", "sample". Raises EncoderLengthMismatchError when the length read at init or
    by the metadata builder is not ``max_source_positions``."""

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
        self.sampler = Sampler()
        self.step_timings = step_timings if step_timings is not None else {}
        for k in ("prepare", "model", "sample"):
            self.step_timings.setdefault(k, 0.0)

    # ---- state -------------------------------------------------------------------------
    def _update_states(self, so) -> dict[str, str]:
        """Drop finished requests; keep a preempted one's state (as vLLM), so its seeded generator
        continues when it is re-sent; rebuild the rest from the re-sent data. Returns req_id -> error
        of new requests whose state could not be set up (they run nothing this step)."""
        for rid in so.finished_req_ids:
            self.requests.pop(rid, None)
        errors: dict[str, str] = {}
        for nr in so.scheduled_new_reqs:
            old = self.requests.pop(nr.req_id, None)     # a request resumed after preemption
            try:
                self.requests[nr.req_id] = self._new_request_state(nr, old)
            except Exception as e:  # noqa: BLE001 - this request fails, the batch goes on
                errors[nr.req_id] = f"{type(e).__name__}: {e}"
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
        """Everything one request holds: its generator, its features on the device, its dense
        cross K/V copies (allocated here, filled when the encoder runs) or key runs."""
        sp = nr.sampling_params
        gen = old.generator if old is not None else None
        if gen is None and sp.seed is not None:
            gen = torch.Generator(device=self.device).manual_seed(int(sp.seed))
        feats = nr.mm_inputs[0]["input_features"].to(self.device, self.dtype) if nr.mm_inputs else None
        st = CachedRequestState(nr.req_id, list(nr.prompt_token_ids), feats,
                                (list(nr.block_ids[0]), list(nr.block_ids[1])), nr.num_computed_tokens, sp, gen)
        if self.dense_cross:
            shape = (2, self.num_heads, self.encoder_len, self.head_dim)
            st.cross_kv = [torch.empty(shape, dtype=kv.dtype, device=self.device) for kv in self.kv_caches]
        else:   # a request's cross blocks are all allocated on admission
            st.cross_segments = key_segments(st.block_ids[1], self.encoder_len, self.block_size)
        return st

    def state_bytes(self) -> dict[str, int]:
        """req_id -> bytes of the tensors the runner holds for it (features, dense cross K/V)."""
        return {rid: sum(t.numel() * t.element_size() for t in [st.input_features, *st.cross_kv] if t is not None)
                for rid, st in self.requests.items()}

    # ---- inputs ------------------------------------------------------------------------
    def _prepare_inputs(self, so, req_ids: list[str]) -> dict:
        bs, states = self.block_size, [self.requests[r] for r in req_ids]
        q_lens = np.array([so.num_scheduled_tokens[r] for r in req_ids], dtype=np.int64)
        starts = np.array([s.num_computed_tokens for s in states], dtype=np.int64)
        qsl = np.concatenate([[0], np.cumsum(q_lens)])
        req_idx = np.repeat(np.arange(len(req_ids)), q_lens)
        positions = starts[req_idx] + np.arange(qsl[-1]) - qsl[req_idx]
        input_ids = np.concatenate([s.token_ids[a:a + n] for s, a, n in zip(states, starts, q_lens)])
        table = pad_block_table([s.block_ids[0] for s in states])
        needs_enc = [not s.cross_kv_written for s in states]
        enc_seq_lens = np.where(needs_enc, self.encoder_len, 0).astype(np.int64)
        to = lambda a: torch.from_numpy(np.ascontiguousarray(a, dtype=np.int64)).to(self.device)
        qsl_t, seq_lens = to(qsl), to(starts + q_lens)
        return dict(
            input_ids=to(input_ids), positions=to(positions), query_start_loc=qsl_t,
            seq_lens=seq_lens, block_table=to(table),
            self_mask=build_attention_mask(qsl_t, seq_lens, table.shape[1] * bs, causal=True),
            slot_mapping=to(compute_slot_mapping(table, req_idx, positions, bs)),
            logits_indices=to(qsl[1:] - 1), needs_encoder=needs_enc,
            cross=self.cross_builder.build(qsl, enc_seq_lens, [s.block_ids[1] for s in states]))

    # ---- model -------------------------------------------------------------------------
    def _encode(self, states: list[CachedRequestState]) -> torch.Tensor:
        """Encoder on the stacked input_features (k, n_mels, 3000) -> (k * 1500, d_model)."""
        out = self.model.model.encoder(torch.stack([s.input_features for s in states])).last_hidden_state
        return out[:, :self.encoder_len].reshape(-1, out.shape[-1])

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        return x.view(x.shape[0], self.num_heads, self.head_dim)

    @torch.inference_mode()
    def forward(self, inp: dict, states: list[CachedRequestState], encoder_out: Optional[torch.Tensor],
                encoded: list[CachedRequestState]) -> torch.Tensor:
        """Decoder over the batch of ``states``; ``encoder_out`` (k * 1500, d_model) of the ``encoded``
        requests, whose cross K/V this step writes. Logits (B, vocab) of each last token."""
        dec, cross = self.model.model.decoder, inp["cross"]
        qsl = inp["query_start_loc"]
        x = dec.embed_tokens(inp["input_ids"]) + dec.embed_positions.weight[inp["positions"]]
        for li, (layer, kv) in enumerate(zip(dec.layers, self.kv_caches)):
            sa = layer.self_attn
            h = layer.self_attn_layer_norm(x)
            write_kv(kv, self._heads(sa.k_proj(h)), self._heads(sa.v_proj(h)), inp["slot_mapping"])
            o = paged_attention(self._heads(sa.q_proj(h) * sa.scaling), kv, qsl, inp["seq_lens"],
                                inp["block_table"], causal=True, mask=inp["self_mask"])
            x = x + sa.out_proj(o.reshape(x.shape[0], -1))
            ca = layer.encoder_attn
            if encoder_out is not None:
                write_kv(kv, self._heads(ca.k_proj(encoder_out)), self._heads(ca.v_proj(encoder_out)),
                         cross.slot_mapping)
                if self.dense_cross:            # read back once from the pages, head-major
                    for st in encoded:
                        st.cross_kv[li].copy_(gather_cross_kv(kv, st.block_ids[1], self.encoder_len))
            h = layer.encoder_attn_layer_norm(x)
            q = self._heads(ca.q_proj(h) * ca.scaling)
            if self.dense_cross:
                o = dense_cross_attention(q, cross.query_start_loc_cpu, [st.cross_kv[li] for st in states])
            else:
                o = cross_attention(q, kv, cross.query_start_loc_cpu, [st.cross_segments for st in states])
            x = x + ca.out_proj(o.reshape(x.shape[0], -1))
            h = layer.final_layer_norm(x)
            x = x + layer.fc2(layer.activation_fn(layer.fc1(h)))
        x = dec.layer_norm(x[inp["logits_indices"]])
        return self.model.proj_out(x)

    def _sync(self) -> float:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.perf_counter()

    def execute_model(self, so):
        """One step for SchedulerOutput ``so``; returns ModelRunnerOutput (one token per request
        that reached the end of its known tokens, [] for a partial prefill)."""
        t0 = self._sync()
        errors = self._update_states(so)
        req_ids = [r for r, n in so.num_scheduled_tokens.items() if n > 0 and r not in errors]
        if not req_ids:
            return ModelRunnerOutput(req_ids=[], req_id_to_index={}, sampled_token_ids=[], req_errors=errors)
        states = [self.requests[r] for r in req_ids]
        inp = self._prepare_inputs(so, req_ids)
        t1 = self._sync()
        with torch.inference_mode():
            enc_states = [s for s, need in zip(states, inp["needs_encoder"]) if need]
            encoder_out = self._encode(enc_states) if enc_states else None
            logits = self.forward(inp, states, encoder_out, enc_states)
        for s in enc_states:
            s.cross_kv_written = True
        t2 = self._sync()
        # Rows still inside their prompt (a partial prefill) get no token and draw nothing
        # from their generator (vLLM samples them and rewinds the generator's offset).
        done = [i for i, st in enumerate(states)
                if st.num_computed_tokens + so.num_scheduled_tokens[st.req_id] >= len(st.token_ids)]
        tokens = dict(zip(done, self.sampler(logits[done], [states[i].sampling_params for i in done],
                                             [states[i].generator for i in done])))
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
