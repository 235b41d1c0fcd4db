"""Whisper on a paged KV cache: encoder once per request, batched decode, cross-attention metadata.

Mirrors the Whisper path of vLLM 0.10.2: ``vllm/v1/worker/gpu_model_runner.py``
(``_update_states``, ``_prepare_inputs``, ``_get_encoder_seq_lens``, ``_execute_mm_encoder``,
``execute_model``), ``vllm/attention/layers/cross_attention.py`` (``CrossAttentionBuilder``,
``_get_cross_slot_mapping``) and ``vllm/model_executor/models/whisper.py`` (decoder layer
order). The math is the transformers model's own modules (encoder, embeddings, projections,
layer norms, fc layers, ``proj_out``); only KV management is ours (``paged_attention``).

``CrossAttentionBuilder.build`` reads the encoder length through
``vllm_config.get_encoder_len("metadata")`` on every step: under ``encoder_len_variant ==
"registry"`` that is the uncached ``MULTIMODAL_REGISTRY.get_encdec_max_encoder_len`` of
vLLM 0.10.2's hot path; PR #24866 made it read the config value. The runner reads its own
copy once at init (``get_encoder_len("runner")``, PR #24989) for the cross slot mapping.

Left out: CUDA graphs of this path, chunked prefill of encoder inputs, the encoder cache
(Whisper's encoder output is consumed in the same step), logprobs, penalties, spec decode.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

from refimpl.errors import EncoderLengthMismatchError
from refimpl.worker.paged_attention import paged_attention, write_kv


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


@dataclass
class CrossAttentionMetadata:
    """Cross-attention metadata of one step; tensors on the runner's device, int64.

    ``seq_lens`` (B,) encoder length per request; ``block_table`` (B, max_cross_blocks);
    ``slot_mapping`` (sum of encoder_seq_lens,) slots for the cross K/V written this step
    (requests on their first decoder step, in batch order).
    """
    query_start_loc: torch.Tensor
    seq_lens: torch.Tensor
    max_seq_len: int
    block_table: torch.Tensor
    slot_mapping: torch.Tensor


def _pad_block_table(blocks: list[list[int]]) -> np.ndarray:
    width = max((len(b) for b in blocks), default=0)
    table = np.zeros((len(blocks), max(width, 1)), dtype=np.int64)
    for i, b in enumerate(blocks):
        table[i, :len(b)] = b
    return table


def _slots(table: np.ndarray, req_idx: np.ndarray, pos: np.ndarray, block_size: int) -> np.ndarray:
    return table[req_idx, pos // block_size] * block_size + pos % block_size


class CrossAttentionBuilder:
    """Builds CrossAttentionMetadata every step, as vLLM 0.10.2's builder of the same name."""

    def __init__(self, vllm_config, block_size: int, device: torch.device,
                 model_encoder_len: Optional[int] = None):
        self.vllm_config, self.block_size, self.device = vllm_config, block_size, device
        self.model_encoder_len = model_encoder_len      # max_source_positions, when known

    def build(self, query_start_loc: np.ndarray, encoder_seq_lens: np.ndarray,
              cross_block_ids: list[list[int]]) -> CrossAttentionMetadata:
        """``encoder_seq_lens`` (B,): encoder positions whose K/V are written this step (0 for
        requests past their first step). Raises EncoderLengthMismatchError when a request's
        cross blocks cannot hold the encoder length (the review warning on PR #24989)."""
        enc_len = self.vllm_config.get_encoder_len("metadata")      # hot path, every step
        if self.model_encoder_len is not None and enc_len != self.model_encoder_len:
            raise EncoderLengthMismatchError("encoder_len (metadata)", self.model_encoder_len,
                                             f"got {enc_len}")
        table = _pad_block_table(cross_block_ids)
        capacity = min((len(b) for b in cross_block_ids), default=0) * self.block_size
        if cross_block_ids and max(enc_len, int(encoder_seq_lens.max(initial=0))) > capacity:
            raise EncoderLengthMismatchError(
                "cross_attention_blocks", capacity,
                f"encoder length {enc_len} exceeds the {capacity} slots of a request's cross blocks")
        req_idx = np.repeat(np.arange(len(cross_block_ids)), encoder_seq_lens)
        pos = np.concatenate([np.arange(n) for n in encoder_seq_lens]) if len(req_idx) else \
            np.zeros(0, dtype=np.int64)
        slots = _slots(table, req_idx, pos, self.block_size)
        to = lambda a: torch.from_numpy(np.ascontiguousarray(a, dtype=np.int64)).to(self.device)
        return CrossAttentionMetadata(
            query_start_loc=to(query_start_loc), seq_lens=to(np.full(len(cross_block_ids), enc_len)),
            max_seq_len=enc_len, block_table=to(table), slot_mapping=to(slots))


