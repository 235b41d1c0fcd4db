"""EngineCore: start-up in vLLM V1's order, each phase timed, and ``reset_mm_cache``.

Mirrors ``vllm/v1/engine/core.py`` (``EngineCore.__init__``, ``_initialize_kv_caches``,
``reset_mm_cache``) and the start-up path of ``vllm/v1/worker/gpu_model_runner.py`` and
``vllm/v1/core/sched/scheduler.py`` as of vLLM 0.9.0, where PR #17935 kept the processing
cache on during profiling and cleared it at the end of start-up.

Start-up phases (in brackets the multimodal passes of the pass table in docs/background.md):
  runner_init     GPUModelRunner.__init__: compute_encoder_budget            [#1]
  load_model      random-weight model from the shipped config
  profile_run     max-token lookup [#2]; decoder dummy data through the encoder [#3];
                  text dummy run; peak memory
  kv_cache_init   KV sizing from the profiled peak, KV tensors allocated
  capture_model   CUDA graphs for decode batch sizes (CUDA only)
  scheduler_init  Scheduler.__init__: compute_encoder_budget again           [#5]
  reset_mm_cache  empty every multimodal cache (variants cache-reset, formula)

Variants: ``refimpl.variants.STARTUP_VARIANTS`` (what each reproduces and its switches).

The two-process engine (front end P0, this class in a child P1, mirrored input caches) is in
core_proc.py / core_client.py / frontend.py. Left out: multi-process executors and tensor
parallelism (each worker would repeat #1-#3), the TPU precompile path.
"""
from __future__ import annotations

import dataclasses
import time
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import ClassVar

from refimpl.config import VllmConfig
from refimpl.errors import EncoderLengthMismatchError, EngineStateError
from refimpl.utils.mem_utils import peak_rss_bytes, rss_bytes
from refimpl.variants import ENCODER_LEN_SITES, StartupVariant, get_startup_variant


@dataclass
class StartupReport:
    """What one start-up did: seconds per phase, HF-processor passes, cache figures (bytes)."""
    variant: str
    phases: dict[str, float] = field(default_factory=dict)
    hf_processor_calls: int = 0
    hf_mm_passes: int = 0
    cache_hits: int = 0
    cache_misses: int = 0
    cache_bytes_before_reset: int = 0
    cache_bytes_after_reset: int = 0
    rss_before_reset: int = 0
    rss_after_reset: int = 0
    peak_rss_bytes: int = 0
    encoder_compute_budget: int = 0
    encoder_cache_size: int = 0
    num_gpu_blocks: int = 0
    max_tokens_per_item: dict[str, int] = field(default_factory=dict)
    passes_by_phase: dict[str, int] = field(default_factory=dict)

    @property
    def total_s(self) -> float:
        return sum(self.phases.values())


