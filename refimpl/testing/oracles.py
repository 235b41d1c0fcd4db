"""Oracles: what the engine would compute, without an HF-processor pass or the dummy tensors.

The answers come from the mechanism (the engine's StartupPlan, multimodal/worst_case.py, the
dummy builders with shape records, the shape-only builder on meta tensors) on a registry of
their own. ``variant``: a start-up row (default ``refimpl``); ``worst_case``: the image rule
alone (WORST_CASES). The first call builds the processor; later ones take milliseconds.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Optional, Union

import numpy as np
import torch

from refimpl.config import ModelConfig, VllmConfig
from refimpl.core.kv_cache_utils import blocks_for_one_request, cross_attention_sizing
from refimpl.engine.startup_plan import StartupPlan
from refimpl.errors import UnknownVariantError
from refimpl.multimodal import MultiModalRegistry
from refimpl.multimodal import worst_case as worst_case_lib
from refimpl.variants import (
    ENCODER_LEN_SITES,
    ENCODER_LEN_VARIANTS,
    STARTUP_VARIANTS,
    EncoderLenSite,
    EncoderLenSource,
    StartupVariant,
    current_row_name,
    get_encoder_len_variant,
    get_startup_variant,
)

WORST_CASES: tuple[str, ...] = ("square", "factor-pair", "true-max")
ROWS: tuple[str, ...] = tuple(STARTUP_VARIANTS)
# Whisper's encoder-length rows (VllmConfig.encoder_len_variant) and the call sites that read it
ENCODER_LEN_ROWS: tuple[str, ...] = tuple(ENCODER_LEN_VARIANTS)
_REGISTRY = MultiModalRegistry(cache_bytes=0)  # the oracles' own: processors built once, no cache
ModelArg = Union[str, ModelConfig]


@dataclass(frozen=True)
class TensorSpec:
    """Shape and dtype of a tensor or array that was not allocated; ``nbytes`` in bytes."""
    shape: tuple[int, ...]
    dtype: str  # torch / numpy name: "float32", "int64", "uint8"

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * getattr(torch, self.dtype).itemsize

    @classmethod
    def of(cls, t: Any) -> "TensorSpec":
        """The spec of a torch tensor (meta or not) or numpy array."""
        return cls(tuple(int(n) for n in t.shape), str(t.dtype).removeprefix("torch."))


def _model_config(model: ModelArg, model_kw: dict[str, Any]) -> ModelConfig:
    return model if isinstance(model, ModelConfig) else ModelConfig(model, device="cpu", **model_kw)


def _row(variant: str) -> str:
    """``variant``, warning where its name changed meaning in 0.2.0 ("shape-only"); old names
    warn (and resolve) in get_startup_variant."""
    return current_row_name(variant, stacklevel=3) if variant == "shape-only" else variant


def _processor(mc: ModelConfig, variant: str = "refimpl"):
    return _REGISTRY.create_processor(mc, disable_cache=True, switches=get_startup_variant(variant).mm)


def _allowed_counts(mc: ModelConfig, processor) -> dict[str, int]:
    return {m: n for m, n in processor.info.get_allowed_mm_limits().items() if n > 0}


def max_tokens_per_item(model: ModelArg, variant: str = "refimpl", *, worst_case: Optional[str] = None,
                        **model_kw: Any) -> dict[str, int]:
    """Placeholder tokens of the largest item per enabled modality under row ``variant``
    (``worst_case`` overrides its image rule). ``model``: a ModelConfig, or a name and ModelConfig
    keywords. Raises UnknownVariantError for an unknown row or rule."""
    if worst_case is not None and worst_case not in WORST_CASES:
        raise UnknownVariantError("worst_case", WORST_CASES, f"got {worst_case!r}")
    variant = get_startup_variant(_row(variant)).name
    return worst_case_lib.max_tokens_per_item(_model_config(model, model_kw), variant,
                                              worst_case=worst_case, mm_registry=_REGISTRY)  # type: ignore[arg-type]


def encoder_budget(vllm_config: VllmConfig, variant: str = "refimpl") -> tuple[int, int]:
    """(encoder_compute_budget, encoder_cache_size) in tokens, as start-up computes them under
    ``variant`` (the StartupPlan's)."""
    return StartupPlan.build(vllm_config, _row(variant)).encoder_budget


def cross_attention_blocks(vllm_config: VllmConfig, variant: Optional[str] = None) -> int:
    """Cross-attention KV blocks the scheduler allocates to one encoder-decoder request under
    encoder-length row ``variant`` (default: the config's ``encoder_len_variant``); 0 for
    decoder-only. Whisper at block size 16: 94 (1500 tokens) under 0.10.2 to 0.12 and 0.14.0;
    0.13.0 sizes it from the budget, cdiv(max_num_batched_tokens, 16) (``cross_attention_sizing``'s
    ``scheduler_blocks``). ``vllm_config`` is left as it is. Raises UnknownVariantError."""
    if not vllm_config.model_config.is_encoder_decoder:
        return 0
    if variant is not None and variant != vllm_config.encoder_len_variant:
        derived: dict[str, Any] = dict(max_num_encoder_input_tokens=None, encoder_cache_size=None)
        sc = dataclasses.replace(vllm_config.scheduler_config, **derived)  # re-derived for the row
        vllm_config = dataclasses.replace(vllm_config, scheduler_config=sc, encoder_len_variant=variant)
    return cross_attention_sizing(vllm_config).scheduler_blocks


def encoder_len_sources(row: str) -> dict[EncoderLenSite, EncoderLenSource]:
    """Where each call site (ENCODER_LEN_SITES) reads Whisper's encoder length under encoder-length
    row ``row``: "registry" (an uncached registry call), "config" (max_num_encoder_input_tokens)
    or "per-item" (encoder_len_per_item). Raises UnknownVariantError."""
    v = get_encoder_len_variant(row)
    return {site: v.source(site) for site in ENCODER_LEN_SITES}


def _default_counts(mc: ModelConfig, processor, mm_counts: Optional[dict[str, int]]) -> dict[str, int]:
    return dict(mm_counts) if mm_counts is not None else _allowed_counts(mc, processor)


def dummy_input_specs(model: ModelArg, variant: str = "refimpl", *, seq_len: Optional[int] = None,
                      mm_counts: Optional[dict[str, int]] = None, **model_kw: Any) -> dict[str, list[TensorSpec]]:
    """The raw dummy items profiling builds, as specs: image (H, W, 3) uint8, video (T, H, W, 3) in
    the row's dtype, audio (N,) float32 / float64. ``seq_len``: default max_model_len;
    ``mm_counts``: every enabled modality's limit."""
    mc = _model_config(model, model_kw)
    processor = _processor(mc, _row(variant))
    builder = processor.dummy_inputs
    # the builder's allocation points (BaseDummyInputsBuilder's static helpers), as records
    builder._get_dummy_images = lambda w, h, n: [TensorSpec((h, w, 3), "uint8")] * n
    builder._get_dummy_videos = lambda w, h, t, n, dtype=np.uint8: [TensorSpec((t, h, w, 3), np.dtype(dtype).name)] * n
    builder._get_dummy_audios = lambda length, n, dtype=np.float32: [TensorSpec((length,), np.dtype(dtype).name)] * n
    counts = _default_counts(mc, processor, mm_counts)
    data = builder.get_dummy_mm_data(seq_len or mc.max_model_len, counts)
    return {m: list(items) for m, items in data.items() if items}


def dummy_processed_specs(model: ModelArg, variant: str = "refimpl", *, seq_len: Optional[int] = None,
                          mm_counts: Optional[dict[str, int]] = None,
                          **model_kw: Any) -> dict[str, list[dict[str, TensorSpec]]]:
    """The processed dummy items (per item and key) as specs, from the shape-only builder on meta
    tensors; defaults as ``dummy_input_specs``."""
    mc = _model_config(model, model_kw)
    processor = _processor(mc, _row(variant))
    counts = _default_counts(mc, processor, mm_counts)
    out = processor.dummy_inputs.get_dummy_processed_inputs(seq_len or mc.max_model_len, counts, device="meta")
    return {m: [{k: TensorSpec.of(t) for k, t in item.items()} for item in items]
            for m, items in out.mm_kwargs.items()}


# ------------------------------------------------------------------------ start-up passes
def hf_passes_by_phase(vllm_config: VllmConfig, variant: str | StartupVariant = "refimpl") -> dict[str, int]:
    """HF-processor passes per start-up phase of ``EngineCore(vllm_config, variant)`` in a fresh
    process, without building it: its StartupPlan's (an encoder-decoder row's uncached registry
    reads in kv_cache_init included; ``reset_mm_cache`` under a row that resets). ``variant``: a
    row's name, or its record (``STARTUP_VARIANTS[name]``: that row, no old-name warning). Raises
    UnknownVariantError, and CacheItemTooLargeError where that start-up raises it (a release row
    whose processing cache is smaller than one dummy item)."""
    plan = StartupPlan.build(vllm_config, variant if isinstance(variant, StartupVariant) else _row(variant))
    if plan.error is not None:
        raise plan.error
    return plan.hf_passes_by_phase()


# vLLM's start-up order for the processing cache: the runner's budget, the profile run, the
# scheduler's budget, then the reset (PR #17935); processing_cache_by_phase's keys
CACHE_PHASES: tuple[str, ...] = ("runner_init", "profile_run", "scheduler_init", "reset_mm_cache")
CACHE_COUNTERS: tuple[str, ...] = ("hf_calls_with_items", "hf_calls_text_only", "cache_hits", "cache_misses",
                                   "cache_stores", "cache_entries", "cache_entries_by_modality", "cache_bytes")


def processing_cache_by_phase(vllm_config: VllmConfig, variant: str = "refimpl") -> dict[str, dict[str, Any]]:
    """What the processing cache does in each start-up phase of ``EngineCore(vllm_config, variant)``
    in a fresh process, in vLLM's order (CACHE_PHASES), without building it: per phase the HF-processor
    calls with items and without (the cached path's text-only calls), ProcessingCache hits, misses
    and stores (items), and the entries (in all, and ``{modality: n}`` for those held) and bytes it
    holds after the phase (``reset_mm_cache``: what
    the reset leaves; a row without the reset, 0.8.5, keeps what it held). From the StartupPlan's
    steps; entries count the items stored (no eviction: the plan's cache bytes equal the stored
    items' bytes, else ValueError). Raises UnknownVariantError, and CacheItemTooLargeError where that
    start-up raises it. Mirrors the counts of vLLM's ``ProcessingCache`` (vllm/multimodal/processing.py,
    0.9.0 to 0.10.0; the runner's processor cache from 0.10.2)."""
    plan = StartupPlan.build(vllm_config, variant if isinstance(variant, StartupVariant) else _row(variant))
    if plan.error is not None:
        raise plan.error
    out: dict[str, dict[str, Any]] = {}
    entries = stored_bytes = 0
    by_modality: dict[str, int] = {}
    for phase in CACHE_PHASES[:-1]:
        steps = [s for s in plan.steps if s.phase == phase]
        cached = [s for s in steps if s.cache_on]
        entries += sum(len(s.stored) for s in steps)
        for i in (i for s in steps for i in s.stored):
            by_modality[i.modality] = by_modality.get(i.modality, 0) + 1
        stored_bytes += sum(i.processed_bytes for s in steps for i in s.stored)
        held = plan.cache_bytes_after(phase)
        if held != stored_bytes:
            raise ValueError(f"{phase}: the plan's cache holds {held} bytes, its stored items {stored_bytes} "
                             "(an eviction: entries unknown)")
        out[phase] = {"hf_calls_with_items": sum(bool(s.hf_items) for s in steps),
                      "hf_calls_text_only": sum(s.text_only_calls for s in steps),
                      "cache_hits": sum(sum(s.hits) for s in cached),
                      "cache_misses": sum(len(s.hits) - sum(s.hits) for s in cached),
                      "cache_stores": sum(len(s.stored) for s in steps),
                      "cache_entries": entries, "cache_entries_by_modality": dict(sorted(by_modality.items())),
                      "cache_bytes": held}
    reset = plan.variant.reset_at_end
    out[CACHE_PHASES[-1]] = {**dict.fromkeys(CACHE_COUNTERS, 0), "cache_entries": 0 if reset else entries,
                             "cache_entries_by_modality": {} if reset else dict(sorted(by_modality.items())),
                             "cache_bytes": plan.cache_bytes_after_reset}
    return out


__all__ = ["ROWS", "CACHE_PHASES", "CACHE_COUNTERS", "processing_cache_by_phase", "ENCODER_LEN_ROWS", "ENCODER_LEN_SITES", "encoder_len_sources", "WORST_CASES", "TensorSpec", "blocks_for_one_request", "cross_attention_blocks",
           "dummy_input_specs", "dummy_processed_specs", "encoder_budget", "hf_passes_by_phase",
           "max_tokens_per_item"]
