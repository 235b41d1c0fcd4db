"""Encoder cache accounting and encoder budget of the V1 scheduler and model runner.

Mirrors ``vllm/v1/core/encoder_cache_manager.py``: ``EncoderCacheManager`` (see its
docstring for the version) and ``compute_encoder_budget`` / ``compute_mm_encoder_budget``
(vLLM 0.9.0's ``_compute_encoder_budget_multimodal``, renamed in 0.10.1; the same rule up to
0.14.0). Each budget call asks the registry for the max tokens per item, which (before PR
#19756) means processing the dummy data -- the lookup PR #17935's cache made cheap from the
second call on. For Whisper the budget is one encoder length while ``VllmConfig`` sets
``max_num_encoder_input_tokens`` to it (0.10.2 to 0.12), ``max_num_batched_tokens`` from
0.13.0 (PR #29421: 8192 holds 5 audios).

Left out: the warning logged when an item exceeds the budget.
"""
from __future__ import annotations

from refimpl.request import Request


def compute_encoder_budget(model_config, scheduler_config, mm_registry, *, disable_cache: bool = False,
                           use_formula: bool = False) -> tuple[int, int]:
    """(encoder_compute_budget, encoder_cache_size), both in encoder tokens.

    compute budget = max(scheduler_config.max_num_encoder_input_tokens, max tokens per item);
    cache size = max(scheduler_config.encoder_cache_size, max tokens per item), where max
    tokens per item is over the modalities whose limit per prompt is > 0. (0, 0) for models
    without multimodal input or with every modality disabled. ``disable_cache`` /
    ``use_formula`` are passed to ``get_max_tokens_per_item_by_nonzero_modality``.
    Examples with SchedulerConfig's defaults (both budgets = max_num_batched_tokens = 8192):
    Qwen2.5-VL-3B at 128000 tokens -> (98304, 98304); Whisper (1500 per audio) -> (8192, 8192),
    or (1500, 8192) once VllmConfig has set max_num_encoder_input_tokens = 1500.
    """
    if not mm_registry.supports_multimodal_inputs(model_config):
        return 0, 0
    return compute_mm_encoder_budget(scheduler_config, mm_registry.get_max_tokens_per_item_by_nonzero_modality(
        model_config, disable_cache=disable_cache, use_formula=use_formula))


def compute_mm_encoder_budget(scheduler_config, max_tokens_by_modality: dict[str, int]) -> tuple[int, int]:
    """(encoder_compute_budget, encoder_cache_size) in tokens from the max tokens per item of
    the enabled modalities: each the scheduler's setting, raised to the largest item;
    (0, 0) when no modality is enabled."""
    if not max_tokens_by_modality:
        return 0, 0
    max_tokens_per_item = max(max_tokens_by_modality.values())
    return (max(scheduler_config.max_num_encoder_input_tokens, max_tokens_per_item),
            max(scheduler_config.encoder_cache_size, max_tokens_per_item))


class EncoderCacheManager:
    """Encoder-cache space accounting of the scheduler, in encoder tokens.

    Mirrors ``EncoderCacheManager`` of ``vllm/v1/core/encoder_cache_manager.py``: the
    method names and ``can_allocate`` signature of v0.10.2, entries keyed per request as in
    v0.9.0. Left out: sharing one entry between requests by ``mm_hash`` and lazy eviction of
    unreferenced entries (v0.10.2), the list of freed ids for the runner (refimpl's runner
    keeps no encoder outputs between steps).
    ``cached``: request id -> indices of its encoder inputs that hold cache space.
    """

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
