"""Test helpers for the scheduler and KV-cache tests, after vLLM's tests/v1/core/utils.py
(``create_scheduler``, ``create_requests``), plus a fake model runner and a counting
registry stub.

The registry stub: ``VllmConfig.__post_init__`` (for Whisper) and
``vllm_config.get_encoder_len`` (under the '0.10.2' / '0.10.2+#24866' variants) import
``refimpl.multimodal.MULTIMODAL_REGISTRY`` at call time. ``patch_registry`` swaps that
attribute for a :class:`FakeRegistry` with ``unittest.mock.patch(..., create=True)``, which
works whether or not the real registry exists yet, and never builds a processor. Keep the
patch active while scheduling when a test uses a registry variant.
"""
from __future__ import annotations

import contextlib
from typing import Optional
from unittest import mock

import torch

from refimpl.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
from refimpl.core.sched.output import SchedulerOutput
from refimpl.core.sched.scheduler import Scheduler
from refimpl.multimodal.inputs import PlaceholderRange
from refimpl.outputs import ModelRunnerOutput
from refimpl.request import Request
from refimpl.sampling_params import SamplingParams

WHISPER = "whisper-tiny"
QWEN = "qwen2.5-vl-3b"
WHISPER_PROMPT = [50258, 50259, 50359, 50363]  # <|startoftranscript|><|en|><|transcribe|><|notimestamps|>
ENCODER_LEN = 1500
# One stand-in log-mel of the shape admission checks (80 mel bins x 3000 frames), shared by
# every Whisper request the helpers make (no copy per request).
WHISPER_FEATURES = torch.zeros(80, 2 * ENCODER_LEN)


class FakeRegistry:
    """Counts ``get_encdec_max_encoder_len`` calls; returns ``value`` or the model's length."""

    def __init__(self, value: Optional[int] = None):
        self.value = value
        self.calls = 0

    def get_encdec_max_encoder_len(self, model_config) -> int:
        self.calls += 1
        return self.value if self.value is not None else model_config.max_encoder_len


def patch_registry(registry: Optional[FakeRegistry] = None):
    """Context manager installing ``registry`` (a new FakeRegistry by default) as
    ``refimpl.multimodal.MULTIMODAL_REGISTRY``; yields it."""
    registry = registry or FakeRegistry()

    @contextlib.contextmanager
    def _cm():
        with mock.patch("refimpl.multimodal.MULTIMODAL_REGISTRY", registry, create=True):
            yield registry
    return _cm()


def create_vllm_config(model: str = WHISPER, *, max_num_seqs: int = 16,
                       max_num_batched_tokens: int = 8192, block_size: int = 16,
                       max_model_len: Optional[int] = None,
                       encoder_len_variant: str = "0.11.0",
                       registry: Optional[FakeRegistry] = None) -> VllmConfig:
    with patch_registry(registry):
        return VllmConfig(
            ModelConfig(model, max_model_len=max_model_len, device="cpu", dtype="float32"),
            SchedulerConfig(max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=max_num_seqs),
            CacheConfig(block_size=block_size), encoder_len_variant=encoder_len_variant)


def create_scheduler(model: str = WHISPER, *, num_blocks: int = 10000,
                     encoder_compute_budget: Optional[int] = None,
                     encoder_cache_size: Optional[int] = None, **config_kw) -> Scheduler:
    """A Scheduler over a fresh VllmConfig; encoder budgets default to vLLM's values
    (Whisper: 1500 / 1500, decoder-only: max_num_batched_tokens)."""
    cfg = create_vllm_config(model, **config_kw)
    default = (ENCODER_LEN if cfg.model_config.is_encoder_decoder
               else cfg.scheduler_config.max_num_batched_tokens)
    return Scheduler(cfg, num_blocks,
                     encoder_compute_budget=encoder_compute_budget or default,
                     encoder_cache_size=encoder_cache_size or default)


