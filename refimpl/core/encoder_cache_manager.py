"""Encoder cache accounting and encoder budget of the V1 scheduler and model runner.

Mirrors ``vllm/v1/core/encoder_cache_manager.py``: ``EncoderCacheManager`` and
``compute_encoder_budget`` / ``compute_mm_encoder_budget`` (0.9.0's
``_compute_encoder_budget_multimodal``; the same rule to 0.14.0). Left out: the warning on an
item above the budget.
"""
from __future__ import annotations

from refimpl.request import Request


def compute_encoder_budget(model_config, scheduler_config, mm_registry, *, disable_cache: bool = False,
                           use_formula: bool = False) -> tuple[int, int]:
    """(encoder_compute_budget, encoder_cache_size) in encoder tokens: each the scheduler's setting
    (``max_num_encoder_input_tokens``, ``encoder_cache_size``) raised to the largest item of the
    enabled modalities; (0, 0) without any. ``disable_cache`` / ``use_formula`` go to the registry's
    max-token lookup."""
    if not mm_registry.supports_multimodal_inputs(model_config):
        return 0, 0
    return compute_mm_encoder_budget(scheduler_config, mm_registry.get_max_tokens_per_item_by_nonzero_modality(
        model_config, disable_cache=disable_cache, use_formula=use_formula))


def compute_mm_encoder_budget(scheduler_config, max_tokens_by_modality: dict[str, int]) -> tuple[int, int]:
    """The same from given max tokens per item (modality -> tokens)."""
    if not max_tokens_by_modality:
        return 0, 0
    max_tokens_per_item = max(max_tokens_by_modality.values())
    return (max(scheduler_config.max_num_encoder_input_tokens, max_tokens_per_item),
            max(scheduler_config.encoder_cache_size, max_tokens_per_item))


class EncoderCacheManager:
    """Encoder-cache space of the scheduler, in encoder tokens; ``cached``: request id -> its inputs
    holding space. 0.10.2's method names, entries per request as 0.9.0. Left out: sharing an
    entry by ``mm_hash``, lazy eviction, the freed ids for the runner (it keeps no encoder outputs)."""

    def __init__(self, cache_size: int):
        self.cache_size = cache_size
        self.num_free_slots = cache_size
        self.cached: dict[str, set[int]] = {}

    def has_cache(self, request: Request, input_id: int) -> bool:
        return input_id in self.cached.get(request.request_id, ())

    def can_allocate(self, request: Request, input_id: int, encoder_compute_budget: int,
                     num_tokens_to_schedule: int) -> bool:
        """Whether item ``input_id`` fits the compute budget left this step and the cache
        space left after the ``num_tokens_to_schedule`` tokens already chosen this step."""
        num_tokens = request.get_num_encoder_tokens(input_id)
        if num_tokens > encoder_compute_budget:
            return False
        return num_tokens + num_tokens_to_schedule <= self.num_free_slots

    def allocate(self, request: Request, input_id: int) -> None:
        self.cached.setdefault(request.request_id, set()).add(input_id)
        self.num_free_slots -= request.get_num_encoder_tokens(input_id)

    def get_cached_input_ids(self, request: Request) -> set[int]:
        return self.cached.get(request.request_id, set())

    def free_encoder_input(self, request: Request, input_id: int) -> None:
        """Give back item ``input_id``'s space; a no-op when it holds none."""
        held = self.cached.get(request.request_id)
        if held is None or input_id not in held:
            return
        held.discard(input_id)
        if not held:
            del self.cached[request.request_id]
        self.num_free_slots += request.get_num_encoder_tokens(input_id)

    def free(self, request: Request) -> None:
        """Give back all space ``request`` holds (finished, aborted or preempted)."""
        for input_id in sorted(self.get_cached_input_ids(request)):
            self.free_encoder_input(request, input_id)
