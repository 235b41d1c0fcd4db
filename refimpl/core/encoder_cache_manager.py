"""Encoder budget of the V1 scheduler and model runner.

Mirrors ``compute_encoder_budget`` / ``_compute_encoder_budget_multimodal`` in
``vllm/v1/core/encoder_cache_manager.py`` (vLLM 0.9.0; the same in 0.10.2). Each call asks
the registry for the max tokens per item, which (before PR #19756) means processing the
dummy data -- the lookup PR #17935's cache made cheap from the second call on.

Left out: the ``EncoderCacheManager`` class itself (refimpl's scheduler tracks encoder
inputs per step), the warning logged when an item exceeds the budget.
"""
from __future__ import annotations


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
    per_item = mm_registry.get_max_tokens_per_item_by_nonzero_modality(
        model_config, disable_cache=disable_cache, use_formula=use_formula)
    if not per_item:
        return 0, 0
    max_tokens_per_item = max(per_item.values())
    return (max(scheduler_config.max_num_encoder_input_tokens, max_tokens_per_item),
            max(scheduler_config.encoder_cache_size, max_tokens_per_item))