def create_requests(num_requests: int, *, model: str = WHISPER, max_tokens: int = 16,
                    prompt_len: Optional[int] = None, ignore_eos: bool = True,
                    prefix: str = "req", num_mm_items: int = 0, mm_len: int = 64,
                    **sp_kw) -> list[Request]:
    """Whisper requests: the 4-token decoder prompt and one stand-in audio item (zeros of the
    real feature shape) of 1500 encoder tokens. Decoder-only requests: ``prompt_len`` tokens and optionally
    ``num_mm_items`` image placeholders of ``mm_len`` tokens spread over the prompt."""
    reqs = []
    for i in range(num_requests):
        sp = SamplingParams(max_tokens=max_tokens, ignore_eos=ignore_eos, **sp_kw)
        if model.startswith("whisper"):
            prompt = WHISPER_PROMPT[:prompt_len] if prompt_len else list(WHISPER_PROMPT)
            mm = [{"input_features": WHISPER_FEATURES}]
            pos = [PlaceholderRange(0, ENCODER_LEN)]
        else:
            n = prompt_len or 32
            prompt = [(7 * i + j) % 1000 + 1 for j in range(n)]
            mm = [{"pixel_values": torch.zeros(1, 2)} for _ in range(num_mm_items)]
            pos = [PlaceholderRange(k * (n // max(num_mm_items, 1)), mm_len) for k in range(num_mm_items)]
        reqs.append(Request(f"{prefix}{i}", prompt, sp, mm_inputs=mm,
                            mm_hashes=[f"{prefix}{i}-{k}" for k in range(len(mm))],
                            mm_positions=pos, arrival_time=float(i)))
    return reqs


def fake_token(req_id: str, position: int) -> int:
    """Deterministic 'sampled' token for position ``position`` (0-based) of ``req_id``."""
    return (sum(map(ord, req_id)) * 31 + position * 17) % 1000 + 1000


class FakeModelRunner:
    """Plays the runner's side of the SchedulerOutput contract and checks it.

    Keeps each request's tokens and blocks, drops state for finished / preempted ids, and
    samples ``fake_token(req_id, len(tokens))`` once a request's scheduled tokens reach the
    end of what it knows. Asserts: no block owned twice, cross-attention blocks exactly
    ``cross_blocks`` and only on new requests, encoder inputs only for new requests
    (encoder-decoder), no unknown request ids.
    """

    def __init__(self, cross_blocks: int = 0, token_fn=fake_token):
        self.cross_blocks = cross_blocks
        self.token_fn = token_fn
        self.state: dict[str, dict] = {}
        self.num_encoder_runs = 0

    def execute_model(self, so: SchedulerOutput) -> ModelRunnerOutput:
        for rid in so.finished_req_ids | so.preempted_req_ids:
            self.state.pop(rid, None)
        for nr in so.scheduled_new_reqs:
            assert nr.req_id not in self.state, f"{nr.req_id} sent as new twice"
            self_ids, cross_ids = nr.block_ids
            assert len(cross_ids) == self.cross_blocks, (nr.req_id, len(cross_ids))
            if self.cross_blocks:
                assert so.scheduled_encoder_inputs.get(nr.req_id) == [0]
            self.state[nr.req_id] = dict(tokens=list(nr.prompt_token_ids), computed=nr.num_computed_tokens,
                                         blocks=list(self_ids) + list(cross_ids))
        cr = so.scheduled_cached_reqs
        for rid, new_ids, computed in zip(cr.req_ids, cr.new_block_ids, cr.num_computed_tokens):
            st = self.state[rid]
            assert st["computed"] == computed, (rid, st["computed"], computed)
            if new_ids is not None:
                assert not new_ids[1], "cross-attention blocks grow only at admission"
                st["blocks"] += new_ids[0]
            if self.cross_blocks:
                assert rid not in so.scheduled_encoder_inputs
        self.num_encoder_runs += sum(len(v) for v in so.scheduled_encoder_inputs.values())
        owned = [b for st in self.state.values() for b in st["blocks"]]
        assert len(owned) == len(set(owned)) and 0 not in owned, "block owned twice / null block"
        sampled = {}
        for rid, n in so.num_scheduled_tokens.items():
            st = self.state[rid]
            st["computed"] += n
            assert st["computed"] <= len(st["tokens"])
            if st["computed"] == len(st["tokens"]):
                tok = self.token_fn(rid, len(st["tokens"]))
                st["tokens"].append(tok)
                sampled[rid] = [tok]
        return ModelRunnerOutput.from_dict(sampled)


def run_to_completion(scheduler: Scheduler, runner: FakeModelRunner, max_steps: int = 10000,
                      on_step=None) -> dict:
    """Step until nothing is unfinished; returns {req_id: RequestOutput}; asserts each
    request finishes exactly once."""
    done = {}
    for step in range(max_steps):
        if not scheduler.has_unfinished_requests():
            break
        so = scheduler.schedule()
        if on_step:
            on_step(step, so)
        for out in scheduler.update_from_output(so, runner.execute_model(so)):
            assert out.request_id not in done, f"{out.request_id} finished twice"
            done[out.request_id] = out
    assert not scheduler.has_unfinished_requests(), "did not finish"
    return done
