"""StartupPlan: what one engine start-up will do, step by step, from its configs alone.

Ours (vLLM has none): the engine's start-up walked dry over a dry MultiModalBudget
(refimpl/multimodal/encoder_budget.py, the object the runner and scheduler read). The tests check
each phase of an ``EngineCore`` against it (``mismatches``); the oracles of refimpl.testing, the
benches' memory guard, the engine's RAM refusal and the cost model read it. Pure: no HF processor
built, no HF pass, no process-wide cache read or filled, nothing full-size allocated; the processing
cache is the kit's own ``ProcessingCache`` fed with sizes.
Each step's items (shape, dtype, bytes), hashes and their copies, cache hits, misses and stores,
HF calls, what the reset frees per process; its peak resident bytes by holder:
startup_memory.peak_bytes_by_holder. Assumes a fresh process (an empty cache). The phases, the pass
table and the items are in refimpl.engine.startup_steps (importable from here too).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

from refimpl.config import SchedulerConfig
from refimpl.core.kv_cache_utils import kv_bytes_per_block, kv_check_encoder_len_reads
from refimpl.engine.startup_steps import (  # noqa: F401 - the names this module held before the split
    CHECK_PHASE,
    PHASES,
    RESET_PHASE,
    STARTUP_STEPS,
    Item,
    StartupStep,
    Step,
    make_item,
    walk,
)
from refimpl.errors import CacheItemTooLargeError
from refimpl.multimodal import encoder_budget as eb
from refimpl.multimodal.encoder_budget import MultiModalBudget
from refimpl.multimodal.hash_paths import HASH_COPIES
from refimpl.multimodal.registry import MultiModalRegistry
from refimpl.variants import StartupVariant, get_startup_variant
from refimpl.worker.model_size import parameter_bytes

GiB = 1 << 30
REGISTRY = MultiModalRegistry(cache_bytes=0)  # kept for callers; the plan builds no processor


@dataclass
class StartupPlan:
    """A start-up (``calls`` None) or a budget experiment of ``calls`` lookups, step by step.
    ``error``: the CacheItemTooLargeError that start-up raises (steps end there)."""
    model: str
    variant: StartupVariant
    steps: list[Step]
    max_tokens_per_item: dict[str, int]
    encoder_budget: tuple[int, int] = (0, 0)
    encoder_items: int = 0
    profile_item: Optional[Item] = None
    num_gpu_blocks: Optional[int] = 0  # None: CUDA sizes it from the profile run's measured peak
    kv_bytes: int = 0  # host bytes of the KV cache (0 on CUDA: it lives on the GPU)
    kv_registry_calls: int = 0
    extra_weight_bytes: int = 0
    calls: Optional[int] = None
    error: Optional[CacheItemTooLargeError] = None

    @classmethod
    def build(cls, vllm_config, variant: str | StartupVariant = "refimpl") -> "StartupPlan":
        """The plan of ``EngineCore(vllm_config, variant)``. Raises UnknownVariantError."""
        v = get_startup_variant(variant) if isinstance(variant, str) else variant
        mc, sc = vllm_config.model_config, vllm_config.scheduler_config
        cc = vllm_config.cache_config
        per_block = kv_bytes_per_block(mc, cc.block_size)  # the runner's KV arithmetic (GPUModelRunner.bytes_per_block)
        # CUDA: gpu_memory_utilization less the profile run's measured GPU peak (unknown before it runs)
        on_gpu = mc.device != "cpu"
        blocks = cc.num_gpu_blocks or (None if on_gpu else cc.kv_cache_memory_bytes // per_block)
        kv_calls = (kv_check_encoder_len_reads(mc) * (vllm_config.encoder_len_source("kv_cache") == "registry")
                    + (mc.is_encoder_decoder and vllm_config.encoder_len_source("runner") == "registry"))
        full = 0 if mc.scale == "small" or on_gpu else \
            parameter_bytes(mc) - parameter_bytes(replace(mc, scale="small"))  # host weights beyond the small ones
        plan = cls(mc.model, v, [], {}, num_gpu_blocks=blocks,
                   kv_bytes=0 if blocks is None or on_gpu else blocks * per_block,
                   kv_registry_calls=kv_calls, extra_weight_bytes=full)
        budget = MultiModalBudget(mc, sc, None, v, dry=True)
        if not budget.mm_limits:
            return plan
        plan.max_tokens_per_item = dict(budget.mm_max_toks_per_item)
        plan.encoder_budget = (budget.encoder_compute_budget, budget.encoder_cache_size)
        dummy = budget.profile_item
        if dummy is None:
            return plan
        lookup = [make_item(budget.info, s, v) for s in budget.lookup_specs()]
        plan.profile_item, plan.encoder_items = make_item(budget.info, dummy.spec, v), dummy.items
        todo = [(st.phase, f"{st.pass_no} {st.caller.split(':')[0]}", st.kind,
                 lookup if st.kind == "lookup" else [plan.profile_item]) for st in STARTUP_STEPS
                if not (st.when and not getattr(v, st.when)) and not (st.kind == "lookup" and v.uses_formula(mc.model))]
        plan.steps, plan.error = walk(mc, v, todo)
        return plan

    @classmethod
    def budget(cls, model_config, variant: str | StartupVariant, calls: int = 2) -> "StartupPlan":
        """``calls`` successive ``compute_encoder_budget`` lookups in one fresh process (the
        reviewer's experiment, ``refimpl bench startup --calls N``); none under the row's formula."""
        v = get_startup_variant(variant) if isinstance(variant, str) else variant
        budget = MultiModalBudget(model_config, SchedulerConfig(), None, v, dry=True)
        lookup = [make_item(budget.info, s, v) for s in budget.lookup_specs()]
        todo = [] if v.uses_formula(model_config.model) else \
            [(f"call_{i + 1}", f"call {i + 1}", "lookup", lookup) for i in range(calls)]
        row = replace(v, profiling_cache="registry" if v.cache_during_profiling else "off")
        steps, error = walk(model_config, row, todo)
        return cls(model_config.model, v, steps, {}, calls=calls, error=error)

    # ------------------------------------------------------------------ views
    @property
    def family(self) -> str:
        return "qwen2.5-vl-3b" if self.model.startswith("qwen") else "whisper-tiny"

    @property
    def failure(self) -> Optional[str]:
        """The start-up's error, after the pass that raised it."""
        return None if self.error is None else f"{self.steps[-1].name}: {self.error}"

    @property
    def phases(self) -> tuple[str, ...]:
        return PHASES + ((RESET_PHASE,) if self.variant.reset_at_end and self.calls is None else ())

    def hf_passes_by_phase(self) -> dict[str, int]:
        """HF-processor passes with items per phase (every phase, 0 included): the steps' passes and,
        in kv_cache_init, an encoder-decoder row's uncached registry reads (one pass each)."""
        out = dict.fromkeys(self.phases if self.calls is None else (), 0)
        for s in self.steps:
            out[s.phase] = out.get(s.phase, 0) + bool(s.hf_items)
        if self.calls is None:
            out["kv_cache_init"] += self.kv_registry_calls
        return out

    def cache_bytes_after(self, phase: str) -> int:
        """Processing-cache bytes after ``phase`` (0 after the reset)."""
        if phase == RESET_PHASE:
            return 0
        upto = self.phases[:self.phases.index(phase) + 1] if self.calls is None else (phase,)
        return next((s.cache_after for s in reversed(self.steps) if s.phase in upto), 0)

    @property
    def hf_processor_calls(self) -> int:
        return sum(bool(s.hf_items) + s.text_only_calls for s in self.steps) + self.kv_registry_calls

    @property
    def cache_hits(self) -> int:
        return sum(sum(s.hits) for s in self.steps if s.cache_on)

    @property
    def cache_misses(self) -> int:
        return sum(len(s.hits) - sum(s.hits) for s in self.steps if s.cache_on)

    @property
    def cache_bytes_before_reset(self) -> int:
        return self.steps[-1].cache_after if self.steps else 0

    @property
    def cache_bytes_after_reset(self) -> int:
        return 0 if self.variant.reset_at_end else self.cache_bytes_before_reset

    def hash_copy_bytes(self, step: Step) -> int:
        """Bytes ``step``'s hashing copies on the row's byte path (hasher.HASH_COPIES per item kind)."""
        copies = HASH_COPIES[self.variant.mm.hash_byte_path]
        return sum(i.nbytes * copies[i.kind] for i in step.items) if step.hashed else 0

    @property
    def profile_encoder_tokens(self) -> int:
        """Encoder tokens of the profile run's batch (items x tokens per item)."""
        return self.encoder_items * self.profile_item.tokens if self.profile_item else 0

    def reset_frees(self) -> dict[str, tuple[int, int]]:
        """(cache bytes before the reset, bytes the reset frees) per process: in-process, and with
        V1 multiprocessing the front end (P0: no profiling) and the engine core (P1: the
        profiling passes' cache, freed only under reset_scope "all")."""
        b, v = self.cache_bytes_before_reset, self.variant
        return {"in-process engine": (b, b if v.reset_at_end else 0), "P0 front end (mp)": (0, 0),
                "P1 engine core (mp)": (b, b if v.reset_at_end and v.reset_scope == "all" else 0)}

    def expected_report(self) -> dict[str, object]:
        """What ``EngineCore``'s StartupReport holds after this start-up (its field names)."""
        item = self.profile_item
        return {"passes_by_phase": self.hf_passes_by_phase(),
                "cache_bytes_by_phase": {p: self.cache_bytes_after(p) for p in self.phases},
                "hf_processor_calls": self.hf_processor_calls, "hf_mm_passes": sum(self.hf_passes_by_phase().values()),
                "cache_hits": self.cache_hits, "cache_misses": self.cache_misses,
                "cache_bytes_before_reset": self.cache_bytes_before_reset,
                "cache_bytes_after_reset": self.cache_bytes_after_reset,
                "encoder_compute_budget": self.encoder_budget[0], "encoder_cache_size": self.encoder_budget[1],
                "max_tokens_per_item": self.max_tokens_per_item, "num_gpu_blocks": self.num_gpu_blocks,
                "profile_tokens_per_item": item.tokens if item else 0,
                "profile_encoder_tokens": self.profile_encoder_tokens}

    def mismatches(self, report) -> list[str]:
        """Where a StartupReport differs from ``expected_report`` ("field: plan X, engine Y"); a field the
        plan cannot know (None: CUDA's KV blocks) is not compared."""
        return [f"{k}: plan {want}, engine {getattr(report, k)}" for k, want in self.expected_report().items()
                if want is not None and getattr(report, k) != want]


def __getattr__(name: str):
    """``cache_on`` moved to refimpl.multimodal.encoder_budget after 0.2.0: still importable from
    here, with a DeprecationWarning."""
    if name == "cache_on":
        import warnings
        warnings.warn("refimpl.engine.startup_plan.cache_on moved to refimpl.multimodal.encoder_budget.cache_on (the old path goes in 0.4.0)",
                      DeprecationWarning, stacklevel=2)
        return eb.cache_on
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
