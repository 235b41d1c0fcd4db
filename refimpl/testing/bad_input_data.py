"""The malformed inputs as data: a Case per input, a BadInput per entry point, what "refused" means.

A BadInput names an entry point (a method of refimpl.testing.bad_input_kit.Kit) and its arguments,
so a user can feed the arguments to their own validator; one constructor per entry point below
builds it. A Case is one malformed input and what the kit must do with it. Nothing here builds a
processor or a scheduler; refimpl.testing.bad_input_kit (the Kit, ``run_case``) re-exports every name.
"""
from __future__ import annotations

import io
from dataclasses import dataclass
from dataclasses import field as dc_field
from typing import TYPE_CHECKING, Any, Callable, Optional, Union

from PIL import Image

from refimpl.errors import RefimplError

if TYPE_CHECKING:
    from refimpl.testing.bad_input_kit import Kit

SR = 16000
QWEN_MAX_PIXELS = 28 * 28 * 64
QWEN_MAX_MODEL_LEN = 4096
WHISPER_PROMPT = (50258, 50259, 50359, 50363)  # <|startoftranscript|><|en|><|transcribe|><|notimestamps|>
# the entry points the cases name (Case.entry), and the image placeholder of their prompts
IMG = "Qwen2.5-VL processor.apply"
AUD = "Whisper processor.apply"
P1 = "<|image_pad|>"
KV = "GPUModelRunner.determine_num_blocks"

REFUSALS: tuple[type[BaseException], ...] = (RefimplError, ValueError)


def is_refusal(exc: BaseException) -> bool:
    """True for what counts as refusing a bad input: a ValueError (subclasses included, as
    vLLM raises) or a refimpl error."""
    return isinstance(exc, REFUSALS)


@dataclass(frozen=True)
class BadInput:
    """One input as data: ``entry`` names the entry point (a ``Kit`` method of that name) and
    ``kwargs`` its arguments, so a user can feed ``kwargs`` to their own validator. Calling it
    on a Kit runs refimpl's entry point."""
    entry: str
    kwargs: dict[str, Any]

    def __call__(self, kit: "Kit") -> Any:
        return getattr(kit, self.entry)(**self.kwargs)


def qwen_apply(prompt, mm_data) -> BadInput:
    """The Qwen2.5-VL processor's ``apply(prompt, mm_data)`` (limits image 2, video 1)."""
    return BadInput("qwen_apply", dict(prompt=prompt, mm_data=mm_data))


def whisper_apply(audio) -> BadInput:
    """The Whisper processor's ``apply("<|startoftranscript|>", {"audio": audio})``."""
    return BadInput("whisper_apply", dict(audio=audio))


def whisper_request(decoder_prompt_len: int = 4, max_tokens: int = 8, audio=None) -> BadInput:
    """Whisper processor output + a decoder prompt, queued on a Scheduler (then removed)."""
    return BadInput("whisper_request", dict(decoder_prompt_len=decoder_prompt_len, max_tokens=max_tokens,
                                            audio=audio))


def whisper_admit(prompt=WHISPER_PROMPT, features=None, sampling_params=None, set_after_check=None,
                  **sp_kw) -> BadInput:
    """A Whisper request queued on a Scheduler (then removed): decoder ``prompt``, encoder
    ``features`` (default: the processor's), SamplingParams(**sp_kw) with ``set_after_check``
    (attribute -> value) set after construction, or ``sampling_params`` (any object) instead."""
    return BadInput("whisper_admit", dict(prompt=prompt, features=features, sampling_params=sampling_params,
                                          set_after_check=set_after_check, **sp_kw))


def qwen_request(prompt) -> BadInput:
    """Qwen processor output queued on a Scheduler (max_model_len 4096), then removed."""
    return BadInput("qwen_request", dict(prompt=prompt))


def small_kv_request(num_blocks: int, prompt_len: int) -> BadInput:
    """A Qwen request of ``prompt_len`` tokens on a Scheduler of ``num_blocks`` KV blocks."""
    return BadInput("small_kv_request", dict(num_blocks=num_blocks, prompt_len=prompt_len))


