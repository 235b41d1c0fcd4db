"""The multimodal registry: one per process, owning the processing cache and the counters.

Mirrors ``MultiModalRegistry`` of ``vllm/multimodal/registry.py``. ``get_encdec_max_encoder_len``
is as slow as 0.10.2's: nothing cached, three processor creations and one uncached Whisper
pass (480,000 float64 samples, hashed through 0.9.2's join) per call. Left out:
``register_processor`` decorators (a static table), per-request kwargs. ``MultiModalBudget``:
refimpl/multimodal/encoder_budget.py.
"""
from __future__ import annotations

import importlib
import time
from dataclasses import dataclass, field, fields
from typing import Any, Optional

from refimpl.errors import ConfigError
from refimpl.multimodal.cache import ProcessingCache
from refimpl.multimodal.profiling import DummyDecoderData, DummyEncoderData, MultiModalProfiler
from refimpl.variants import MultiModalSwitches

DEFAULT_CACHE_BYTES = 4 << 30  # VLLM_MM_INPUT_CACHE_GIB = 4
# get_encdec_max_encoder_len's mechanics in vLLM 0.10.2, whatever row the engine runs: np.zeros'
# float64 clip, hashed on the uncached path through the 0.9.2 hasher (two full copies).
ENCDEC_SWITCHES = MultiModalSwitches(dummy_audio_dtype="float64", hash_byte_path="v0.9.2",
                                     hash_uncached=True)


@dataclass
class ProcessingStats:
    """Counters the benchmarks read (calls; seconds ``*_s``): hf_processor_calls, hf_mm_passes (with
    items), hf_processor_s, hf_text_only_s, split_s, dummy_s, hash_s, hash_calls (content hashes of
    items), cache_hits / cache_misses
    (per item), cache_bytes (held now), encdec_calls / encdec_s (``get_encdec_max_encoder_len``)."""
    hf_processor_calls: int = 0
    hf_mm_passes: int = 0
    hf_processor_s: float = 0.0
    hf_text_only_s: float = 0.0
    split_s: float = 0.0
    dummy_s: float = 0.0
    hash_s: float = 0.0
    hash_calls: int = 0
    cache_hits: int = 0
    cache_misses: int = 0
    encdec_calls: int = 0
    encdec_s: float = 0.0
    _cache: Optional[ProcessingCache] = field(default=None, repr=False, compare=False)
    # objects with add(with_items: bool), told of every HF pass (refimpl.testing.count_hf_passes)
    _watchers: list[Any] = field(default_factory=list, repr=False, compare=False)

    def count_hf_pass(self, with_items: bool) -> None:
        """One HF-processor pass (``with_items`` False: text only or no items)."""
        self.hf_processor_calls += 1
        self.hf_mm_passes += with_items
        for w in self._watchers:
            w.add(with_items)

    @property
    def cache_bytes(self) -> int:
        return self._cache.bytes if self._cache is not None else 0

    def reset(self) -> None:
        for f in fields(self):
            if not f.name.startswith("_"):
                setattr(self, f.name, f.default)

    def as_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in fields(self) if not f.name.startswith("_")}
        return d | {"cache_bytes": self.cache_bytes}


def _factories(model: str):
    """(ProcessingInfo, DummyInputsBuilder, MultiModalProcessor) classes of ``model`` or None."""
    # cycle: the model modules import worst_case, which imports MULTIMODAL_REGISTRY from here
    if model.startswith("qwen2.5-vl"):
        from refimpl.multimodal import qwen2_5_vl as q
        return q.Qwen2_5_VLProcessingInfo, q.Qwen2_5_VLDummyInputsBuilder, q.Qwen2_5_VLMultiModalProcessor
    if model.startswith("whisper"):
        from refimpl.multimodal import whisper as w
        return w.WhisperProcessingInfo, w.WhisperDummyInputsBuilder, w.WhisperMultiModalProcessor
    return None


_LIGHT = {"qwen2.5-vl": ("qwen2_5_vl_info", "Qwen2_5_VL"), "whisper": ("whisper_info", "Whisper")}


def _light(model: str, what: str):
    """``what`` ("ProcessingInfo" or "DummyInputsBuilder") of ``model`` from its *_info module (no
    transformers import: the dry plan's), or None."""
    for prefix, (module, name) in _LIGHT.items():
        if model.startswith(prefix):
            return getattr(importlib.import_module(f"refimpl.multimodal.{module}"), name + what)
    return None