class EngineCore:
    """Builds runner, KV cache and scheduler in vLLM V1's order, timing each phase.

    ``variant`` names a record of ``refimpl.variants.STARTUP_VARIANTS``. On an exception in any
    phase the registry's processing cache is emptied before re-raising, so a failed start-up leaves no cache filled.
    ``reset_at_end`` overrides the variant's reset at the end of start-up (the two-process
    engine's front end asks for the reset itself, as vLLM's ``LLMEngine.__init__``).
    ``mm_registry`` (default: the config's, else the global one) is set on ``vllm_config``, so
    the runner, the scheduler and every encoder-length read use it and nothing global is touched.
    Raises UnknownVariantError, EncoderLengthMismatchError (encoder-decoder models whose
    cross-attention length differs from the model's encoder length), and whatever a phase raises.
    """

    def __init__(self, vllm_config: VllmConfig, variant: str = "cache-reset", *,
                 mm_registry=None, reset_at_end: bool | None = None):
        self.vllm_config = vllm_config
        self.variant = variant
        self.switches: StartupVariant = get_startup_variant(variant)
        self.mm_registry = vllm_config.use_mm_registry(mm_registry)
        # The version's multimodal mechanics (dummy dtype, hashing, oversize items, shape-only).
        vllm_config.model_config.mm_switches = self.switches.mm_switches
        if reset_at_end is not None:  # the two-process engine's front end asks for the reset
            self.switches = dataclasses.replace(self.switches, reset_at_end=reset_at_end)
        self.report = StartupReport(variant)
        # per-step seconds of serving, newest last; bounded so a long-running engine stays small
        self.step_timings: deque[StepTimings] = deque(maxlen=100_000)
        check_encoder_len(vllm_config)
        try:
            self._startup()
        except BaseException:
            self.mm_registry.reset_processor_cache()
            raise

    @contextmanager
    def _phase(self, name: str):
        stats = self.mm_registry.stats
        passes0, t0 = stats.hf_mm_passes, time.perf_counter()
        try:
            yield
        finally:
            self.report.phases[name] = time.perf_counter() - t0
            self.report.passes_by_phase[name] = stats.hf_mm_passes - passes0

    def _startup(self) -> None:
        from refimpl.core.encoder_cache_manager import compute_encoder_budget
        from refimpl.core.sched.scheduler import Scheduler
        from refimpl.worker.gpu_model_runner import GPUModelRunner
        cfg, rep, reg = self.vllm_config, self.report, self.mm_registry
        reg.reset_stats()
        budget_kw = dict(disable_cache=not self.switches.cache_during_profiling,
                         use_formula=self.switches.max_tokens_by_formula)
        with self._phase("runner_init"):
            self.model_runner = GPUModelRunner(cfg)  # reads the config's registry (set above)
            budget = compute_encoder_budget(cfg.model_config, cfg.scheduler_config, reg, **budget_kw)
            self.model_runner.encoder_compute_budget, self.model_runner.encoder_cache_size = budget
        with self._phase("load_model"):
            self.model_runner.load_model()
        with self._phase("profile_run"):
            self.model_runner.profile_run(**budget_kw)
        with self._phase("kv_cache_init"):
            num_blocks = self.model_runner.determine_num_blocks()
            self.model_runner.initialize_kv_cache(num_blocks)
        with self._phase("capture_model"):
            self.model_runner.capture_model()
        with self._phase("scheduler_init"):
            enc_budget, enc_cache = compute_encoder_budget(cfg.model_config, cfg.scheduler_config,
                                                           reg, **budget_kw)
            self.scheduler = Scheduler(cfg, num_blocks, encoder_compute_budget=enc_budget,
                                       encoder_cache_size=enc_cache, mm_registry=reg)
        rep.encoder_compute_budget, rep.encoder_cache_size = enc_budget, enc_cache
        rep.num_gpu_blocks = num_blocks
        rep.max_tokens_per_item = dict(self.model_runner.max_tokens_per_item)
        stats = reg.stats
        rep.hf_processor_calls, rep.hf_mm_passes = stats.hf_processor_calls, stats.hf_mm_passes
        rep.cache_hits, rep.cache_misses = stats.cache_hits, stats.cache_misses
        rep.cache_bytes_before_reset = reg.cache_bytes()
        rep.rss_before_reset = rss_bytes()
        rep.peak_rss_bytes = peak_rss_bytes()
        if self.switches.reset_at_end:
            with self._phase("reset_mm_cache"):
                self.reset_mm_cache()
        rep.cache_bytes_after_reset = reg.cache_bytes()
        rep.rss_after_reset = rss_bytes()

    def shutdown(self) -> None:
        """Nothing to end in-process (vLLM ``EngineCore.shutdown`` stops the executor)."""

    def reset_mm_cache(self) -> None:
        """Empty every multimodal cache this engine keeps (vLLM ``EngineCore.reset_mm_cache``).

        Refused with EngineStateError while requests are in flight: vLLM only warns there, but
        a reset then desynchronises the front-end and engine caches (vLLM #16875 / #17284).
        """
        if self.scheduler.has_unfinished_requests():
            raise EngineStateError("reset_mm_cache", "no unfinished requests",
                                   f"{self.scheduler.get_num_unfinished_requests()} requests in flight")
        self.mm_registry.reset_processor_cache()

    # serving
    def add_request(self, request) -> None:
        """Queue a refimpl.request.Request with the scheduler."""
        self.scheduler.add_request(request)

    def abort_requests(self, request_ids: list[str]) -> None:
        """Finish the requests as aborted; their KV blocks go back to the pool."""
        from refimpl.request import RequestStatus
        self.scheduler.finish_requests(request_ids, RequestStatus.FINISHED_ABORTED)

    def has_unfinished_requests(self) -> bool:
        return self.scheduler.has_unfinished_requests()

    def step(self) -> list:
        """One engine step: schedule, run the model, update. Returns finished RequestOutputs.

        Appends the step's StepTimings to ``self.step_timings`` (the runner's prepare /
        model / sample seconds of this step, the scheduler's around them).
        """
        t0 = time.perf_counter()
        scheduler_output = self.scheduler.schedule()
        t1 = time.perf_counter()
        n = scheduler_output.total_num_scheduled_tokens
        if n == 0 and not scheduler_output.finished_req_ids:
            self.step_timings.append(StepTimings(schedule=t1 - t0))
            return []
        runner_t = self.model_runner.step_timings
        before = dict(runner_t)
        runner_output = self.model_runner.execute_model(scheduler_output)
        t2 = time.perf_counter()
        outputs = self.scheduler.update_from_output(scheduler_output, runner_output)
        t3 = time.perf_counter()
        self.step_timings.append(StepTimings(
            schedule=t1 - t0, update=t3 - t2, num_scheduled_tokens=n,
            **{k: runner_t.get(k, 0.0) - before.get(k, 0.0) for k in ("prepare", "model", "sample")}))
        return outputs


