"""Exception types of refimpl: every error a user can cause names its ``field`` and ``limit``, so
a server can refuse one request and keep serving. vLLM raises plain ValueError in most of these
places; ours subclass it where it did.
"""
from __future__ import annotations

from typing import Any, Optional


class RefimplError(Exception):
    """Base class: ``field`` the input or setting at fault, ``limit`` the bound it broke;
    ``request_id`` the request refused when several are in flight."""

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
    """One processed item is larger than the whole processing cache (cachetools' "value too large")."""


class InsufficientMemoryError(RefimplError, MemoryError):
    """A run would need more memory than the machine has available (checked before it starts)."""


class InvalidInputError(RefimplError, ValueError):
    """A multimodal item or prompt is malformed (corrupt image, wrong audio rank, NaN, ...)."""


class TooManyItemsError(InvalidInputError):
    """A prompt carries more items of one modality than ``limit_mm_per_prompt`` allows."""


class SamplingParamsError(InvalidInputError):
    """SamplingParams out of range (e.g. ``max_tokens`` beyond ``max_target_positions``)."""


class EncoderLengthMismatchError(ConfigError):
    """The cross-attention length differs from the model's encoder length."""


class EngineStateError(RefimplError, RuntimeError):
    """An operation is not allowed in the engine's current state (e.g. reset with requests in flight)."""


class EngineDeadError(RefimplError, RuntimeError):
    """The engine-core process (P1) exited or failed; the front end freed its resources (vLLM
    ``vllm/v1/engine/exceptions.py``)."""
