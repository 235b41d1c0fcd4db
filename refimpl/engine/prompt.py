"""The request dict of ``LLMEngine.add_request`` / ``generate``: checked once, before anything in
it is read (issue 46, kind 1).

Mirrors vLLM's prompt forms (``vllm/inputs/data.py``, 0.10.2) as a Whisper request takes them:

- implicit (``TextPrompt`` / ``TokensPrompt``): ``{"prompt": str}`` or ``{"prompt_token_ids": [int]}``
  with ``"multi_modal_data": {"audio": ...}``; the text or ids are the decoder prompt (vLLM's
  ``_build_enc_dec_llm_inputs``: "for Whisper models, the text prompt should go to the decoder");
- explicit (``ExplicitEncoderDecoderPrompt``): ``{"encoder_prompt": TextPrompt | TokensPrompt,
  "decoder_prompt": str | [int] | TextPrompt | TokensPrompt | None}``, the audio in the encoder
  prompt; a decoder prompt not starting with ``decoder_start_token_id`` gets it prepended
  (``_prepare_decoder_input_ids_for_generation``); the encoder prompt's text is the model's own
  (Whisper: ``[0]``), checked for its type and not read;
- refimpl's own: ``"multi_modal_data"`` with ``"decoder_prompt"`` (str or [int]) at the top.

``mm_processor_kwargs`` (top level or in the encoder prompt) go to the processor as the call's own.
A list of ints is token ids; any other non-string where a prompt goes, an unknown key, a vLLM key
the kit does not serve (``multi_modal_uuids``, ``cache_salt``, ...) and two prompts for the decoder
are refused with an InvalidInputError naming the key. No decoder prompt, or the explicit form's
``decoder_prompt: None``: the model's default (refimpl: ``<|startoftranscript|><|en|><|transcribe|>
<|notimestamps|>``; vLLM 0.10.2 takes the encoder prompt's text there); refimpl's own top-level
``decoder_prompt`` must be a prompt (None refused).
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any, Optional

from refimpl.errors import InvalidInputError

PROMPT_KEYS = ("prompt", "prompt_token_ids", "multi_modal_data", "mm_processor_kwargs")
SINGLETON_KEYS = (*PROMPT_KEYS, "decoder_prompt")
EXPLICIT_KEYS = ("encoder_prompt", "decoder_prompt", "mm_processor_kwargs")
# vLLM's own keys the kit does not serve: refused by name rather than ignored.
NOT_SERVED = ("multi_modal_uuids", "cache_salt", "prompt_embeds", "lora_request", "priority")
FORMS = "a dict: TextPrompt, TokensPrompt or ExplicitEncoderDecoderPrompt"


@dataclass(frozen=True)
class ParsedPrompt:
    """What a request dict asks for: ``decoder`` text or token ids (None: the model's default),
    ``field`` the key it came from, ``mm_data`` ``{modality: item | [items]}``,
    ``mm_processor_kwargs`` the call's own (None: none), ``prepend_start`` (the explicit form)."""
    decoder: str | list[int] | None
    field: str
    mm_data: dict[str, Any]
    mm_processor_kwargs: Optional[dict[str, Any]]
    prepend_start: bool = False


def _keys(d: dict, allowed: tuple[str, ...], where: str) -> None:
    for k in d:
        if k not in allowed:
            why = "a vLLM key the kit does not serve" if k in NOT_SERVED else "unknown key"
            raise InvalidInputError(f"{where}.{k}" if isinstance(k, str) else where, allowed, f"{why} {k!r}")


def _text_or_ids(v: Any, field: str, text: bool = True) -> str | list[int]:
    """A str (if ``text``) or a list / tuple of ints >= 0 (token ids)."""
    if text and isinstance(v, str):
        return v
    if isinstance(v, (list, tuple)) and all(isinstance(t, numbers.Integral) and not isinstance(t, bool) for t in v):
        ids = [int(t) for t in v]
        if any(t < 0 for t in ids):
            raise InvalidInputError(field, "token ids >= 0", f"got {min(ids)}")
        return ids
    limit = "a str or a list of token ids (ints)" if text else "a list of token ids (ints)"
    raise InvalidInputError(field, limit, f"got {type(v).__name__}: {v!r}"[:120])


def _singleton(d: dict, where: str, keys: tuple[str, ...]) -> tuple[str | list[int] | None, str]:
    """The text or ids of a TextPrompt / TokensPrompt (``prompt_token_ids`` win over ``prompt``)."""
    _keys(d, keys, where)
    if "prompt_token_ids" in d:
        if "prompt" in d and not isinstance(d["prompt"], str):  # TokensPrompt's optional text
            raise InvalidInputError(f"{where}.prompt", "a str", f"got {type(d['prompt']).__name__}")
        return _text_or_ids(d["prompt_token_ids"], f"{where}.prompt_token_ids", text=False), f"{where}.prompt_token_ids"
    if "prompt" in d:
        return _text_or_ids(d["prompt"], f"{where}.prompt"), f"{where}.prompt"
    return None, where


def _mm_kwargs(v: Any, field: str) -> Optional[dict[str, Any]]:
    if v is None or isinstance(v, dict):
        return v
    raise InvalidInputError(field, "a dict {setting: value}", f"got {type(v).__name__}")


def parse_prompt(prompt: Any) -> ParsedPrompt:
    """Check a request dict in every key before anything is read (see the module doc). Raises
    InvalidInputError naming the key (``prompt``, ``prompt.<key>``, ``prompt.encoder_prompt.<key>``)."""
    if not isinstance(prompt, dict):
        raise InvalidInputError("prompt", FORMS, f"got {type(prompt).__name__}")
    if "encoder_prompt" in prompt:
        _keys(prompt, EXPLICIT_KEYS, "prompt")
        enc = prompt["encoder_prompt"]
        if isinstance(enc, str):
            enc = {"prompt": enc}
        if not isinstance(enc, dict):
            raise InvalidInputError("prompt.encoder_prompt", "a TextPrompt or TokensPrompt dict",
                                    f"got {type(enc).__name__}")
        _singleton(enc, "prompt.encoder_prompt", PROMPT_KEYS)  # the model's own: checked, not read
        dec_v, dec_field = prompt.get("decoder_prompt"), "prompt.decoder_prompt"
        if isinstance(dec_v, dict):
            dec, dec_field = _singleton(dec_v, dec_field, ("prompt", "prompt_token_ids"))
        else:
            dec = None if dec_v is None else _text_or_ids(dec_v, dec_field)
        kw = _mm_kwargs(prompt.get("mm_processor_kwargs"), "prompt.mm_processor_kwargs")
        enc_kw = _mm_kwargs(enc.get("mm_processor_kwargs"), "prompt.encoder_prompt.mm_processor_kwargs")
        if kw is not None or enc_kw is not None:
            kw = {**(kw or {}), **(enc_kw or {})}
        return ParsedPrompt(dec, dec_field, _mm_data(enc.get("multi_modal_data"), "prompt.encoder_prompt"),
                            kw, prepend_start=dec is not None)
    _keys(prompt, SINGLETON_KEYS, "prompt")
    given = [k for k in ("prompt", "decoder_prompt") if k in prompt]
    if len(given) > 1 or ("decoder_prompt" in prompt and "prompt_token_ids" in prompt):
        raise InvalidInputError("prompt", "one decoder prompt: 'prompt', 'prompt_token_ids' or 'decoder_prompt'",
                                f"got {sorted(k for k in prompt if k in SINGLETON_KEYS[:2] + ('decoder_prompt',))}")
    if "decoder_prompt" in prompt:  # refimpl's form: a prompt given must be one (None is vLLM's explicit form's)
        dec, field = _text_or_ids(prompt["decoder_prompt"], "prompt.decoder_prompt"), "prompt.decoder_prompt"
    else:
        dec, field = _singleton({k: v for k, v in prompt.items() if k in ("prompt", "prompt_token_ids")},
                                "prompt", PROMPT_KEYS)
    return ParsedPrompt(dec, field, _mm_data(prompt.get("multi_modal_data"), "prompt"),
                        _mm_kwargs(prompt.get("mm_processor_kwargs"), "prompt.mm_processor_kwargs"))


def _mm_data(v: Any, where: str) -> dict[str, Any]:
    """A Whisper request's ``multi_modal_data``: a dict with its audio."""
    if not isinstance(v, dict) or "audio" not in v:
        raise InvalidInputError(f"{where}.multi_modal_data.audio", "one audio item", "a Whisper request needs audio")
    return v
