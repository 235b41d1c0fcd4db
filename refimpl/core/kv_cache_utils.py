"""KV-cache sizing helpers (vLLM ``vllm/v1/core/kv_cache_utils.py``)."""
from __future__ import annotations


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
