"""The worst case per start-up row without processing: max tokens per item, the profile
dummy, and the HF-processor passes per phase (the pass table as data).

No HF pass, no dummy array: the size functions the dummy builders use (tests/core/test_release_rows.py
checks them against real start-ups). Mirrors ``vllm/multimodal/profiling.py``,
``v1/worker/utils.py`` (``MultiModalBudget``) and the start-up of ``v1/worker/gpu_model_runner.py``.
Left out: tensor-parallel workers (each repeats the runner's steps).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Literal, Optional

from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize

from refimpl.core.encoder_cache_manager import compute_mm_encoder_budget
from refimpl.multimodal.cache import value_too_large
from refimpl.multimodal.registry import MULTIMODAL_REGISTRY
from refimpl.variants import StartupVariant, WorstCaseImage, get_startup_variant

PHASES = ("runner_init", "profile_run", "scheduler_init")


@dataclass(frozen=True)
class StartupStep:
    """One step of the pass table: its ``EngineCore`` phase, vLLM's caller, and ``kind``: ``lookup``
    (max tokens per item, one item per enabled modality at max_model_len) or ``dummy`` (the profile
    run's item). ``when``: the StartupVariant flag it needs (None: every row)."""
    phase: str
    pass_no: str
    caller: str
    kind: Literal["lookup", "dummy"]
    when: Optional[str] = None


STARTUP_STEPS = (
    StartupStep("runner_init", "#1", "GPUModelRunner.__init__: compute_encoder_budget "
                "(MultiModalBudget from 0.10.1)", "lookup"),
    StartupStep("profile_run", "#2", "profile_run: the lookup again, to pick the largest "
                "modality (until 0.10.0)", "lookup", when="profile_run_lookup"),
    StartupStep("profile_run", "#3", "profile_run: get_decoder_dummy_data, replicated up to "
                "the encoder budget and encoded", "dummy"),
    StartupStep("scheduler_init", "#5", "Scheduler.__init__: compute_encoder_budget", "lookup"),
)


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


def _row(variant: str | StartupVariant, worst_case: Optional[WorstCaseImage] = None) -> StartupVariant:
    v = get_startup_variant(variant) if isinstance(variant, str) else variant
    return v if worst_case is None else replace(v, mm=replace(v.mm, worst_case_image=worst_case))


def _processor(model_config, v: StartupVariant, mm_registry=None):
    return (mm_registry or MULTIMODAL_REGISTRY).create_processor(model_config, disable_cache=True,
                                                                 switches=v.mm)


def _lookup_counts(info) -> dict[str, int]:
    return {m: 1 for m, n in info.get_allowed_mm_limits().items() if n > 0}


def max_tokens_per_item(model_config, variant: str | StartupVariant = "refimpl", *,
                        worst_case: Optional[WorstCaseImage] = None, mm_registry=None) -> dict[str, int]:
    """Max placeholder tokens of one item per enabled modality under ``variant`` (``worst_case``
    overrides its image rule): what the encoder budget and admission use; {} without multimodal inputs."""
    info = _processor(model_config, _row(variant, worst_case), mm_registry).info
    return dict(info.get_max_tokens_per_item(model_config.max_model_len, _lookup_counts(info)))


def max_items_per_batch(rule: str, encoder_budget: int, tokens_per_item: int, max_num_seqs: int,
                        mm_limit: int, max_model_len: int) -> int:
    """Dummy items the profile run encodes at once, by ``rule``: cdiv(budget, tokens) bounded by
    max_num_seqs * limit, or floor (``MultiModalBudget``): budget // tokens, at least 1."""
    if rule == "cdiv":
        return max(1, min(-(-encoder_budget // tokens_per_item), max_num_seqs * mm_limit))
    per_prompt = max(1, min(mm_limit, max_model_len // tokens_per_item))
    return max(1, min(encoder_budget // tokens_per_item, max_num_seqs * per_prompt))


def profile_seq_len(v: StartupVariant, model_config, scheduler_config) -> int:
    """The ``seq_len`` the row builds its profile dummy for."""
    return (scheduler_config.max_num_batched_tokens if v.profile_seq_len == "max_num_batched_tokens"
            else model_config.max_model_len)


def profile_dummy(model_config, scheduler_config, variant: str | StartupVariant = "refimpl", *,
                  worst_case: Optional[WorstCaseImage] = None, mm_registry=None) -> Optional[ProfileDummy]:
    """The dummy item ``variant``'s profile run encodes (None: no enabled modality), built at the
    row's ``profile_seq_len``; per-item-max fits its frames as the budget lookup did."""
    v = _row(variant, worst_case)
    proc = _processor(model_config, v, mm_registry)
    info, counts = proc.info, _lookup_counts(proc.info)
    per_item = dict(info.get_max_tokens_per_item(model_config.max_model_len, counts))
    if not per_item:
        return None
    modality = max(per_item, key=lambda m: per_item[m])
    seq_len = profile_seq_len(v, model_config, scheduler_config)
    fit = counts if v.profile_seq_len == "per-item-max" else None
    spec = proc.dummy_inputs.get_dummy_item_specs(seq_len, {modality: 1}, fit)[modality][0]
    tokens = info.get_item_tokens(spec)
    budget = min(compute_mm_encoder_budget(scheduler_config, per_item))
    items = max_items_per_batch(v.profile_items, budget, per_item[modality], scheduler_config.max_num_seqs,
                                model_config.get_mm_limit(modality), model_config.max_model_len)
    return ProfileDummy(modality, seq_len, spec, tokens, items, per_item[modality])


def lookup_specs(model_config, variant: str | StartupVariant = "refimpl", mm_registry=None) -> list[tuple]:
    """The dummy items one max-token lookup builds when it processes (one per enabled modality)."""
    proc = _processor(model_config, _row(variant), mm_registry)
    counts = _lookup_counts(proc.info)
    specs = proc.dummy_inputs.get_dummy_item_specs(model_config.max_model_len, counts)
    return [s for m in specs for s in specs[m]]


def hf_passes_by_phase(model_config, scheduler_config, variant: str | StartupVariant = "refimpl",
                       *, mm_registry=None) -> dict[str, int]:
    """HF-processor passes with multimodal items per start-up phase (``PHASES``), from
    ``STARTUP_STEPS``: a lookup costs none under the row's formula, the dummy none under shape-only,
    and a step none when the profiling cache it uses (registry: one for every phase; runner:
    runner_init and profile_run, absent when the user disabled it) holds every item it needs
    (an item larger than the cache is not stored, or under ``oversize_item="raise"`` raises
    CacheItemTooLargeError as that start-up step does)."""
    v = _row(variant)
    proc = _processor(model_config, v, mm_registry)
    dummy = profile_dummy(model_config, scheduler_config, v, mm_registry=mm_registry)
    out = dict.fromkeys(PHASES, 0)
    if dummy is None:
        return out
    lookup = lookup_specs(model_config, v, mm_registry)
    user_cache = not model_config.disable_mm_preprocessor_cache and model_config.mm_processor_cache_gb > 0
    capacity = model_config.mm_cache_bytes
    cached: set[tuple] = set()
    for step in STARTUP_STEPS:
        if step.when and not getattr(v, step.when):
            continue
        if step.kind == "lookup" and v.uses_formula(model_config.model):
            continue
        if step.kind == "dummy" and v.mm.shape_only:
            continue
        items = lookup if step.kind == "lookup" else [dummy.spec]
        on = {"off": False, "registry": capacity > 0,
              "runner": user_cache and step.phase != "scheduler_init"}[v.profiling_cache]
        if on and set(items) <= cached:
            continue
        if on:
            sizes = {s: proc.info.get_processed_item_bytes(s) for s in items if s not in cached}
            too_large = [n for n in sizes.values() if n > capacity]
            if too_large and v.mm.oversize_item == "raise":  # start-up aborts here (issue #52835)
                raise value_too_large(too_large[0], capacity)
            cached |= {s for s, n in sizes.items() if n <= capacity}
        out[step.phase] += 1
    return out


@lru_cache(maxsize=64)
def worst_case_image_size(min_pixels: int, max_pixels: int, factor: int = 28,
                          max_ratio: int = 200, rule: str = "true-max") -> tuple[int, int]:
    """(width, height) in pixels of the input image (or frame) whose ``smart_resize`` (sides rounded
    to ``factor``, area into [min_pixels, max_pixels], ratio <= ``max_ratio``) has the most cells
    (placeholder tokens) under ``rule``: ``square`` smart_resize of 9999999 x 9999999;
    ``factor-pair`` ``factor`` x the closest factor pair of the largest cell count within
    max_ratio; ``true-max`` the best of that pair unresized, the flattest image scaled down (its
    long side's floor can exceed max_pixels) and every image thinner than factor / 2 (scaled up,
    sides rounded up). Cached (~20,000 smart_resize calls the first time). Raises ValueError for
    another rule."""
    if rule == "square":
        h, w = smart_resize(9999999, 9999999, factor=factor, min_pixels=min_pixels, max_pixels=max_pixels)
        return w, h
    if rule == "factor-pair":
        for n in range(max_pixels // factor ** 2, 0, -1):
            a = next(d for d in range(math.isqrt(n), 0, -1) if n % d == 0)
            if n // a <= max_ratio * a:
                return factor * (n // a), factor * a
        return factor, factor
    if rule != "true-max":
        raise ValueError(f"unknown worst-case rule {rule!r}")

    def cells(wh: tuple[int, int]) -> int:
        h, w = smart_resize(wh[1], wh[0], factor=factor, min_pixels=min_pixels, max_pixels=max_pixels)
        return (h // factor) * (w // factor)

    cands: list[tuple[int, int]] = []
    for n in range(max_pixels // factor ** 2, 0, -1):
        a = next(d for d in range(math.isqrt(n), 0, -1) if n % d == 0)
        b, near = n // a, factor // 2 - 1  # sides that still round to b and a cells
        # the ratio limit applies to the input, not the grid: a short side of 28a + 13 and
        # a long side of 28b - 13 pixels round to the same grid (1 x 211 cells from 41 x 5895)
        wh = (factor * b, factor * a) if b <= max_ratio * a else (factor * b - near, factor * a + near)
        if max(wh) <= max_ratio * min(wh) and cells(wh) == n:
            cands.append(wh)
            break
    s = 1
    while round(s / factor) * round(max_ratio * s / factor) * factor ** 2 <= max_pixels:
        s *= 2
    cands.append((max_ratio * s, s))
    cands += [(w, h) for h in range(1, factor // 2 + 1) for w in range(h, max_ratio * h + 1)]
    return max(cands, key=cells)  # the first (not resized) wins ties