@dataclass
class StepTimings:
    """Seconds of one ``EngineCore.step()``: ``schedule`` (Scheduler.schedule), ``prepare``
    (runner state update, inputs, attention metadata), ``model`` (encoder + decoder forward),
    ``sample``, ``update`` (Scheduler.update_from_output); ``num_scheduled_tokens`` (tokens).
    The runner's parts are synchronised on CUDA (``WhisperRunner._sync``)."""
    schedule: float = 0.0
    prepare: float = 0.0
    model: float = 0.0
    sample: float = 0.0
    update: float = 0.0
    num_scheduled_tokens: int = 0

    PARTS: ClassVar[tuple[str, ...]] = ("schedule", "prepare", "model", "sample", "update")

    @property
    def total(self) -> float:
        return self.schedule + self.prepare + self.model + self.sample + self.update


def check_encoder_len(vllm_config: VllmConfig) -> None:
    """Refuse an encoder-decoder engine whose cross-attention length is not the model's.

    The guard for the review of vLLM PR #24989: ``max_num_encoder_input_tokens`` is an alias
    of ``max_num_batched_tokens`` unless the encoder-decoder override ran; 1024 would give 64
    cross-attention blocks instead of 94 (writes past the request's blocks), 8192 would give
    512 (5x over-reservation). Every call site that reads a config field (not the registry)
    under the engine's variant is checked: ``max_num_encoder_input_tokens`` for
    runner-config / scheduler-config, ``encoder_len_per_item`` for encoder-batch (whose
    ``max_num_encoder_input_tokens`` is a budget of several audios). Raises
    EncoderLengthMismatchError naming the field and both values.
    """
    mc = vllm_config.model_config
    if not mc.is_encoder_decoder:
        return
    for site in ENCODER_LEN_SITES:
        source = vllm_config.encoder_len_source(site)
        if source == "registry":
            continue
        n = vllm_config.get_encoder_len(site)
        if n != mc.max_encoder_len:
            field = ("scheduler_config.encoder_len_per_item" if source == "per-item"
                     else "scheduler_config.max_num_encoder_input_tokens")
            raise EncoderLengthMismatchError(
                field, mc.max_encoder_len,
                f"{n} != the model's encoder length {mc.max_encoder_len} (max_source_positions), "
                f"read at the {site!r} call site; cross-attention would allocate the wrong "
                "number of blocks")
