"""VllmConfig: all configs of one engine, validated and derived together.

Mirrors ``VllmConfig`` of ``vllm/config/vllm.py``: ``__post_init__`` derives the encoder budget
per encoder-length row; ``get_encoder_len(site)`` reads the Whisper encoder length as each call
site does. ``mm_registry`` (ours): this engine's registry, not sent to the engine-core process.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import refimpl.multimodal
from refimpl.config.cache import CacheConfig
from refimpl.config.model import ModelConfig
from refimpl.config.scheduler import SchedulerConfig
from refimpl.errors import ConfigError, EncoderLengthMismatchError
from refimpl.variants import ENCODER_LEN_SITES, EncoderLenSite, EncoderLenSource, get_encoder_len_variant


@dataclass
class VllmConfig:
    """All configs of one engine. ``encoder_len_variant``: a row of ENCODER_LEN_VARIANTS. The
    per-audio encoder length comes from the registry only under a row whose sites read it, else
    from the model config (no HF pass). Raises ConfigError / UnknownVariantError."""
    model_config: ModelConfig
    scheduler_config: SchedulerConfig = field(default_factory=SchedulerConfig)
    cache_config: CacheConfig = field(default_factory=CacheConfig)
    encoder_len_variant: str = "0.11.0"
    mm_registry: Any = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        self.encoder_len_variant = get_encoder_len_variant(self.encoder_len_variant).name  # an old name: its row
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
        return refimpl.multimodal.MULTIMODAL_REGISTRY

    def use_mm_registry(self, mm_registry=None):
        """Make ``mm_registry`` (when given) this engine's registry; the one in use."""
        if mm_registry is not None:
            self.mm_registry = mm_registry
        return self.get_mm_registry()

    def __getstate__(self):
        return {**self.__dict__, "mm_registry": None}  # a registry stays in its process

    def encoder_len_source(self, site: EncoderLenSite) -> EncoderLenSource:
        """Where ``site`` reads the encoder length under ``encoder_len_variant``."""
        return get_encoder_len_variant(self.encoder_len_variant).source(site)

    def get_encoder_len(self, site: EncoderLenSite) -> int:
        """Encoder length (tokens) as call site ``site`` reads it: 'registry' the uncached registry
        call; 'config' ``scheduler_config.max_num_encoder_input_tokens``; 'per-item'
        ``scheduler_config.encoder_len_per_item``."""
        source = self.encoder_len_source(site)
        if source == "registry":
            return self.get_mm_registry().get_encdec_max_encoder_len(self.model_config)
        sc = self.scheduler_config
        n = sc.encoder_len_per_item if source == "per-item" else sc.max_num_encoder_input_tokens
        assert n is not None, "set by __post_init__ for encoder-decoder models"
        return n