class MultiModalRegistry:
    """Creates processors and answers max-token / dummy-data questions per ModelConfig."""

    def __init__(self, cache_bytes: int = DEFAULT_CACHE_BYTES):
        self._processing_cache = ProcessingCache(cache_bytes)
        self.stats = ProcessingStats(_cache=self._processing_cache)

    @property
    def processing_cache(self) -> ProcessingCache:
        return self._processing_cache

    def reset_stats(self) -> None:
        self.stats.reset()

    def cache_bytes(self) -> int:
        """Bytes the process-wide ProcessingCache holds now."""
        return self._processing_cache.bytes

    def supports_multimodal_inputs(self, model_config) -> bool:
        return _factories(model_config.model) is not None

    def create_processor(self, model_config, *, disable_cache: Optional[bool] = None,
                         switches: Optional[MultiModalSwitches] = None):
        """A new processor around the model's cached HF processor, following ``switches`` (default
        ``model_config.mm_switches``), on the process-wide cache unless ``disable_cache`` or a 0 GiB
        cache. ``disable_cache=None`` reads ``model_config.disable_mm_preprocessor_cache``.
        Raises ConfigError for a model without multimodal inputs."""
        if disable_cache is None:
            disable_cache = model_config.disable_mm_preprocessor_cache
        f = _factories(model_config.model)
        if f is None:
            raise ConfigError("model", "a multimodal model", f"{model_config.model} has no multimodal processor")
        info_cls, dummy_cls, proc_cls = f
        cache = None
        if not disable_cache and model_config.mm_processor_cache_gb > 0:
            cache = self._processing_cache
            if cache.capacity_bytes != model_config.mm_cache_bytes:
                cache.set_capacity(model_config.mm_cache_bytes)
        info = info_cls(model_config, switches)
        return proc_cls(info, dummy_cls(info), cache=cache, stats=self.stats)

    def create_processing_info(self, model_config, switches: Optional[MultiModalSwitches] = None, *,
                               dry: bool = False):
        """The model's ProcessingInfo alone (no processor, no cache); ``dry``: its size functions read
        the configs (preprocessor_config.json and ``mm_processor_kwargs``) instead of building the HF
        processor. Raises ConfigError for a model without multimodal inputs."""
        info_cls = _light(model_config.model, "ProcessingInfo") if dry else (_factories(model_config.model) or [None])[0]
        if info_cls is None:
            raise ConfigError("model", "a multimodal model", f"{model_config.model} has no multimodal processor")
        info = info_cls(model_config, switches)
        info.dry = dry
        return info

    def create_dummy_inputs(self, info):
        """The dummy-inputs builder of ``info``'s model (builds nothing until asked)."""
        if getattr(info, "dry", False) and _light(info.model_id, "DummyInputsBuilder"):  # sizes only
            return _light(info.model_id, "DummyInputsBuilder")(info)
        f = _factories(info.model_id)
        if f is None:
            raise ConfigError("model", "a multimodal model", f"{info.model_id} has no multimodal processor")
        return f[1](info)

    def get_mm_limits_per_prompt(self, model_config) -> dict[str, int]:
        """Items allowed per prompt for each supported modality (default 1); {} if none."""
        if not self.supports_multimodal_inputs(model_config):
            return {}
        return self.create_processor(model_config, disable_cache=True).info.get_allowed_mm_limits()

    def get_max_tokens_per_item_by_modality(self, model_config, *, disable_cache: bool = False,
                                            use_formula: bool = False,
                                            switches: Optional[MultiModalSwitches] = None) -> dict[str, int]:
        """Max placeholder tokens of one item per enabled modality: the dummy data processed at
        ``max_model_len``, or the model's formula with ``use_formula`` (no HF pass)."""
        if not self.supports_multimodal_inputs(model_config):
            return {}
        mm_limits = self.get_mm_limits_per_prompt(model_config)
        mm_counts = {m: 1 for m, n in mm_limits.items() if n > 0}
        seq_len = model_config.max_model_len
        processor = self.create_processor(model_config, disable_cache=disable_cache, switches=switches)
        if use_formula:
            return processor.info.get_max_tokens_per_item(seq_len, mm_counts)
        return MultiModalProfiler(processor).get_mm_max_tokens(seq_len, mm_counts)

    def get_max_tokens_per_item_by_nonzero_modality(self, model_config, *, disable_cache: bool = False,
                                                    use_formula: bool = False,
                                                    switches: Optional[MultiModalSwitches] = None) -> dict[str, int]:
        """As above, keeping only modalities whose limit per prompt is > 0."""
        mm_limits = self.get_mm_limits_per_prompt(model_config)
        per_item = self.get_max_tokens_per_item_by_modality(model_config, disable_cache=disable_cache,
                                                            use_formula=use_formula, switches=switches)
        return {m: n for m, n in per_item.items() if mm_limits.get(m, 0) > 0}

    def get_decoder_dummy_data(self, model_config, seq_len: int, mm_counts: Optional[dict[str, int]] = None,
                               *, disable_cache: bool = False,
                               fit_counts: Optional[dict[str, int]] = None) -> DummyDecoderData:
        """Dummy decoder request of ``seq_len`` tokens with ``mm_counts`` largest items, sized
        as for ``fit_counts`` items (default ``mm_counts``)."""
        processor = self.create_processor(model_config, disable_cache=disable_cache)
        return MultiModalProfiler(processor).get_decoder_dummy_data(seq_len, mm_counts, fit_counts)

    def get_encoder_dummy_data(self, model_config, seq_len: int, mm_counts: Optional[dict[str, int]] = None,
                               *, disable_cache: bool = False) -> DummyEncoderData:
        processor = self.create_processor(model_config, disable_cache=disable_cache)
        return MultiModalProfiler(processor).get_encoder_dummy_data(seq_len, mm_counts)

    def get_encdec_max_encoder_len(self, model_config) -> int:
        """Encoder length of an encoder-decoder model (Whisper: 1500 tokens); 0 otherwise. Uncached
        and slow on purpose (see the module doc), whatever the engine's row; counts
        ``stats.encdec_calls`` and ``stats.encdec_s``."""
        t0 = time.perf_counter()
        try:
            if not model_config.is_encoder_decoder:
                return 0
            max_tokens = self.get_max_tokens_per_item_by_nonzero_modality(
                model_config, disable_cache=True, switches=ENCDEC_SWITCHES)
            if not max_tokens:
                return 0
            assert len(max_tokens) == 1, "encoder-decoder models take one modality"
            return next(iter(max_tokens.values()))
        finally:
            self.stats.encdec_calls += 1
            self.stats.encdec_s += time.perf_counter() - t0

    def reset_processor_cache(self) -> None:
        """Empty the process-wide ProcessingCache (``reset_mm_cache`` calls this)."""
        self._processing_cache.reset()


MULTIMODAL_REGISTRY = MultiModalRegistry()
