"""Encoder-input scheduling: which encoder inputs run in a step.

``_try_schedule_encoder_inputs`` / ``_free_encoder_inputs`` of ``vllm/v1/core/sched/scheduler.py``
(0.10.2) as free functions. Left out: encoder-cache hits across requests (mm-hash sharing).
"""
from __future__ import annotations

from refimpl.core.encoder_cache_manager import EncoderCacheManager
from refimpl.request import Request


def try_schedule_encoder_inputs(request: Request, num_computed_tokens: int, num_new_tokens: int,
                                budget: int, encoder_cache_manager: EncoderCacheManager,
                                is_encoder_decoder: bool) -> tuple[list[int], int, int]:
    """Encoder inputs to run with this step's tokens (``budget``: encoder tokens left): all of an
    encoder-decoder request's on its first step; a decoder-only one's that overlap the scheduled
    tokens. Trims ``num_new_tokens`` at the first input that does not fit. Returns (input indices,
    num_new_tokens, budget left)."""
    items: list[int] = []
    num_tokens_to_schedule = 0
    for i, pos in enumerate(request.mm_positions):
        if is_encoder_decoder:
            if num_computed_tokens > 0:  # encoded on the first decoder step
                continue
        else:
            if pos.offset >= num_computed_tokens + num_new_tokens:
                break
            if (pos.offset + pos.length <= num_computed_tokens
                    or encoder_cache_manager.has_cache(request, i)):
                continue
        if not encoder_cache_manager.can_allocate(request, i, budget, num_tokens_to_schedule):
            if not is_encoder_decoder and num_computed_tokens < pos.offset:
                num_new_tokens = pos.offset - num_computed_tokens
            else:
                num_new_tokens = 0
            break
        budget -= pos.length
        num_tokens_to_schedule += pos.length
        items.append(i)
    return items, num_new_tokens, budget


def free_encoder_inputs(request: Request, encoder_cache_manager: EncoderCacheManager,
                        is_encoder_decoder: bool) -> None:
    """Free the cache space of inputs whose tokens are all computed (encoder-decoder:
    after the first decoder step)."""
    for i in sorted(encoder_cache_manager.get_cached_input_ids(request)):
        pos = request.mm_positions[i]
        if (request.num_computed_tokens > 0 if is_encoder_decoder
                else pos.offset + pos.length <= request.num_computed_tokens):
            encoder_cache_manager.free_encoder_input(request, i)
