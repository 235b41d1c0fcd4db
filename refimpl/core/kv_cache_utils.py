"""KV-cache sizing helpers (vLLM ``vllm/v1/core/kv_cache_utils.py``): the blocks one request
needs (the start-up check) and the cross-attention sizing of each call site under an
encoder-length row (vLLM 0.13.0 sized it from the batching budget, PR #29421)."""
from __future__ import annotations

from dataclasses import dataclass


def blocks_for_one_request(vllm_config, encoder_len: int | None = None) -> int:
    """KV blocks one request of ``max_model_len`` needs: its decoder blocks plus the null
    block, and for an encoder-decoder model its cross blocks for ``encoder_len`` positions
    (default the model's ``max_source_positions``, 1500 for Whisper: 94 blocks of 16). The
    bound ``GPUModelRunner.determine_num_blocks`` enforces (123 blocks for Whisper at 448)."""
    mc, bs = vllm_config.model_config, vllm_config.cache_config.block_size
    need = -(-mc.max_model_len // bs) + 1
    if mc.is_encoder_decoder:
        need += -(-(encoder_len or mc.hf_config_dict["max_source_positions"]) // bs)
    return need


@dataclass(frozen=True)
class CrossAttentionSizing:
    """Cross-attention KV sizing of one encoder-decoder request under an encoder-length row
    (blocks of ``block_size`` tokens; bytes over all decoder layers): ``scheduler_blocks`` the
    scheduler allocates at admission, ``block_table_width`` the runner's block-table columns
    (vLLM 0.13.0: ``max(max_model_len, max_encoder_len)`` / block_size), ``kv_check_blocks``
    the start-up memory check reserves (``CrossAttentionSpec.max_memory_usage_bytes``),
    ``needed_blocks`` the encoder length's own, ``bytes_per_block``."""
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
    """What each site sizes for one request's cross-attention, read as the config's
    encoder-length row reads it (``get_encoder_len``; no guard). Whisper-large-v3 in fp16,
    block size 16: 94 blocks (246,415,360 bytes) under 0.11.0; under 0.13.0 (PR #29421, the
    budget = max_num_batched_tokens) 512 blocks at 8192 and 2048 at 32768 batched tokens;
    0.14.0 fixes the scheduler's count only. Raises ValueError for a decoder-only model."""
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
