"""KV-cache sizing helpers (vLLM ``vllm/v1/core/kv_cache_utils.py``): one request's blocks (the
start-up check) and each site's cross-attention sizing under an encoder-length row.
"""
from __future__ import annotations

from dataclasses import dataclass

DTYPE_ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2}


def kv_cache_shape(model_config, config_dict: dict | None = None) -> tuple[int, int, int]:
    """(num_layers, num_kv_heads, head_dim) of the KV cache (decoder layers for Whisper), from
    ``config_dict`` (default the model's config.json as the kit ships it)."""
    d = model_config.hf_config_dict if config_dict is None else config_dict
    if model_config.is_encoder_decoder:
        heads = d["decoder_attention_heads"]
        return d["decoder_layers"], heads, d["d_model"] // heads
    heads = d["num_attention_heads"]
    return d["num_hidden_layers"], d.get("num_key_value_heads", heads), d["hidden_size"] // heads


def kv_bytes_per_block(model_config, block_size: int, shape: tuple[int, int, int] | None = None) -> int:
    """KV bytes one block takes over all layers: layers * 2 * block_size * heads * head_dim * itemsize
    (``shape`` default ``kv_cache_shape(model_config)``)."""
    layers, heads, head_dim = shape or kv_cache_shape(model_config)
    return layers * 2 * block_size * heads * head_dim * DTYPE_ITEMSIZE[model_config.dtype]


def kv_check_encoder_len_reads(model_config, shape: tuple[int, int, int] | None = None) -> int:
    """Encoder-length reads of the start-up KV check: one per cross-attention layer
    (``CrossAttentionSpec.max_memory_usage_bytes``) and one for the concurrency log; 0 without."""
    return (shape or kv_cache_shape(model_config))[0] + 1 if model_config.is_encoder_decoder else 0


def blocks_for_one_request(vllm_config, encoder_len: int | None = None) -> int:
    """KV blocks one request of ``max_model_len`` needs: decoder blocks, the null block and, for an
    encoder-decoder model, cross blocks for ``encoder_len`` positions (default the model's)."""
    mc, bs = vllm_config.model_config, vllm_config.cache_config.block_size
    need = -(-mc.max_model_len // bs) + 1
    if mc.is_encoder_decoder:
        need += -(-(encoder_len or mc.hf_config_dict["max_source_positions"]) // bs)
    return need


@dataclass(frozen=True)
class CrossAttentionSizing:
    """Cross-attention KV of one request under an encoder-length row, in blocks of ``block_size``:
    ``scheduler_blocks`` (admission), ``block_table_width`` (the runner's columns),
    ``kv_check_blocks`` (the start-up memory check), ``needed_blocks``; ``bytes_per_block`` over
    all decoder layers."""
    scheduler_blocks: int
    block_table_width: int
    kv_check_blocks: int
    needed_blocks: int
    bytes_per_block: int

    @property
    def scheduler_bytes(self) -> int:
        return self.scheduler_blocks * self.bytes_per_block

    @property
    def needed_bytes(self) -> int:
        return self.needed_blocks * self.bytes_per_block


def cross_attention_sizing(vllm_config) -> CrossAttentionSizing:
    """What each site sizes for one request, read as the config's row reads it (no guard). Raises
    ValueError for a decoder-only model."""
    mc, bs = vllm_config.model_config, vllm_config.cache_config.block_size
    if not mc.is_encoder_decoder:
        raise ValueError(f"{mc.model} has no cross-attention")
    d = mc.hf_config_dict
    itemsize = DTYPE_ITEMSIZE[mc.dtype]
    per_block = d["decoder_layers"] * 2 * bs * d["d_model"] * itemsize
    runner = vllm_config.get_encoder_len("runner")
    return CrossAttentionSizing(
        scheduler_blocks=-(-vllm_config.get_encoder_len("scheduler") // bs),
        block_table_width=-(-max(mc.max_model_len, runner) // bs),
        kv_check_blocks=-(-vllm_config.get_encoder_len("kv_cache") // bs),
        needed_blocks=-(-mc.max_encoder_len // bs), bytes_per_block=per_block)
