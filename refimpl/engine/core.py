"""EngineCore: start-up in vLLM V1's order, each phase timed, and ``reset_mm_cache``.

Mirrors ``vllm/v1/engine/core.py`` with the start-up paths of ``v1/worker/gpu_model_runner.py`` and
``v1/core/sched/scheduler.py``, as a start-up row says. Phases: startup_checks (ours: the
encoder-length and RAM refusals), then startup_plan.PHASES (passes of STARTUP_STEPS): runner_init
[#1, the runner's MultiModalBudget], load_model, profile_run [#2, #3], kv_cache_init, capture_model,
scheduler_init [#5], reset_mm_cache; every second of ``EngineCore()`` falls in one
(``StartupReport.wall_s``), with its HF-processor, hashing and dummy seconds (startup_report.PhaseMeter).
The check of a start-up against its StartupPlan is the tests' (``StartupPlan.mismatches``), never run
inside the start-up it times. Left out: multi-process
executors, tensor parallelism (each worker repeats #1-#3), the TPU precompile path.
"""
from __future__ import annotations

import dataclasses
import logging
import time
import warnings
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass
from typing import ClassVar

from refimpl.config import VllmConfig
from refimpl.core.sched.scheduler import Scheduler
from refimpl.engine.startup_plan import CHECK_PHASE, PHASES, RESET_PHASE
from refimpl.engine.startup_report import PhaseMeter, StartupReport  # noqa: F401  (StartupReport: public here)
from refimpl.errors import EncoderLengthMismatchError, EngineStateError
from refimpl.multimodal.encoder_budget import cache_on
from refimpl.request import RequestStatus
from refimpl.utils.mem_utils import peak_rss_bytes, rss_bytes
from refimpl.variants import ENCODER_LEN_SITES, StartupVariant, current_row_name, get_startup_variant
from refimpl.worker.gpu_model_runner import GPUModelRunner

logger = logging.getLogger(__name__)


