"""The harness's memory refusals for a serving engine (measuring half; the mechanism never
imports this module). The process probes are in ``refimpl.utils.mem_utils``."""
from __future__ import annotations

import psutil

from refimpl.core.kv_cache_utils import blocks_for_one_request

GiB = 1 << 30
# one step's activations and encoder output, not modelled part by part (check_serving_memory)
SERVING_MARGIN_BYTES = GiB // 2


def check_num_gpu_blocks(vllm_config) -> None:
    """ConfigError (field ``num_gpu_blocks``, limit :func:`blocks_for_one_request`) when a
    given ``num_gpu_blocks`` cannot hold one request: the start-up check of
    ``determine_num_blocks``, made from the configs alone so a bench can refuse before any
    worker starts."""
    from refimpl.errors import ConfigError
    num, need = vllm_config.cache_config.num_gpu_blocks, blocks_for_one_request(vllm_config)
    if num is not None and num < need:
        raise ConfigError("num_gpu_blocks", need, f"{num} KV blocks cannot hold one request of "
                          f"max_model_len={vllm_config.model_config.max_model_len} ({need} blocks)")


def check_serving_memory(vllm_config, available: int | None = None) -> int:
    """Refuse an encoder-decoder (Whisper) engine on the CPU before its model loads, when what
    it will hold exceeds the memory available now (``available`` bytes, default psutil's):
    the weights (``model_loader.parameter_bytes``), the KV cache (``num_gpu_blocks`` x bytes
    per block, else ``kv_cache_memory_bytes``), the dense-once cross K/V copies at
    ``max_num_seqs`` (``attention.cross_attention.dense_copy_bytes``), profile_run's dummy
    prompt of ``max_num_batched_tokens`` ids (16 bytes each) and SERVING_MARGIN_BYTES.
    Returns the estimated need (bytes). Raises InsufficientMemoryError naming the setting
    behind the largest part (``max_num_seqs``, ``num_gpu_blocks`` / ``kv_cache_memory_bytes``,
    ``max_num_batched_tokens``, or ``scale`` for the weights), with the available bytes as
    limit. refimpl's (DEVELOPERS.md: told before it starts, not killed); vLLM sizes the KV
    cache from what the GPU has free instead.

    An upper bound: it counts a copy for every request that can run at once, ``max_num_seqs``
    or as many as the KV cache holds (each needs its cross blocks and a decoder block, 95 of
    16 tokens for Whisper), whichever is fewer. Measured by
    ``scripts/serving_memory_check.py 8`` (whisper-large-v3, full scale, float32, 400 blocks,
    8 requests x 3 tokens): 8.05 GiB over the process's start after loading, peak 9.47 GiB,
    estimate 11.87 GiB when it counted 8 copies (before the KV bound: 400 blocks hold 4
    requests, 10.0 GiB); with 3-token requests and one audio encoded per step, fewer ran at
    once."""
    import torch

    from refimpl.attention.cross_attention import dense_copy_bytes
    from refimpl.errors import InsufficientMemoryError
    from refimpl.worker.model_loader import parameter_bytes
    mc, cc = vllm_config.model_config, vllm_config.cache_config
    d = mc.hf_config_dict
    itemsize = getattr(torch, mc.dtype).itemsize
    block = 2 * d["decoder_layers"] * cc.block_size * d["d_model"] * itemsize
    kv_field = "num_gpu_blocks" if cc.num_gpu_blocks else "kv_cache_memory_bytes"
    kv_bytes = cc.num_gpu_blocks * block if cc.num_gpu_blocks else cc.kv_cache_memory_bytes
    # a running request holds at least its cross blocks and one decoder block
    cross_blocks = -(-d["max_source_positions"] // cc.block_size)
    running = min(vllm_config.scheduler_config.max_num_seqs, kv_bytes // block // (cross_blocks + 1))
    parts = {"scale": parameter_bytes(mc), kv_field: kv_bytes,
             "max_num_seqs": dense_copy_bytes(vllm_config, running),
             # profile_run's dummy decoder prompt: a list of max_num_batched_tokens token ids
             # (8-byte pointers), built as [0] * n and copied into the prompt
             "max_num_batched_tokens": 16 * vllm_config.scheduler_config.max_num_batched_tokens}
    need = sum(parts.values()) + SERVING_MARGIN_BYTES
    avail = psutil.virtual_memory().available if available is None else available
    if need > avail:
        field = max(parts, key=lambda k: parts[k])
        raise InsufficientMemoryError(field, avail, (
            f"{mc.model} ({mc.scale} scale, {mc.dtype}) would hold about {need / GiB:.1f} GiB: weights "
            f"{parts['scale'] / GiB:.1f}, KV cache {parts[kv_field] / GiB:.1f}, cross K/V copies for "
            f"{running} running requests (max_num_seqs={vllm_config.scheduler_config.max_num_seqs}) "
            f"{parts['max_num_seqs'] / GiB:.1f}, "
            f"dummy prompt {parts['max_num_batched_tokens'] / GiB:.1f}, margin {SERVING_MARGIN_BYTES / GiB:.1f}; "
            f"{avail / GiB:.1f} GiB available"))
    return need
