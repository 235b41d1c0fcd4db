"""SchedulerConfig: the V1 scheduler's token and sequence budgets. Mirrors
``vllm/config/scheduler.py`` (0.10.2). Left out: chunked / partial prefill switches, policy,
delay factor, async scheduling, the long-prefill threshold.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional

from refimpl.errors import ConfigError

StopCheckOrder = Literal["stop-first", "caps-first"]
STOP_CHECK_ORDERS: tuple[StopCheckOrder, ...] = ("stop-first", "caps-first")


@dataclass
class SchedulerConfig:
    """Token and sequence budgets of the V1 scheduler. ``max_num_encoder_input_tokens`` and
    ``encoder_cache_size`` default to ``max_num_batched_tokens``; VllmConfig may override the former
    per encoder-length row. ``encoder_len_per_item`` (tokens, Whisper 1500): one audio's length in a
    field of its own, set once by VllmConfig (or given, then checked). ``stop_check``: the order of
``check_stop`` ("stop-first", vLLM >= 0.11.1; "caps-first", 0.8.5 to 0.11.0; EngineCore sets its
start-up row's). Raises ConfigError."""
    max_num_batched_tokens: int = 8192
    max_num_seqs: int = 256
    max_model_len: int = 8192
    # None: max_num_batched_tokens, set in __post_init__ (vLLM: field(init=False))
    max_num_encoder_input_tokens: int = None  # type: ignore[assignment]
    encoder_cache_size: int = None  # type: ignore[assignment]
    is_encoder_decoder: bool = False
    max_audios_per_step: int = 1
    encoder_len_per_item: Optional[int] = None
    stop_check: StopCheckOrder = "stop-first"

    def __post_init__(self):
        for name in ("max_num_batched_tokens", "max_num_seqs", "max_model_len", "max_audios_per_step"):
            if getattr(self, name) <= 0:
                raise ConfigError(name, "> 0", f"got {getattr(self, name)}")
        if self.stop_check not in STOP_CHECK_ORDERS:
            raise ConfigError("stop_check", STOP_CHECK_ORDERS, f"got {self.stop_check!r}")
        if self.max_num_encoder_input_tokens is None:
            self.max_num_encoder_input_tokens = self.max_num_batched_tokens
        if self.encoder_cache_size is None:
            self.encoder_cache_size = self.max_num_batched_tokens
