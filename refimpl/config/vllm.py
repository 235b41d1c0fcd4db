"""VllmConfig: all configs of one engine, validated and derived together.

Mirrors ``VllmConfig`` of ``vllm/config/__init__.py`` (v0.10.2; ``vllm/config/vllm.py`` from
v0.11.1), in particular ``__post_init__``, which for encoder-decoder models sets
``scheduler_config.max_num_encoder_input_tokens`` from
``MULTIMODAL_REGISTRY.get_encdec_max_encoder_len(model_config)`` (the value PRs #24866 and
#24989 read instead of calling the registry at run time; 0.13.0 no longer sets it, PR
#29421), and ``get_encoder_len(site)``: where each call site reads the Whisper encoder length
under an encoder-length row.

``mm_registry`` is refimpl's, not vLLM's (vLLM has one process-global ``MULTIMODAL_REGISTRY``):
the registry every component of this engine uses (None: the global one), so a test can run
an engine on a private registry and leave the global one untouched. It does not travel when
the config is pickled to the engine-core process (that process uses its own global).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from refimpl.config.cache import CacheConfig
from refimpl.config.model import ModelConfig
from refimpl.config.scheduler import SchedulerConfig
from refimpl.errors import ConfigError, EncoderLengthMismatchError
from refimpl.variants import ENCODER_LEN_SITES, EncoderLenSite, EncoderLenSource, get_encoder_len_variant


@dataclass
class VllmConfig:
    """All configs of one engine. ``__post_init__`` validates and derives, as vLLM's does.

    ``encoder_len_variant`` picks where each call site reads the Whisper encoder length
    (a record of ``refimpl.variants.ENCODER_LEN_VARIANTS``). For encoder-decoder models the
    per-audio encoder length comes from the registry (vLLM's
    ``get_encdec_max_encoder_len``: processor builds and a feature-extractor pass) only under a
    row whose call sites read the registry (``0.10.2`` and its one-PR rows: what those rows
    measure); the others take the same value from the model config (Whisper:
    ``max_source_positions`` when audio is enabled), without any HF pass. Raises ConfigError /
    UnknownVariantError.
    """
    model_config: ModelConfig
    scheduler_config: SchedulerConfig = field(default_factory=SchedulerConfig)
    cache_config: CacheConfig = field(default_factory=CacheConfig)
    encoder_len_variant: str = "0.11.0"
    mm_registry: Any = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        get_encoder_len_variant(self.encoder_len_variant)
        mc, sc = self.model_config, self.scheduler_config
        sc.max_model_len = mc.max_model_len
        sc.is_encoder_decoder = mc.is_encoder_decoder
        if mc.is_encoder_decoder:
            # vLLM 0.10.2: chunked prefill is off for encoder-decoder models, so a whole
            # prompt must fit in one step (issue #17797 is about this arithmetic).
            if sc.max_num_batched_tokens < mc.max_model_len:
                raise ConfigError("max_num_batched_tokens", f">= max_model_len={mc.max_model_len}",
                                  f"got {sc.max_num_batched_tokens}")
            if any(self.encoder_len_source(s) == "registry" for s in ENCODER_LEN_SITES):
                per_item = self.get_mm_registry().get_encdec_max_encoder_len(mc)  # computed once
            else:  # the registry's answer (Whisper's formula), read from the config
                per_item = mc.max_encoder_len if mc.get_mm_limit("audio") > 0 else 0
            if sc.encoder_len_per_item is None:
                sc.encoder_len_per_item = per_item
            if sc.encoder_len_per_item != mc.max_encoder_len:
                raise EncoderLengthMismatchError(
                    "scheduler_config.encoder_len_per_item", mc.max_encoder_len,
                    f"{sc.encoder_len_per_item} != the encoder's positions (max_source_positions)")
            budget = get_encoder_len_variant(self.encoder_len_variant).encoder_budget
            if budget == "audios-per-step":  # ours: N encoder lengths
                sc.max_num_encoder_input_tokens = sc.max_audios_per_step * per_item
                sc.encoder_cache_size = max(sc.encoder_cache_size or 0, sc.max_num_encoder_input_tokens)
            elif sc.max_audios_per_step != 1:
                raise ConfigError("max_audios_per_step", "1 unless encoder_len_variant='audios-per-step'",
                                  f"got {sc.max_audios_per_step} under {self.encoder_len_variant!r}")
            elif budget == "encoder-len":  # 0.10.2 to 0.12; 0.13.0 keeps max_num_batched_tokens
                sc.max_num_encoder_input_tokens = per_item

    @property
    def device(self) -> str:
        return self.model_config.device

    def get_mm_registry(self):
        """``mm_registry``, or the process-global ``MULTIMODAL_REGISTRY`` (looked up now)."""
        if self.mm_registry is not None:
            return self.mm_registry
        import refimpl.multimodal
        return refimpl.multimodal.MULTIMODAL_REGISTRY

    def use_mm_registry(self, mm_registry=None):
        """Make ``mm_registry`` (when given) this engine's registry; returns the one in use.
        Every component given a registry calls this, so all of them and every encoder-length
        read use the same one."""
        if mm_registry is not None:
            self.mm_registry = mm_registry
        return self.get_mm_registry()

    def __getstate__(self):
        return {**self.__dict__, "mm_registry": None}  # a registry stays in its process

    def encoder_len_source(self, site: EncoderLenSite) -> EncoderLenSource:
        """'registry' or 'config' for ``site`` under ``encoder_len_variant``."""
        return get_encoder_len_variant(self.encoder_len_variant).source(site)

    def get_encoder_len(self, site: EncoderLenSite) -> int:
        """Encoder length (tokens) as call site ``site`` reads it under ``encoder_len_variant``.

        'registry': ``get_mm_registry().get_encdec_max_encoder_len`` (uncached, builds the
        processor and runs the feature extractor: vLLM 0.10.2); 'config':
        ``scheduler_config.max_num_encoder_input_tokens`` (PRs #24866 / #24989; the batching
        budget from 0.13.0); 'per-item': ``scheduler_config.encoder_len_per_item`` (one audio's
        length, computed once).
        """
        source = self.encoder_len_source(site)
        if source == "registry":
            return self.get_mm_registry().get_encdec_max_encoder_len(self.model_config)
        sc = self.scheduler_config
        n = sc.encoder_len_per_item if source == "per-item" else sc.max_num_encoder_input_tokens
        assert n is not None, "set by __post_init__ for encoder-decoder models"
        return n
