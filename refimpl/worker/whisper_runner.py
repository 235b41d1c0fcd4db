"""Whisper on a paged KV cache: encoder once per request, batched decode.

Mirrors the Whisper path of ``vllm/v1/worker/gpu_model_runner.py`` (0.10.2) and the decoder
layer order of ``model_executor/models/whisper.py``; the math is the transformers model's
modules. The encoder length is read once at init (``get_encoder_len("runner")``).

A step the GPU can see (issue 42): the step's int64 inputs are filled with numpy into one staging
buffer (``CpuGpuBuffer``) and copied once, non-blocking (request states and input building:
worker/whisper_input_batch.py, as vLLM's gpu_input_batch.py); lengths and indices come from the
host; no device value is read back inside the step but the sampled ids; cross-attention is one call per layer
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
from typing import Optional

import torch

from refimpl.attention.cross_attention import (
    CrossAttentionBuilder,
    batched_cross_attention,
    gather_cross_kv_batched,
)
from refimpl.attention.paged_attention import paged_attention, reshape_and_cache
from refimpl.errors import EncoderLengthMismatchError
from refimpl.outputs import ModelRunnerOutput
from refimpl.sample.sampler import Sampler
from refimpl.utils.cpu_gpu_buffer import StagingBuffer
from refimpl.worker.cross_kv_slots import CrossKVSlots
from refimpl.worker.whisper_input_batch import CachedRequestState, WhisperInputBatch

__all__ = ["CachedRequestState", "WhisperRunner"]


class WhisperRunner(WhisperInputBatch):
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
