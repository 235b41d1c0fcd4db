"""Scheduler test helpers in vLLM's idiom (``tests/v1/core/utils.py``), the contract-checking
FakeModelRunner and ``run_to_completion``. No HF processor runs (budgets are passed in,
Whisper's encoder length comes from the model config); requests carry tiny stand-in tensors.

Differences from vLLM's helpers: ``create_requests`` takes ``model`` and ``prompt_len`` (vLLM:
``num_tokens``) and builds Whisper audio and Qwen2.5-VL image / video requests;
``create_scheduler`` takes no prefix-caching, KV-connector or speculative settings.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import torch

from refimpl.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
from refimpl.config.checks import check_count
from refimpl.core.sched.output import SchedulerOutput
from refimpl.core.sched.scheduler import Scheduler
from refimpl.multimodal.inputs import PlaceholderRange
from refimpl.outputs import ModelRunnerOutput, RequestOutput
from refimpl.request import Request
from refimpl.sampling_params import SamplingParams

WHISPER = "whisper-tiny"
QWEN = "qwen2.5-vl-3b"
WHISPER_PROMPT = [50258, 50259, 50359, 50363]  # <|startoftranscript|><|en|><|transcribe|><|notimestamps|>
ENCODER_LEN = 1500  # Whisper's max_source_positions: encoder tokens of one audio
# The processed item's main tensor per modality (stand-ins: the scheduler reads only lengths)
MM_KEYS = {"image": "pixel_values", "video": "pixel_values_videos", "audio": "input_features"}
# One stand-in log-mel of the shape admission checks (80 mel bins x 3000 frames), shared by every
# Whisper request the helpers make (no copy per request).
WHISPER_FEATURES = torch.zeros(80, 2 * ENCODER_LEN)


def create_vllm_config(model: str = WHISPER, *, max_num_seqs: int = 16,
                       max_num_batched_tokens: int = 8192, block_size: int = 16,
                       max_model_len: Optional[int] = None,
                       encoder_len_variant: str = "0.11.0", mm_registry: Any = None,
                       max_audios_per_step: int = 1, **model_kw: Any) -> VllmConfig:
    """A CPU, float32 VllmConfig at the small scale. ``model_kw`` go to ModelConfig (e.g.
    ``limit_mm_per_prompt``, ``mm_processor_kwargs``); ``mm_registry`` becomes the config's
    registry (default: the global one, asked only by the registry-reading variants);
    ``max_audios_per_step`` > 1 needs ``encoder_len_variant="audios-per-step"`` (else ConfigError)."""
    if max_model_len is not None:  # None: the model's own (ModelConfig's default)
        model_kw["max_model_len"] = max_model_len
    return VllmConfig(
        ModelConfig(model, device="cpu", dtype="float32", **model_kw),
        SchedulerConfig(max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=max_num_seqs,
                        max_audios_per_step=max_audios_per_step),
        CacheConfig(block_size=block_size), encoder_len_variant=encoder_len_variant,
        mm_registry=mm_registry)


def create_scheduler(model: str = WHISPER, *, num_blocks: int = 10000,
                     encoder_compute_budget: Optional[int] = None,
                     encoder_cache_size: Optional[int] = None, **config_kw: Any) -> Scheduler:
    """A Scheduler of ``num_blocks`` blocks over ``create_vllm_config(model, **config_kw)``; both
    encoder budgets one step's input (Whisper 1500, or N audios; decoder-only max_num_batched_tokens)."""
    cfg = create_vllm_config(model, **config_kw)
    sc = cfg.scheduler_config
    default = (sc.max_num_encoder_input_tokens if cfg.model_config.is_encoder_decoder
               else sc.max_num_batched_tokens)
    return Scheduler(cfg, num_blocks, encoder_compute_budget=encoder_compute_budget or default,
                     encoder_cache_size=encoder_cache_size or default)


def create_requests(num_requests: int, *, model: str = WHISPER, max_tokens: int = 16,
                    prompt_len: Optional[int] = None, ignore_eos: bool = True,
                    prefix: str = "req", num_mm_items: int = 0, mm_len: int = 64,
                    modality: str = "image",
                    mm_positions: Optional[list[list[PlaceholderRange]]] = None,
                    **sp_kw: Any) -> list[Request]:
    """Requests ``{prefix}{i}`` arriving at ``i``: Whisper the 4-token decoder prompt and one 1500-token
    audio; Qwen2.5-VL / text ``prompt_len`` tokens with ``num_mm_items`` items of ``mm_len``
    placeholders (or at ``mm_positions``). ``sp_kw`` go to SamplingParams. Raises ConfigError
    ("num_requests") for a count below 0."""
    check_count("num_requests", num_requests, 0)
    reqs = []
    for i in range(num_requests):
        sp = SamplingParams(max_tokens=max_tokens, ignore_eos=ignore_eos, **sp_kw)
        if model.startswith("whisper"):
            prompt = WHISPER_PROMPT[:prompt_len] if prompt_len else list(WHISPER_PROMPT)
            pos, m = [PlaceholderRange(0, ENCODER_LEN)], "audio"
        else:
            n = prompt_len or 32
            prompt = [(7 * i + j) % 1000 + 1 for j in range(n)]
            pos = (list(mm_positions[i]) if mm_positions is not None else
                   [PlaceholderRange(k * (n // max(num_mm_items, 1)), mm_len) for k in range(num_mm_items)])
            m = modality
        mm = [{MM_KEYS[m]: WHISPER_FEATURES if m == "audio" else torch.zeros(2, 2)} for _ in pos]
        reqs.append(Request(f"{prefix}{i}", prompt, sp, mm_inputs=mm,
                            mm_hashes=[f"{prefix}{i}-{k}" for k in range(len(mm))],
                            mm_positions=pos, arrival_time=float(i)))
    return reqs


def fake_token(req_id: str, position: int) -> int:
    """Deterministic 'sampled' token for position ``position`` (0-based) of ``req_id``."""
    return (sum(map(ord, req_id)) * 31 + position * 17) % 1000 + 1000


class FakeModelRunner:
    """Plays the runner's side of the SchedulerOutput contract and checks it.

    Samples ``token_fn(req_id, len(tokens))`` when a request's scheduled tokens reach its end.
    Asserts (naming the request): no block owned twice nor block 0, ``cross_blocks`` cross blocks
    on new requests only, encoder inputs only for new requests, no unknown ids,
    ``num_computed_tokens`` as counted. ``num_encoder_runs``: encoder inputs so far."""

    def __init__(self, cross_blocks: int = 0, token_fn: Callable[[str, int], int] = fake_token):
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
                      on_step: Optional[Callable[[int, SchedulerOutput], Any]] = None
                      ) -> dict[str, RequestOutput]:
    """Step until nothing is unfinished; returns {req_id: RequestOutput}. ``on_step(step,
    scheduler_output)`` runs before the runner. AssertionError if a request finishes twice
    or requests are left after ``max_steps``."""
    done: dict[str, RequestOutput] = {}
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
