"""SamplingParams: the per-request limits the scheduler and the sampler need.

Mirrors ``vllm/sampling_params.py`` (0.10.2) for max_tokens (default 16), ignore_eos,
stop_token_ids, temperature (0: greedy), seed (-1: unset); the bounds that depend on the model
and prompt are checked at admission. Left out: top-p/k, penalties, logprobs, n > 1, beam
search, stop strings, structured output.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Optional

from refimpl.errors import SamplingParamsError

# torch.Generator.manual_seed takes [-2**63, 2**64); upstream bounds seeds to int64
# (vLLM PR #57018, sglang PR #28960), which every consumer of a seed can hold.
SEED_MIN, SEED_MAX = -(2**63), 2**63 - 1
SEED_LIMIT = "int64: [-2**63, 2**63 - 1]"


@dataclass
class SamplingParams:
    """Generation limits of one request: ``max_tokens`` (>= 1), ``temperature`` (0.0 greedy, finite),
    ``ignore_eos``, ``seed`` (int64; None or -1: the engine's generator), ``stop_token_ids``.
    Raises SamplingParamsError naming the field and its limit."""
    max_tokens: int = 16
    temperature: float = 0.0
    ignore_eos: bool = False
    seed: Optional[int] = None
    stop_token_ids: list[int] = field(default_factory=list)

    def __post_init__(self):
        if self.seed == -1 and not isinstance(self.seed, bool):
            self.seed = None
        try:
            self.stop_token_ids = list(self.stop_token_ids or [])
        except TypeError:
            raise SamplingParamsError("stop_token_ids", "ints >= 0", f"got {self.stop_token_ids!r}") from None
        self._verify_args()

    def _verify_args(self) -> None:
        """Every field against what the scheduler and the sampler take (vLLM's name)."""
        if isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int):
            raise SamplingParamsError("max_tokens", ">= 1", f"must be an int, got {self.max_tokens!r}")
        if self.max_tokens < 1:
            raise SamplingParamsError("max_tokens", ">= 1", f"got {self.max_tokens}")
        t = self.temperature
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not t >= 0.0:
            raise SamplingParamsError("temperature", ">= 0.0", f"got {t!r}")
        if not _finite(t):  # logits / inf: NaN for any -inf logit
            raise SamplingParamsError("temperature", "finite", f"got {t!r}")
        if self.seed is not None:
            if isinstance(self.seed, bool) or not isinstance(self.seed, int):
                raise SamplingParamsError("seed", "an int or None", f"got {self.seed!r}")
            if not SEED_MIN <= self.seed <= SEED_MAX:
                raise SamplingParamsError("seed", SEED_LIMIT, f"got {self.seed}")
        if not isinstance(self.stop_token_ids, list):
            raise SamplingParamsError("stop_token_ids", "ints >= 0", f"got {self.stop_token_ids!r}")
        for tok in self.stop_token_ids:
            if isinstance(tok, bool) or not isinstance(tok, int) or tok < 0:
                raise SamplingParamsError("stop_token_ids", "ints >= 0", f"got {tok!r}")

    def verify(self, vocab_size: Optional[int] = None) -> None:
        """Admission check: the fields again and ``stop_token_ids`` below ``vocab_size``. Raises
        SamplingParamsError."""
        self._verify_args()
        if vocab_size is not None and self.stop_token_ids and max(self.stop_token_ids) >= vocab_size:
            raise SamplingParamsError("stop_token_ids", vocab_size - 1,
                                      f"token id {max(self.stop_token_ids)} is out of the vocabulary "
                                      f"({vocab_size} tokens)")

    def clone(self) -> "SamplingParams":
        """A checked copy: later changes to this object do not reach a queued request."""
        return dataclasses.replace(self)  # __post_init__ copies stop_token_ids and checks

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


def _finite(x: float) -> bool:
    try:
        return math.isfinite(x)
    except OverflowError:  # an int beyond the float range
        return False


def check_max_tokens(params: SamplingParams, num_prompt_tokens: int, max_model_len: int) -> None:
    """Refuse a prompt plus ``max_tokens`` above ``max_model_len`` (Whisper: 448, decoder prompt).
    Raises SamplingParamsError("max_tokens", max_model_len - num_prompt_tokens)."""
    room = max_model_len - num_prompt_tokens
    if params.max_tokens > room:
        raise SamplingParamsError(
            "max_tokens", room,
            f"prompt ({num_prompt_tokens} tokens) + max_tokens ({params.max_tokens}) exceeds "
            f"max_model_len={max_model_len}")