class WhisperRunner:
    """Paged-KV Whisper execution for GPUModelRunner.

    Raises EncoderLengthMismatchError when the encoder length the runner (init) or the
    metadata builder (each step) reads is not the model's ``max_source_positions``.

    ``model``: a ``WhisperForConditionalGeneration`` (eval); ``kv_caches``: one tensor per
    decoder layer, (2, num_blocks, block_size, num_heads, head_dim) in the model dtype.
    ``step_timings`` accumulates seconds per phase: "prepare" (state update, inputs,
    metadata), "model" (encoder + decoder), "sample".
    """

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
        self.num_heads = dec_cfg.decoder_attention_heads
        self.head_dim = dec_cfg.d_model // self.num_heads
        self.requests: dict[str, CachedRequestState] = {}
        self.cross_builder = CrossAttentionBuilder(vllm_config, self.block_size, self.device,
                                                   dec_cfg.max_source_positions)
        self.step_timings = step_timings if step_timings is not None else {}
        for k in ("prepare", "model", "sample"):
            self.step_timings.setdefault(k, 0.0)

    # ---- state -------------------------------------------------------------------------
    def _update_states(self, so) -> None:
        for rid in set(so.finished_req_ids) | set(getattr(so, "preempted_req_ids", ()) or ()):
            self.requests.pop(rid, None)
        for nr in so.scheduled_new_reqs:
            sp = nr.sampling_params
            gen = None
            if getattr(sp, "seed", None) is not None:
                gen = torch.Generator(device=self.device).manual_seed(int(sp.seed))
            feats = nr.mm_inputs[0]["input_features"] if nr.mm_inputs else None
            self.requests[nr.req_id] = CachedRequestState(
                nr.req_id, list(nr.prompt_token_ids), feats,
                (list(nr.block_ids[0]), list(nr.block_ids[1])), nr.num_computed_tokens, sp, gen)
        cached = so.scheduled_cached_reqs
        for i, rid in enumerate(cached.req_ids):
            st = self.requests[rid]
            st.num_computed_tokens = cached.num_computed_tokens[i]
            new = cached.new_block_ids[i]
            if new is not None:
                for group, ids in zip(st.block_ids, new):
                    group.extend(ids)

    # ---- inputs ------------------------------------------------------------------------
    def _prepare_inputs(self, so, req_ids: list[str]) -> dict:
        bs, states = self.block_size, [self.requests[r] for r in req_ids]
        q_lens = np.array([so.num_scheduled_tokens[r] for r in req_ids], dtype=np.int64)
        starts = np.array([s.num_computed_tokens for s in states], dtype=np.int64)
        qsl = np.concatenate([[0], np.cumsum(q_lens)])
        req_idx = np.repeat(np.arange(len(req_ids)), q_lens)
        positions = starts[req_idx] + np.arange(qsl[-1]) - qsl[req_idx]
        input_ids = np.concatenate([s.token_ids[a:a + n] for s, a, n in zip(states, starts, q_lens)])
        table = _pad_block_table([s.block_ids[0] for s in states])
        needs_enc = [not s.cross_kv_written for s in states]
        enc_seq_lens = np.where(needs_enc, self.encoder_len, 0).astype(np.int64)
        to = lambda a: torch.from_numpy(np.ascontiguousarray(a, dtype=np.int64)).to(self.device)
        return dict(
            input_ids=to(input_ids), positions=to(positions), query_start_loc=to(qsl),
            seq_lens=to(starts + q_lens), block_table=to(table),
            slot_mapping=to(_slots(table, req_idx, positions, bs)),
            logits_indices=to(qsl[1:] - 1), needs_encoder=needs_enc,
            cross=self.cross_builder.build(qsl, enc_seq_lens, [s.block_ids[1] for s in states]))

    # ---- model -------------------------------------------------------------------------
    def _encode(self, states: list[CachedRequestState]) -> torch.Tensor:
        """Encoder on the stacked input_features (k, n_mels, 3000) -> (k * 1500, d_model)."""
        enc = self.model.model.encoder
        feats = torch.stack([s.input_features for s in states]).to(self.device, enc.conv1.weight.dtype)
        out = enc(feats).last_hidden_state
        return out[:, :self.encoder_len].reshape(-1, out.shape[-1])

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        return x.view(x.shape[0], self.num_heads, self.head_dim)

    @torch.inference_mode()
    def forward(self, inp: dict, encoder_out: Optional[torch.Tensor]) -> torch.Tensor:
        """Decoder over the flattened batch; returns logits (B, vocab) of each request's last token."""
        dec, cross = self.model.model.decoder, inp["cross"]
        qsl = inp["query_start_loc"]
        x = dec.embed_tokens(inp["input_ids"]) + dec.embed_positions.weight[inp["positions"]]
        for layer, kv in zip(dec.layers, self.kv_caches):
            sa = layer.self_attn
            h = layer.self_attn_layer_norm(x)
            write_kv(kv, self._heads(sa.k_proj(h)), self._heads(sa.v_proj(h)), inp["slot_mapping"])
            o = paged_attention(self._heads(sa.q_proj(h) * sa.scaling), kv, qsl, inp["seq_lens"],
                                inp["block_table"], causal=True)
            x = x + sa.out_proj(o.reshape(x.shape[0], -1))
            ca = layer.encoder_attn
            if encoder_out is not None:
                write_kv(kv, self._heads(ca.k_proj(encoder_out)), self._heads(ca.v_proj(encoder_out)),
                         cross.slot_mapping)
            h = layer.encoder_attn_layer_norm(x)
            o = paged_attention(self._heads(ca.q_proj(h) * ca.scaling), kv, qsl, cross.seq_lens,
                                cross.block_table, causal=False)
            x = x + ca.out_proj(o.reshape(x.shape[0], -1))
            h = layer.final_layer_norm(x)
            x = x + layer.fc2(layer.activation_fn(layer.fc1(h)))
        x = dec.layer_norm(x[inp["logits_indices"]])
        return self.model.proj_out(x)

    # ---- sampling ----------------------------------------------------------------------
    def sample(self, logits: torch.Tensor, states: list[CachedRequestState]) -> list[int]:
        """Greedy argmax for temperature 0, else seeded ``torch.multinomial`` (top-k/top-p if set)."""
        logits = logits.float()
        out = logits.argmax(dim=-1).tolist()
        for i, st in enumerate(states):
            sp = st.sampling_params
            temp = float(getattr(sp, "temperature", 0.0) or 0.0)
            if temp < 1e-5:
                continue
            row = logits[i] / temp
            top_k = int(getattr(sp, "top_k", 0) or 0)
            if 0 < top_k < row.shape[0]:
                row = row.masked_fill(row < row.topk(top_k).values[-1], float("-inf"))
            probs = torch.softmax(row, dim=-1)
            top_p = float(getattr(sp, "top_p", 1.0) or 1.0)
            if top_p < 1.0:
                sp_, idx = probs.sort(descending=True)
                drop = sp_.cumsum(0) - sp_ > top_p
                probs = probs.index_fill(0, idx[drop], 0.0)
            out[i] = int(torch.multinomial(probs, 1, generator=st.generator))
        return out

    def _sync(self) -> float:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.perf_counter()

    def execute_model(self, so):
        """One step for SchedulerOutput ``so``; returns ModelRunnerOutput (one token per request
        that reached the end of its known tokens, [] for a partial prefill)."""
        from refimpl.outputs import ModelRunnerOutput
        t0 = self._sync()
        self._update_states(so)
        req_ids = [r for r, n in so.num_scheduled_tokens.items() if n > 0]
        if not req_ids:
            return ModelRunnerOutput(req_ids=[], req_id_to_index={}, sampled_token_ids=[])
        states = [self.requests[r] for r in req_ids]
        inp = self._prepare_inputs(so, req_ids)
        t1 = self._sync()
        with torch.inference_mode():
            enc_states = [s for s, need in zip(states, inp["needs_encoder"]) if need]
            encoder_out = self._encode(enc_states) if enc_states else None
            logits = self.forward(inp, encoder_out)
        for s in enc_states:
            s.cross_kv_written = True
        t2 = self._sync()
        tokens = self.sample(logits, states)
        sampled: list[list[int]] = []
        for st, tok in zip(states, tokens):
            end = st.num_computed_tokens + so.num_scheduled_tokens[st.req_id]
            if end >= len(st.token_ids):
                st.token_ids.append(tok)
                sampled.append([tok])
            else:
                sampled.append([])
        t3 = self._sync()
        for k, dt in (("prepare", t1 - t0), ("model", t2 - t1), ("sample", t3 - t2)):
            self.step_timings[k] = self.step_timings.get(k, 0.0) + dt
        return ModelRunnerOutput(req_ids=req_ids, req_id_to_index={r: i for i, r in enumerate(req_ids)},
                                 sampled_token_ids=sampled)