class EngineCore:
    """Builds runner, KV cache and scheduler in vLLM V1's order, timing each phase.

    ``variant``: a start-up row or its name; ``reset_at_end`` overrides the row's reset; a
    ``mm_registry`` is set on ``vllm_config``. A failed start-up empties the registry's cache.
    Raises UnknownVariantError, EncoderLengthMismatchError, InsufficientMemoryError (a predicted peak
    beyond the machine's RAM, before anything is built), and whatever a phase raises."""

    def __init__(self, vllm_config: VllmConfig, variant: str | StartupVariant = "refimpl", *,
                 mm_registry=None, reset_at_end: bool | None = None):
        t_enter = time.perf_counter()
        self.vllm_config = vllm_config
        if variant == "shape-only":  # the one name whose row changed in 0.2.0: say so
            current_row_name(variant, stacklevel=2)
        self.switches: StartupVariant = variant if isinstance(variant, StartupVariant) else get_startup_variant(variant)
        self.variant = variant = self.switches.name
        self.mm_registry = vllm_config.use_mm_registry(mm_registry)
        # The version's multimodal mechanics (dummy dtype, hashing, oversize items, shape-only).
        vllm_config.model_config.mm_switches = self.switches.mm_switches
        vllm_config.scheduler_config.stop_check = self.switches.stop_check  # check_stop's order
        if reset_at_end is not None:  # the two-process engine's front end asks for the reset
            self.switches = dataclasses.replace(self.switches, reset_at_end=reset_at_end)
        self.report = StartupReport(variant)
        # per-step seconds of serving, newest last; bounded so a long-running engine stays small
        self.step_timings: deque[StepTimings] = deque(maxlen=100_000)
        check_encoder_len(vllm_config)
        check_startup_memory(vllm_config, self.switches)
        self.report.phases[CHECK_PHASE] = time.perf_counter() - t_enter
        try:
            self._startup()
        except BaseException:
            self.mm_registry.reset_processor_cache()
            raise
        self.report.wall_s = time.perf_counter() - t_enter

    @property
    def plan(self):
        """Deprecated (after 0.2.0): the dry StartupPlan of this engine's config and row, built now (the
        engine builds none; the guard, the explorer and the tests do)."""
        from refimpl.engine.startup_plan import StartupPlan
        warnings.warn("EngineCore.plan is deprecated: build StartupPlan.build(engine.vllm_config, engine.switches) (goes in 0.4.0)",
                      DeprecationWarning, stacklevel=2)
        return StartupPlan.build(self.vllm_config, self.switches)

    @contextmanager
    def _phase(self, name: str):
        meter = PhaseMeter(self.mm_registry)
        meter.start()
        try:
            yield
        finally:
            meter.stop(self.report, name)

    def _startup(self) -> None:
        cfg, rep, reg, v = self.vllm_config, self.report, self.mm_registry, self.switches
        mc = cfg.model_config
        reg.reset_stats()
        runner_init, load_model, profile_run, kv_cache_init, capture_model, scheduler_init = PHASES
        # The profiling cache per row (encoder_budget.cache_on): none (0.8.5), the registry's even
        # when the user turned it off (0.9.0 to 0.10.0), the runner's only when the user has one
        # (0.10.1 on), and then the scheduler's lookup passes none.
        disable = not cache_on(v, mc, profile_run)
        formula = v.uses_formula(mc.model)
        with self._phase(runner_init):  # the runner builds the MultiModalBudget (pass #1)
            self.model_runner = runner = GPUModelRunner(cfg, variant=v)  # the config's registry (set above)
        budget = runner.mm_budget
        with self._phase(load_model):
            runner.load_model()
        with self._phase(profile_run):
            runner.profile_run(disable_cache=disable, use_formula=formula, variant=v)
        with self._phase(kv_cache_init):
            num_blocks = runner.determine_num_blocks()
            runner.initialize_kv_cache(num_blocks)
        with self._phase(capture_model):
            runner.capture_model()
        with self._phase(scheduler_init):
            # the kit's default admits no item larger than the one its profile run encoded
            covered = runner.profile_tokens_per_item if v.profile_seq_len == "per-item-max" else None
            self.scheduler = Scheduler(cfg, num_blocks, mm_budget=budget, mm_registry=reg,
                                       max_item_tokens=covered or None)  # its own lookup: pass #5
        rep.encoder_compute_budget = self.scheduler.max_num_encoder_input_tokens
        rep.encoder_cache_size = self.scheduler.encoder_cache_manager.cache_size
        rep.num_gpu_blocks = num_blocks
        rep.max_tokens_per_item = dict(runner.max_tokens_per_item)
        rep.profile_tokens_per_item = runner.profile_tokens_per_item
        rep.profile_encoder_tokens = runner.profile_encoder_tokens
        rep.profile_encoder_forward_s = runner.profile_encoder_forward_s
        stats = reg.stats
        rep.hf_processor_calls, rep.hf_mm_passes = stats.hf_processor_calls, stats.hf_mm_passes
        rep.cache_hits, rep.cache_misses = stats.cache_hits, stats.cache_misses
        rep.cache_bytes_before_reset = reg.cache_bytes()
        rep.rss_before_reset = rss_bytes()
        rep.peak_rss_bytes = peak_rss_bytes()
        if v.reset_at_end:
            with self._phase(RESET_PHASE):
                self.reset_mm_cache()
        rep.cache_bytes_after_reset = reg.cache_bytes()
        rep.rss_after_reset = rss_bytes()

    def shutdown(self) -> None:
        """Nothing to end in-process (vLLM ``EngineCore.shutdown`` stops the executor)."""

    def reset_mm_cache(self) -> None:
        """Empty every multimodal cache this engine keeps. Raises EngineStateError while requests are
        in flight (vLLM only warns; the front-end and engine caches would fall out of step)."""
        if self.scheduler.has_unfinished_requests():
            raise EngineStateError("reset_mm_cache", "no unfinished requests",
                                   f"{self.scheduler.get_num_unfinished_requests()} requests in flight")
        self.mm_registry.reset_processor_cache()

    # serving
    def add_request(self, request) -> None:
        """Queue a refimpl.request.Request with the scheduler."""
        self.scheduler.add_request(request)

    def abort_requests(self, request_ids: list[str]) -> None:
        """Finish the requests as aborted; their KV blocks go back to the pool (and the runner's
        state of them, at once when nothing else is unfinished)."""
        self.scheduler.finish_requests(request_ids, RequestStatus.FINISHED_ABORTED)
        self._drain_finished()

    def has_unfinished_requests(self) -> bool:
        return self.scheduler.has_unfinished_requests()

    def _drain_finished(self) -> None:
        """Hand the runner the finished ids when no step would follow, so it frees their state now
        (vLLM's busy loop steps while ``has_finished_requests()``; an in-process caller stops before)."""
        if self.scheduler.has_finished_requests() and not self.scheduler.has_unfinished_requests():
            self.model_runner.execute_model(self.scheduler.schedule())

    def step(self) -> list:
        """One step: schedule, run the model, update; the finished RequestOutputs (a request the runner
        could not set up with finish_reason "error"). Appends the step's StepTimings."""
        if not self.scheduler.has_requests():
            return []
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
        self._drain_finished()
        return outputs


@dataclass
class StepTimings:
    """Seconds of one ``EngineCore.step()`` by part (PARTS; the runner's are host seconds, synchronised
    on CUDA only under ``WhisperRunner.synchronize_timings``) and ``num_scheduled_tokens``."""
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


def check_startup_memory(vllm_config: VllmConfig, row: StartupVariant) -> int:
    """The predicted peak RSS (bytes) of this start-up, from its dry StartupPlan (no processor built,
    no cache filled); raises InsufficientMemoryError beyond the machine's RAM (startup_memory.check_fits_in_ram)."""
    from refimpl.engine.startup_memory import check_fits_in_ram
    from refimpl.engine.startup_plan import StartupPlan
    return check_fits_in_ram(StartupPlan.build(vllm_config, row), vllm_config.model_config.mm_processor_kwargs)


def check_encoder_len(vllm_config: VllmConfig) -> None:
    """Refuse an encoder-decoder engine whose cross-attention length is not the model's.

    Every call site that reads a config field under the engine's encoder-length row is checked
    (``max_num_encoder_input_tokens``, or ``encoder_len_per_item`` for per-item sites), so rows
    0.13.0 and 0.14.0 are refused by default (their sizing: ``kv_cache_utils.cross_attention_sizing``).
    Raises EncoderLengthMismatchError naming the field and both values."""
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
                f"read at the {site!r} call site under {vllm_config.encoder_len_variant!r}; "
                "cross-attention would allocate the wrong number of blocks")
