"""Exception types of refimpl.

Every error a user can cause (bad config, bad input, a request the engine cannot hold) is a
subclass of :class:`RefimplError` that names the offending ``field`` and the ``limit`` it broke,
so a serving loop can reject one request and keep serving the others. vLLM raises plain
``ValueError`` in most of these places; we keep ``ValueError`` as a base class so code written
against vLLM's behaviour still catches ours.
"""
from __future__ import annotations

from typing import Any, Optional


class RefimplError(Exception):
    """Base class. ``field`` names the input or setting at fault, ``limit`` the bound it broke.
    ``request_id``: the request refused, when the engine refuses one of several in flight (the
    two-process engine's asynchronous refusals; the user's id, set by ``LLMEngine.step``)."""

    request_id: Optional[str] = None

    def __init__(self, field: str, limit: Any, message: str):
        self.field = field
        self.limit = limit
        self.message = message
        super().__init__(f"{field}: {message} (limit: {limit})")

    def __reduce__(self):  # picklable, so the engine-core process can send it to the front end
        return type(self), (self.field, self.limit, self.message)


class ConfigError(RefimplError, ValueError):
    """A setting in ModelConfig / SchedulerConfig / CacheConfig / VllmConfig is invalid."""


class UnknownModelError(ConfigError):
    """The model name is not one of the models whose configs ship in ``refimpl/data``."""


class UnknownVariantError(ConfigError):
    """A benchmark or engine variant flag has a value we do not implement."""


class CacheItemTooLargeError(ConfigError):
    """One processed multimodal item is larger than the whole processing cache (vLLM 0.9.0's
    cachetools ``ValueError("value too large")``, issue #52835; later vLLM skips the item)."""


class InsufficientMemoryError(RefimplError, MemoryError):
    """A run would need more memory than the machine has available (checked before it starts)."""


class InvalidInputError(RefimplError, ValueError):
    """A multimodal item or prompt is malformed (corrupt image, wrong audio rank, NaN, ...)."""


class TooManyItemsError(InvalidInputError):
    """A prompt carries more items of one modality than ``limit_mm_per_prompt`` allows."""


class SamplingParamsError(InvalidInputError):
    """SamplingParams out of range (e.g. ``max_tokens`` beyond ``max_target_positions``)."""


class EncoderLengthMismatchError(ConfigError):
    """Cross-attention allocation length differs from the model's encoder length.

    The guard for the review warning on vLLM PR #24989: ``max_num_encoder_input_tokens`` is an
    alias of ``max_num_batched_tokens`` unless the encoder-decoder override ran.
    """


class EngineStateError(RefimplError, RuntimeError):
    """An operation is not allowed in the engine's current state (e.g. reset with requests in flight)."""


class EngineDeadError(RefimplError, RuntimeError):
    """The engine-core process (P1) exited or failed; the front end freed its resources.

    vLLM V1 raises ``EngineDeadError`` in the same place (``vllm/v1/engine/exceptions.py``).
    """
