"""Oracles: what the engine would compute, answered without an HF-processor pass and
without allocating the dummy tensors.

Each function builds its own throwaway processor pieces (no registry cache, nothing global
touched) from refimpl's mechanism: the models' ``get_max_tokens_per_item`` formulas (vLLM PR
#19756), the dummy-input builders with their allocation points replaced by shape records,
the shape-only builder on meta tensors, ``compute_encoder_budget``, the cross-attention
block count, and a replay of the start-up's cache lookups on a ReferenceLRU.

Selectable semantics: ``semantics`` of the max-token answers and ``release`` of the pass
counts name what a vLLM release computed. Today only refimpl's own answers are wired:
``semantics="true-max"`` (the true worst case, e.g. 768 image tokens at max_pixels = 768 *
28 * 28) and ``release=None`` (the variant's switches in refimpl/variants.py); any other
value raises UnknownVariantError naming the choices. The first call in a process pays for
importing transformers' Qwen2-VL image processing (torchvision) and building the
tokenizer; later calls take milliseconds.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Optional, Union

import torch

from refimpl.config import ModelConfig, VllmConfig
from refimpl.core.encoder_cache_manager import compute_encoder_budget
from refimpl.core.kv_cache_utils import blocks_for_one_request
from refimpl.errors import CacheItemTooLargeError, UnknownVariantError
from refimpl.multimodal import MultiModalRegistry
from refimpl.testing.reference_lru import ReferenceLRU
from refimpl.variants import ENCODER_LEN_SITES, get_startup_variant

SEMANTICS: tuple[str, ...] = ("true-max",)  # + one per vLLM release once the per-release rules land
RELEASES: tuple[Optional[str], ...] = (None,)  # None: the variant's own switches
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


def _processor(mc: ModelConfig):
    return MultiModalRegistry(cache_bytes=0).create_processor(mc, disable_cache=True)


def _check(name: str, value: Any, choices: tuple) -> None:
    if value not in choices:
        raise UnknownVariantError(name, choices, f"{value!r} is not wired yet (see refimpl/testing/oracles.py)")


def _allowed_counts(mc: ModelConfig, processor) -> dict[str, int]:
    return {m: n for m, n in processor.info.get_allowed_mm_limits().items() if n > 0}


def max_tokens_per_item(model: ModelArg, *, semantics: str = "true-max",
                        **model_kw: Any) -> dict[str, int]:
    """Placeholder tokens of the largest item of each enabled modality at ``seq_len =
    max_model_len`` (tokens), as ``get_max_tokens_per_item_by_modality`` answers.

    ``model``: a ModelConfig, or a model name and ModelConfig keywords (``max_model_len``,
    ``limit_mm_per_prompt``, ``mm_processor_kwargs``). ``semantics``: one of ``SEMANTICS``.
    Qwen2.5-VL-3B at 128000: {"image": 16384, "video": 98304}; Whisper: {"audio": 1500}.
    """
    _check("semantics", semantics, SEMANTICS)
    mc = _model_config(model, model_kw)
    processor = _processor(mc)
    counts = {m: 1 for m in _allowed_counts(mc, processor)}
    return dict(processor.info.get_max_tokens_per_item(mc.max_model_len, counts)) if counts else {}


class _FormulaRegistry:
    """What compute_encoder_budget asks a registry, answered by ``max_tokens_per_item``."""

    def __init__(self, semantics: str):
        self.semantics = semantics

    def supports_multimodal_inputs(self, model_config) -> bool:
        return MultiModalRegistry(cache_bytes=0).supports_multimodal_inputs(model_config)

    def get_max_tokens_per_item_by_nonzero_modality(self, model_config, **kw) -> dict[str, int]:
        return max_tokens_per_item(model_config, semantics=self.semantics)


def encoder_budget(vllm_config: VllmConfig, *, semantics: str = "true-max") -> tuple[int, int]:
    """(encoder_compute_budget, encoder_cache_size) in encoder tokens, as
    ``compute_encoder_budget`` gives them at start-up, with the max tokens per item of
    ``semantics``. Qwen2.5-VL-3B at 128000 with SchedulerConfig's defaults: (98304, 98304);
    Whisper once VllmConfig set the encoder length: (1500, 8192)."""
    _check("semantics", semantics, SEMANTICS)
    return compute_encoder_budget(vllm_config.model_config, vllm_config.scheduler_config,
                                  _FormulaRegistry(semantics))


def cross_attention_blocks(vllm_config: VllmConfig) -> int:
    """KV blocks of cross-attention one encoder-decoder request holds: cdiv(encoder length
    per item, block_size) (Whisper, 1500 positions, block 16: 94); 0 for decoder-only."""
    mc, sc = vllm_config.model_config, vllm_config.scheduler_config
    if not mc.is_encoder_decoder:
        return 0
    return -(-(sc.encoder_len_per_item or mc.max_encoder_len) // vllm_config.cache_config.block_size)


def _default_counts(mc: ModelConfig, processor, mm_counts: Optional[dict[str, int]]) -> dict[str, int]:
    return dict(mm_counts) if mm_counts is not None else _allowed_counts(mc, processor)


def dummy_input_specs(model: ModelArg, *, seq_len: Optional[int] = None,
                      mm_counts: Optional[dict[str, int]] = None, **model_kw: Any) -> dict[str, list[TensorSpec]]:
    """The raw dummy items start-up profiling builds, as specs (nothing allocated):
    image (H, W, 3) uint8 (an RGB PIL image), video (T, H, W, 3) of the variant's dummy dtype
    (``model_config.mm_switches.dummy_video_dtype``: int64 in vLLM <= 0.11.0), audio (N,)
    float32. ``seq_len`` defaults to max_model_len, ``mm_counts`` to every enabled modality's
    limit. Qwen2.5-VL-3B at 128000, video only, int64: (12, 3584, 3584, 3), 3.7 GB."""
    mc = _model_config(model, model_kw)
    processor = _processor(mc)
    builder = processor.dummy_inputs
    # the builder's allocation points (BaseDummyInputsBuilder's static helpers), as records
    builder._get_dummy_images = lambda w, h, n: [TensorSpec((h, w, 3), "uint8")] * n
    builder._get_dummy_videos = lambda w, h, t, n, dtype: [TensorSpec((t, h, w, 3), str(dtype))] * n
    builder._get_dummy_audios = lambda length, n: [TensorSpec((length,), "float32")] * n
    counts = _default_counts(mc, processor, mm_counts)
    data = builder.get_dummy_mm_data(seq_len or mc.max_model_len, counts)
    return {m: list(items) for m, items in data.items() if items}


def dummy_processed_specs(model: ModelArg, *, seq_len: Optional[int] = None,
                          mm_counts: Optional[dict[str, int]] = None,
                          **model_kw: Any) -> dict[str, list[dict[str, TensorSpec]]]:
    """The processed dummy items (what the HF processor returns for them, per item and key)
    as specs, from the shape-only builder on meta tensors: no HF pass, nothing allocated.
    Defaults as ``dummy_input_specs``. Qwen2.5-VL-3B, one default image: pixel_values
    (65536, 1176) float32 (308 MB) and image_grid_thw (3,) int64."""
    mc = _model_config(model, model_kw)
    processor = _processor(mc)
    counts = _default_counts(mc, processor, mm_counts)
    out = processor.dummy_inputs.get_dummy_processed_inputs(seq_len or mc.max_model_len, counts, device="meta")
    return {m: [{k: TensorSpec.of(t) for k, t in item.items()} for item in items]
            for m, items in out.mm_kwargs.items()}


# ------------------------------------------------------------------------ start-up passes
def _items(mc: ModelConfig, seq_len: int, counts: dict[str, int]) -> list[tuple[str, int]]:
    """(cache key, processed bytes) of each dummy item processed for (seq_len, counts): the
    key stands for the content hash (equal raw dummy items hash equal)."""
    raw = dummy_input_specs(mc, seq_len=seq_len, mm_counts=counts)
    processed = dummy_processed_specs(mc, seq_len=seq_len, mm_counts=counts)
    return [(f"{m}:{spec.shape}:{spec.dtype}", sum(t.nbytes for t in processed[m][i].values()))
            for m, specs in raw.items() for i, spec in enumerate(specs)]


def hf_passes_by_phase(vllm_config: VllmConfig, variant: str = "cache-reset", *,
                       release: Optional[str] = None) -> dict[str, int]:
    """HF-processor passes with multimodal items per start-up phase of
    ``EngineCore(vllm_config, variant)`` (``StartupReport.passes_by_phase``), without
    building it: the pass table of docs/background.md replayed from the variant's switches,
    the dummy items' specs and a ReferenceLRU of the processing cache.

    Passes: #1 runner_init and #5 scheduler_init (``compute_encoder_budget``) and #2
    profile_run (max-token lookup) process one item per enabled modality at max_model_len,
    unless by formula; #3 profile_run processes one item of the largest modality at
    max_num_batched_tokens, unless shape-only; with the cache on, a pass runs only when an
    item misses. Encoder-decoder models add one uncached pass per start-up site (``kv_cache``,
    ``runner``) that reads the registry under ``encoder_len_variant``. ``release``: one of
    ``RELEASES``. Raises UnknownVariantError, and CacheItemTooLargeError where start-up does
    (an item larger than the cache under ``oversize_item="raise"``).
    """
    _check("release", release, RELEASES)
    sw = get_startup_variant(variant)
    mc = dataclasses.replace(vllm_config.model_config, mm_switches=sw.mm_switches)
    sc = vllm_config.scheduler_config
    cache = ReferenceLRU(mc.mm_cache_bytes)
    use_cache = sw.cache_during_profiling and mc.mm_processor_cache_gb > 0

    def lookup(items: list[tuple[str, int]]) -> int:
        if not use_cache:
            return int(bool(items))
        missing = [(k, n) for k, n in items if not cache.get(k)]
        for k, n in missing:
            if not cache.put(k, n) and sw.oversize_item == "raise":
                raise CacheItemTooLargeError("mm_processor_cache_gb", cache.capacity_bytes / (1 << 30),
                                             f"value too large: one processed item of {n} bytes")
        return int(bool(missing))

    allowed = max_tokens_per_item(mc)
    lookup_items = [] if sw.max_tokens_by_formula or sw.shape_only else \
        _items(mc, mc.max_model_len, {m: 1 for m in allowed})
    passes = dict.fromkeys(("runner_init", "load_model", "profile_run", "kv_cache_init", "capture_model",
                            "scheduler_init"), 0)
    passes["runner_init"] = lookup(lookup_items)
    passes["profile_run"] = lookup(lookup_items)
    if allowed and not sw.shape_only:
        modality = max(allowed, key=lambda m: allowed[m])
        passes["profile_run"] += lookup(_items(mc, sc.max_num_batched_tokens, {modality: 1}))
    if mc.is_encoder_decoder and not sw.shape_only:
        passes["kv_cache_init"] = sum(vllm_config.encoder_len_source(s) == "registry"
                                      for s in ENCODER_LEN_SITES if s in ("kv_cache", "runner"))
    passes["scheduler_init"] = lookup(lookup_items)
    if sw.reset_at_end:
        passes["reset_mm_cache"] = 0
    return passes


__all__ = ["RELEASES", "SEMANTICS", "TensorSpec", "blocks_for_one_request", "cross_attention_blocks",
           "dummy_input_specs", "dummy_processed_specs", "encoder_budget", "hf_passes_by_phase",
           "max_tokens_per_item"]
