"""KV-cache sizing helpers (vLLM ``vllm/v1/core/kv_cache_utils.py``): one request's blocks (the
start-up check) and each site's cross-attention sizing under an encoder-length row.
"""
from __future__ import annotations

from dataclasses import dataclass


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
    itemsize = {"float32": 4, "float16": 2, "bfloat16": 2}[mc.dtype]
    per_block = d["decoder_layers"] * 2 * bs * d["d_model"] * itemsize
    runner = vllm_config.get_encoder_len("runner")
    return CrossAttentionSizing(
        scheduler_blocks=-(-vllm_config.get_encoder_len("scheduler") // bs),
        block_table_width=-(-max(mc.max_model_len, runner) // bs),
        kv_check_blocks=-(-vllm_config.get_encoder_len("kv_cache") // bs),
        needed_blocks=-(-mc.max_encoder_len // bs), bytes_per_block=per_block)