def kv_sizing(**cache_kw) -> BadInput:
    """Start-up KV sizing (``GPUModelRunner.determine_num_blocks``) of whisper-tiny under
    ``CacheConfig(**cache_kw)``; no model is loaded (the sizes come from the config)."""
    return BadInput("kv_sizing", dict(cache_kw))


def model_settings(model: str = "qwen2.5-vl-3b", **kw) -> BadInput:
    """``ModelConfig(model, **kw)`` through the oracle ``max_tokens_per_item`` (the rules every
    entry point runs: refimpl/config/checks.py)."""
    return BadInput("model_settings", dict(model=model, **kw))


def processing_cache(capacity_bytes) -> BadInput:
    """``ProcessingCache(capacity_bytes)``."""
    return BadInput("processing_cache", dict(capacity_bytes=capacity_bytes))


def request_batch(num_requests) -> BadInput:
    """``refimpl.testing.create_requests(num_requests)``."""
    return BadInput("request_batch", dict(num_requests=num_requests))


def qwen_apply_kw(prompt, mm_data, kwargs) -> BadInput:
    """The Qwen2.5-VL processor's ``apply(prompt, mm_data, kwargs)``: a call's own processor kwargs."""
    return BadInput("qwen_apply_kw", dict(prompt=prompt, mm_data=mm_data, kwargs=kwargs))


def request_dict(prompt) -> BadInput:
    """``LLMEngine.add_request``'s request check (``refimpl.engine.prompt.parse_prompt``), run first."""
    return BadInput("request_dict", dict(prompt=prompt))


def uncached_hashes(**model_kw) -> BadInput:
    """Whisper's processor given one audio as LLMEngine gives it (``request_uuids``): hash calls."""
    return BadInput("uncached_hashes", dict(model_kw))


def stop_at_cap(outputs, max_tokens: int, stop_check: str = "stop-first") -> BadInput:
    """A Whisper request sampling ``outputs`` on the Scheduler (FakeModelRunner): its finish reason."""
    return BadInput("stop_at_cap", dict(outputs=list(outputs), max_tokens=max_tokens, stop_check=stop_check))


def sampling(**kw) -> BadInput:
    """``SamplingParams(**kw)``."""
    return BadInput("sampling", dict(kw))


def png_bytes(size=(40, 30), mode="RGB") -> bytes:
    buf = io.BytesIO()
    Image.new(mode, size, 7).save(buf, format="PNG")
    return buf.getvalue()


@dataclass(frozen=True)
class Case:
    """One malformed input: ``run`` (a BadInput, or any callable taking a Kit), ``raises`` (the
    refimpl exception expected, with ``field`` and ``limit``) or None (accepted: ``behaviour``,
    ``check(result)``)."""
    id: str
    group: str
    what: str
    entry: str
    run: Union[BadInput, Callable[["Kit"], Any]] = dc_field(repr=False)
    raises: Optional[type] = None
    field: Optional[str] = None
    limit: Any = None
    behaviour: str = ""
    check: Optional[Callable[[Any], bool]] = dc_field(default=None, repr=False)

    @property
    def input(self) -> BadInput:
        """The input as data (entry point name and arguments)."""
        assert isinstance(self.run, BadInput), f"{self.id}: its input is code, not a BadInput"
        return self.run

    @property
    def refused(self) -> bool:
        """Whether the input must be refused (is_refusal of what the entry point raises)."""
        return self.raises is not None

    def mismatches(self, exc: Optional[BaseException]) -> list[str]:
        """How ``exc`` (a validator's, None: accepted) departs from the case ([]: agrees): refused or
        not, and ``field`` / ``limit`` when it names them."""
        if not self.refused:
            return [] if exc is None else [f"{self.id}: expected acceptance, got {exc!r}"]
        if exc is None or not is_refusal(exc):
            return [f"{self.id}: expected a refusal naming {self.field!r}, got {exc!r}"]
        out = []
        for name in ("field", "limit"):
            if hasattr(exc, name) and getattr(exc, name) != getattr(self, name):
                out.append(f"{self.id}: {name} {getattr(exc, name)!r} != expected {getattr(self, name)!r}")
        return out
