"""SchedulerConfig: the V1 scheduler's token and sequence budgets.

Mirrors ``vllm/config/scheduler.py`` (v0.10.2). Left out: chunked-prefill and partial-prefill
switches, policy, delay factor, async scheduling, the long-prefill threshold.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from refimpl.errors import ConfigError


@dataclass
class SchedulerConfig:
    """Token and sequence budgets of the V1 scheduler (tokens, sequences).

    ``max_num_encoder_input_tokens`` and ``encoder_cache_size`` default to
    ``max_num_batched_tokens`` as in vLLM; for encoder-decoder models VllmConfig overrides
    the former with the encoder length (vLLM 0.10.2 to 0.12; not from 0.13.0, PR #29421), or
    with ``max_audios_per_step`` encoder lengths under the ``audios-per-step`` what-if (ours).
    ``encoder_len_per_item`` (tokens, Whisper 1500):
    one audio's encoder length, its own field, set once by VllmConfig (or given, then checked
    against the model's ``max_source_positions``); never an alias of a batching budget.
    Raises ConfigError.
    """
    max_num_batched_tokens: int = 8192
    max_num_seqs: int = 256
    max_model_len: int = 8192
    # None: max_num_batched_tokens, set in __post_init__ (vLLM: field(init=False))
    max_num_encoder_input_tokens: int = None  # type: ignore[assignment]
    encoder_cache_size: int = None  # type: ignore[assignment]
    is_encoder_decoder: bool = False
    max_audios_per_step: int = 1
    encoder_len_per_item: Optional[int] = None

    def __post_init__(self):
        for name in ("max_num_batched_tokens", "max_num_seqs", "max_model_len", "max_audios_per_step"):
            if getattr(self, name) <= 0:
                raise ConfigError(name, "> 0", f"got {getattr(self, name)}")
        if self.max_num_encoder_input_tokens is None:
            self.max_num_encoder_input_tokens = self.max_num_batched_tokens
        if self.encoder_cache_size is None:
            self.encoder_cache_size = self.max_num_batched_tokens
