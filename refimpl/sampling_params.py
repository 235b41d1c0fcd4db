"""SamplingParams: the per-request generation limits the scheduler needs.

Mirrors ``vllm/sampling_params.py`` (v0.10.2) for the fields that steer scheduling:
``max_tokens`` (default 16, as vLLM), ``ignore_eos``, ``stop_token_ids``; ``temperature``
0.0 means greedy. Left out: top-p/k, penalties, logprobs, n > 1, beam search, stop
strings, structured output. The bound ``max_tokens <= max_model_len - prompt length``
(448 = ``max_target_positions`` for Whisper) depends on the model and the prompt, so it is
checked by :func:`check_max_tokens`, called from ``Scheduler.add_request``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from refimpl.errors import SamplingParamsError


@dataclass
class SamplingParams:
    """Generation limits of one request.

    max_tokens: output tokens to generate at most (>= 1).
    temperature: 0.0 = greedy; > 0 samples (the runner decides how).
    ignore_eos: keep generating past the model's EOS token.
    seed: per-request sampling seed (None = engine's generator).
    stop_token_ids: further token ids that finish the request with reason "stop".
    Raises SamplingParamsError naming the field.
    """
    max_tokens: int = 16
    temperature: float = 0.0
    ignore_eos: bool = False
    seed: Optional[int] = None
    stop_token_ids: list[int] = field(default_factory=list)

    def __post_init__(self):
        if isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int):
            raise SamplingParamsError("max_tokens", ">= 1", f"must be an int, got {self.max_tokens!r}")
        if self.max_tokens < 1:
            raise SamplingParamsError("max_tokens", ">= 1", f"got {self.max_tokens}")
        if not isinstance(self.temperature, (int, float)) or not self.temperature >= 0.0:
            raise SamplingParamsError("temperature", ">= 0.0", f"got {self.temperature!r}")
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int)):
            raise SamplingParamsError("seed", "an int or None", f"got {self.seed!r}")
        self.stop_token_ids = list(self.stop_token_ids or [])
        for t in self.stop_token_ids:
            if isinstance(t, bool) or not isinstance(t, int) or t < 0:
                raise SamplingParamsError("stop_token_ids", "ints >= 0", f"got {t!r}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


def check_max_tokens(params: SamplingParams, num_prompt_tokens: int, max_model_len: int) -> None:
    """Refuse a request whose prompt plus ``max_tokens`` exceeds ``max_model_len`` (tokens).

    For Whisper ``max_model_len`` is ``max_target_positions`` = 448 and the prompt is the
    decoder prompt. Raises SamplingParamsError("max_tokens", max_model_len - num_prompt_tokens).
    """
    room = max_model_len - num_prompt_tokens
    if params.max_tokens > room:
        raise SamplingParamsError(
            "max_tokens", room,
            f"prompt ({num_prompt_tokens} tokens) + max_tokens ({params.max_tokens}) exceeds "
            f"max_model_len={max_model_len}")
