"""Helpers of the V1 scheduler: admission limits and the stop check.

``check_stop`` mirrors ``vllm/v1/core/sched/utils.py``: the last token's stop conditions first, then
the length caps (0.11.1 on, PR #26317), or the caps first (``order="caps-first"``: 0.8.5 to 0.11.0).
``check_request_limits`` makes
at admission the checks vLLM's ``Processor._validate_model_inputs`` and ``SamplingParams`` make,
plus every bound a step's consumer has; ``check_kv_cache_fit`` is ours (no livelock on a
request that can never fit). Left out: pooling requests, ``stop_reason``, ``min_tokens``.
"""
from __future__ import annotations

from typing import Optional

import torch

from refimpl.config.scheduler import StopCheckOrder
from refimpl.core.kv_cache_manager import KVCacheManager, cdiv
from refimpl.errors import ConfigError, InvalidInputError, SamplingParamsError
from refimpl.request import Request, RequestStatus
from refimpl.sampling_params import SamplingParams, check_max_tokens


def check_request_limits(request: Request, max_model_len: int, is_encoder_decoder: bool,
                         encoder_limit: int, *, vocab_size: Optional[int] = None,
                         encoder_input_shape: Optional[tuple[int, int]] = None) -> None:
    """Refuse a request the model can never serve, or a value a step cannot take.

    Raises InvalidInputError (prompt of ``max_model_len`` tokens or more; a token id >=
    ``vocab_size``; more than one audio for encoder-decoder; an encoder input above
    ``encoder_limit`` tokens; Whisper features not a finite float tensor of
    ``encoder_input_shape``) or SamplingParamsError (``SamplingParams.verify``; ``max_tokens``
    beyond ``max_model_len`` - prompt length)."""
    sp = request.sampling_params
    if not isinstance(sp, SamplingParams):
        raise SamplingParamsError("sampling_params", "a SamplingParams", f"got {type(sp).__name__}")
    sp.verify(vocab_size)
    if request.num_prompt_tokens >= max_model_len:
        raise InvalidInputError("prompt_token_ids", max_model_len - 1,
                                f"prompt of {request.num_prompt_tokens} tokens leaves no room")
    if vocab_size is not None and max(request.prompt_token_ids) >= vocab_size:
        raise InvalidInputError("prompt_token_ids", vocab_size - 1, f"token id {max(request.prompt_token_ids)} "
                                f"is out of the vocabulary ({vocab_size} tokens)")
    check_max_tokens(sp, request.num_prompt_tokens, max_model_len)
    if is_encoder_decoder and request.num_encoder_inputs > 1:
        raise InvalidInputError("mm_inputs", 1, "an encoder-decoder request takes one audio")
    for i in range(request.num_encoder_inputs):
        if request.get_num_encoder_tokens(i) > encoder_limit:
            raise InvalidInputError("mm_inputs", encoder_limit, f"item {i} needs "
                                    f"{request.get_num_encoder_tokens(i)} encoder tokens")
        if encoder_input_shape is not None:
            _check_encoder_input(request, i, encoder_input_shape)


def _check_encoder_input(request: Request, i: int, shape: tuple[int, int]) -> None:
    """What the Whisper runner stacks, moves and encodes: (n_mels, frames) float, finite."""
    feats = request.mm_inputs[i].get("input_features") if isinstance(request.mm_inputs[i], dict) else None
    limit = f"input_features: a finite float tensor of shape {shape}"
    if (not isinstance(feats, torch.Tensor) or tuple(feats.shape) != shape or not feats.is_floating_point()
            or feats.layout != torch.strided or feats.device.type == "meta"):
        got = (f"{tuple(feats.shape)} {feats.dtype}" if isinstance(feats, torch.Tensor) else type(feats).__name__)
        raise InvalidInputError("mm_inputs", limit, f"item {i}: got {got}")
    if not bool(torch.isfinite(feats).all()):
        raise InvalidInputError("mm_inputs", limit, f"item {i}: NaN or inf in input_features")
    if request.get_num_encoder_tokens(i) != shape[1] // 2:
        raise InvalidInputError("mm_positions", shape[1] // 2, f"item {i} declares "
                                f"{request.get_num_encoder_tokens(i)} encoder tokens, its features give {shape[1] // 2}")


def check_kv_cache_fit(request: Request, kv_cache_manager: KVCacheManager, max_model_len: int,
                       max_encoder_len: int, is_encoder_decoder: bool) -> None:
    """Refuse a request that could not fit the KV cache even alone (it would preempt itself
    forever). Raises ConfigError (``num_gpu_blocks``), InvalidInputError (``prompt_token_ids``: not
    one output token fits) or SamplingParamsError (``max_tokens``)."""
    bs = kv_cache_manager.block_size
    num_blocks = kv_cache_manager.block_pool.num_gpu_blocks
    usable = num_blocks - 1 - (
        cdiv(max_encoder_len, bs) if is_encoder_decoder and request.has_encoder_inputs else 0)
    max_len = min(request.num_prompt_tokens + request.max_tokens, max_model_len)
    if usable < 1:
        raise ConfigError("num_gpu_blocks", num_blocks - usable + 1,
                          f"{num_blocks} KV blocks leave none for a request's own tokens")
    if cdiv(request.num_prompt_tokens + 1, bs) > usable:  # not even one output token fits
        raise InvalidInputError("prompt_token_ids", usable * bs - 1,
                                f"prompt of {request.num_prompt_tokens} tokens leaves no room in the "
                                f"KV cache ({usable} blocks of {bs} after cross-attention)")
    if cdiv(max_len, bs) > usable:
        raise SamplingParamsError("max_tokens", usable * bs - request.num_prompt_tokens,
                                  f"prompt + max_tokens = {max_len} tokens cannot fit the KV "
                                  f"cache ({usable} blocks of {bs} after cross-attention)")


def check_stop(request: Request, max_model_len: int, order: StopCheckOrder = "stop-first") -> bool:
    """Finish ``request`` on its last token: EOS (unless ``ignore_eos``) or a stop token
    (FINISHED_STOPPED); or at ``max_model_len`` / ``max_tokens`` (FINISHED_LENGTH_CAPPED); whether
    it finished. ``order`` "stop-first" (vLLM >= 0.11.1): a stop token that is also the last one the
    caps allow finishes as "stop"; "caps-first" (vLLM 0.8.5 to 0.11.0) reports it as "length"."""
    if order == "caps-first" and _length_capped(request, max_model_len):
        return True
    last = request.output_token_ids[-1]
    sp = request.sampling_params
    if (not sp.ignore_eos and last == request.eos_token_id) or last in sp.stop_token_ids:
        request.status = RequestStatus.FINISHED_STOPPED
        return True
    return _length_capped(request, max_model_len)


def _length_capped(request: Request, max_model_len: int) -> bool:
    if request.num_tokens >= max_model_len or request.num_output_tokens >= request.max_tokens:
        request.status = RequestStatus.FINISHED_LENGTH_CAPPED
        return True
    return False
