"""MultiModalBudget: the worst case of start-up, computed once and read by the runner and the scheduler.

Mirrors ``vllm/multimodal/budget.py`` (``MultiModalBudget``; ``v1/worker/utils.py`` in 0.10.1 to
0.11), which ``GPUModelRunner.__init__`` builds and ``profile_run`` reads, and the
``compute_encoder_budget`` call of the runner and the scheduler before it (0.8.5 to 0.10.0). A
release row's differences are switches this object reads (refimpl.variants.StartupVariant):
``profiling_cache`` (which lookup passes use a processing cache), ``formula_models`` (max tokens by
formula, no HF pass), ``profile_run_lookup`` (profile_run looks them up again), ``profile_items``
(cdiv or floor items per batch) and ``profile_seq_len`` (the profile dummy's ``seq_len``).

``dry=True`` (the StartupPlan, the explorer, the oracles): every figure from the configs and the
size functions, no HF processor built, no HF pass, no process-wide cache read or filled.
Left out: per-prompt item limits of the decoder budget with chunked prefill off, ``reset_cache``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from refimpl.core.encoder_cache_manager import compute_mm_encoder_budget
from refimpl.multimodal.registry import MULTIMODAL_REGISTRY, MultiModalRegistry
from refimpl.variants import StartupVariant, get_startup_variant

# The phases whose callers look the max tokens up (the engine's names, startup_plan.PHASES)
LOOKUP_PHASES = ("runner_init", "profile_run", "scheduler_init")


@dataclass(frozen=True)
class ProfileDummy:
    """The profile run's dummy: ``spec`` (e.g. ("video", frames, width, height)) built at ``seq_len``,
    ``tokens`` per item, ``items`` in the encoder batch, ``per_item_max`` (the budget's, in tokens)."""
    modality: str
    seq_len: int
    spec: tuple
    tokens: int
    items: int
    per_item_max: int


def max_items_per_batch(rule: str, encoder_budget: int, tokens_per_item: int, max_num_seqs: int,
                        mm_limit: int, max_model_len: int) -> int:
    """Dummy items the profile run encodes at once, by ``rule``: cdiv(budget, tokens) bounded by
    max_num_seqs * limit (to 0.9.2), or floor (``MultiModalBudget``): budget // tokens bounded by
    max_num_seqs * items per prompt; at least 1."""
    if rule == "cdiv":
        return max(1, min(-(-encoder_budget // tokens_per_item), max_num_seqs * mm_limit))
    per_prompt = max(1, min(mm_limit, max_model_len // tokens_per_item))
    return max(1, min(encoder_budget // tokens_per_item, max_num_seqs * per_prompt))


def profile_seq_len(v: StartupVariant, model_config, scheduler_config) -> int:
    """The ``seq_len`` (tokens) row ``v`` builds its profile dummy for: max_num_batched_tokens (to
    0.10.2) or max_model_len (#25553; and ours, whose frames are fitted as the lookup's)."""
    return (scheduler_config.max_num_batched_tokens if v.profile_seq_len == "max_num_batched_tokens"
            else model_config.max_model_len)


def cache_on(v: StartupVariant, model_config, phase: str) -> bool:
    """Whether ``phase``'s passes use a processing cache under row ``v``: never (0.8.5), the
    registry's whenever it has room (0.9.0 to 0.10.0), the runner's when the user has one, not in
    the scheduler's lookup (0.10.2 on)."""
    capacity = model_config.mm_cache_bytes
    user = not model_config.disable_mm_preprocessor_cache and capacity > 0
    return {"off": False, "registry": capacity > 0, "runner": user and phase != "scheduler_init"}[v.profiling_cache]


class MultiModalBudget:
    """Max tokens per item by modality, the encoder compute budget and cache size (encoder tokens),
    max items per batch and the profile run's dummy item, for one model under one start-up row.

    Built by ``GPUModelRunner.__init__`` (its lookup is pass #1, in runner_init) and read by
    ``profile_run`` and, through ``encoder_budget_at``, the ``Scheduler``. ``mm_registry``: the
    engine's (default the process-wide one; unused when ``dry``). ``row``: a start-up row or its
    name (UnknownVariantError). A model without multimodal inputs gets empty figures and budgets 0.
    """

    def __init__(self, model_config, scheduler_config, mm_registry: Optional[MultiModalRegistry] = None,
                 row: str | StartupVariant = "refimpl", *, dry: bool = False,
                 disable_cache: Optional[bool] = None, use_formula: Optional[bool] = None):
        self.model_config, self.scheduler_config = model_config, scheduler_config
        self.row = row = get_startup_variant(row) if isinstance(row, str) else row
        self.dry = dry
        self.mm_registry: MultiModalRegistry = mm_registry or MULTIMODAL_REGISTRY  # not read when dry
        self.max_model_len, self.max_num_reqs = model_config.max_model_len, scheduler_config.max_num_seqs
        # dry: a processing info of the row's switches that reads sizes from the configs only
        self.info = MULTIMODAL_REGISTRY.create_processing_info(model_config, row.mm, dry=True) if dry else None
        supported = self.info is not None or MULTIMODAL_REGISTRY.supports_multimodal_inputs(model_config)
        self.mm_limits: dict[str, int] = {} if not supported else \
            {m: model_config.get_mm_limit(m) for m in self._info().modalities}
        self.mm_max_toks_per_item: dict[str, int] = self.lookup(
            "runner_init", disable_cache=disable_cache, use_formula=use_formula) if supported else {}
        self.encoder_compute_budget, self.encoder_cache_size = compute_mm_encoder_budget(
            scheduler_config, self.mm_max_toks_per_item)
        self.mm_max_items_per_batch: dict[str, int] = {
            m: max_items_per_batch(row.profile_items, self.get_encoder_budget(), n, self.max_num_reqs,
                                   self.mm_limits[m], self.max_model_len)
            for m, n in self.mm_max_toks_per_item.items()}
        self.profile_item: Optional[ProfileDummy] = self._profile_item()

    # ------------------------------------------------------------------ the row's lookups
    def _info(self):
        """The processing info the size functions read: the dry one (the row's switches), else the
        registry's (``model_config.mm_switches``, which EngineCore sets to the row's; its sizes read the
        HF processor, as the release's did)."""
        if self.info is None:
            self.info = self.mm_registry.create_processor(self.model_config, disable_cache=True).info
        return self.info

    @property
    def lookup_counts(self) -> dict[str, int]:
        """One item per enabled modality: what a max-token lookup processes."""
        return {m: 1 for m, n in self.mm_limits.items() if n > 0}

    def uses_formula(self) -> bool:
        return self.row.uses_formula(self.model_config.model)

    def lookup(self, phase: str, *, disable_cache: Optional[bool] = None,
               use_formula: Optional[bool] = None) -> dict[str, int]:
        """Max tokens per item of the enabled modalities as the row's caller in ``phase`` (one of
        LOOKUP_PHASES) finds them: the formula (dry, or under a formula row) or the dummy items
        processed at max_model_len (one HF pass, cached as ``cache_on`` says); ``disable_cache`` /
        ``use_formula`` override the row (None: the row's)."""
        counts = self.lookup_counts
        if not counts:
            return {}
        formula = self.uses_formula() if use_formula is None else use_formula
        if self.dry:
            out = self._info().get_max_tokens_per_item(self.max_model_len, counts)
        else:  # the registry's lookup, as the release's runner and scheduler call it
            off = not cache_on(self.row, self.model_config, phase) if disable_cache is None else disable_cache
            out = self.mm_registry.get_max_tokens_per_item_by_modality(
                self.model_config, disable_cache=off, use_formula=formula)
        return {m: n for m, n in out.items() if counts.get(m, 0) > 0}

    def encoder_budget_at(self, phase: str) -> tuple[int, int]:
        """(encoder_compute_budget, encoder_cache_size) as the caller in ``phase`` reads them: every
        release row's scheduler makes its own lookup (pass #5, ``compute_encoder_budget`` in
        ``Scheduler.__init__``); the figures equal this budget's."""
        return compute_mm_encoder_budget(self.scheduler_config, self.lookup(phase)) if self.mm_limits else (0, 0)

    # ------------------------------------------------------------------ views (vLLM's names)
    def get_encoder_budget(self) -> int:
        """min(encoder_compute_budget, encoder_cache_size): what one encoder batch may take."""
        return min(self.encoder_compute_budget, self.encoder_cache_size)

    def get_modality_with_max_tokens(self) -> Optional[str]:
        """The enabled modality with the largest item (the profile run's); None without one."""
        toks = self.mm_max_toks_per_item
        return max(toks, key=lambda m: toks[m]) if toks else None

    def _profile_item(self) -> Optional[ProfileDummy]:
        modality = self.get_modality_with_max_tokens()
        if modality is None:
            return None
        v, info = self.row, self._info()
        seq_len = profile_seq_len(v, self.model_config, self.scheduler_config)
        spec = self.dummy_specs(seq_len, {modality: 1})[modality][0]
        return ProfileDummy(modality, seq_len, spec, info.get_item_tokens(spec),
                            self.mm_max_items_per_batch[modality], self.mm_max_toks_per_item[modality])

    @property
    def profile_fit_counts(self) -> Optional[dict[str, int]]:
        """The counts the profile dummy's frames are fitted for: the lookup's under per-item-max
        (ours), else None (the dummy's own counts)."""
        return self.lookup_counts if self.row.profile_seq_len == "per-item-max" else None

    def dummy_specs(self, seq_len: int, mm_counts: dict[str, int]) -> dict[str, list[tuple]]:
        """The dummy items' specs (not built) for ``mm_counts`` at ``seq_len``; frames fitted as the
        row fits the profile dummy's."""
        return self._dummy_builder().get_dummy_item_specs(seq_len, mm_counts, self.profile_fit_counts)

    def lookup_specs(self) -> list[tuple]:
        """The dummy items one processing max-token lookup builds (one per enabled modality)."""
        specs = self._dummy_builder().get_dummy_item_specs(self.max_model_len, self.lookup_counts)
        return [s for m in specs for s in specs[m]]

    def _dummy_builder(self):
        return MULTIMODAL_REGISTRY.create_dummy_inputs(self._info())

    def as_dict(self) -> dict[str, object]:
        """The figures (JSON-ready): what a report or a conformance probe compares."""
        p = self.profile_item
        return {"mm_max_toks_per_item": dict(self.mm_max_toks_per_item),
                "encoder_compute_budget": self.encoder_compute_budget, "encoder_cache_size": self.encoder_cache_size,
                "mm_max_items_per_batch": dict(self.mm_max_items_per_batch),
                "profile_item": None if p is None else {"modality": p.modality, "seq_len": p.seq_len,
                                                        "spec": list(p.spec), "tokens": p.tokens, "items": p.items}}
