"""CacheConfig: the paged KV cache's block size and size.

Mirrors ``vllm/config/cache.py`` (v0.10.2). Left out: swap space, prefix caching, fp8 KV,
CPU offload, sliding windows.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional

from refimpl.errors import ConfigError


@dataclass
class CacheConfig:
    """Paged KV cache: ``block_size`` (tokens per block), ``num_gpu_blocks`` (set by KV sizing
    when None), ``kv_cache_memory_bytes`` (bytes to give the KV cache on CPU, where there is no
    free-memory probe; on CUDA ``gpu_memory_utilization`` of the free memory is used).

    ``cross_attention_read`` (refimpl's, not vLLM's): how Whisper's runner reads a request's
    cross-attention K/V from its paged blocks. ``"dense-once"``: copied once, when the encoder
    has written them, into a head-major (2, H, 1500, D) tensor per layer that every later step
    reads (a stand-in for a kernel that reads through the block table; extra memory per running
    request: 2 x 1500 x d_model x decoder layers x dtype bytes, ``dense_copy_bytes``, left free
    when the KV cache is sized on CUDA). ``"paged-runs"``: read every
    step as views of the blocks' runs of consecutive slots, no copy (slower on CPU, and slower as
    the block pool fragments). See refimpl/attention/paged_attention.py."""
    block_size: int = 16
    num_gpu_blocks: Optional[int] = None
    gpu_memory_utilization: float = 0.9
    kv_cache_memory_bytes: int = 512 << 20
    cross_attention_read: Literal["dense-once", "paged-runs"] = "dense-once"

    def __post_init__(self):
        if self.block_size <= 0 or self.block_size & (self.block_size - 1):
            raise ConfigError("block_size", "a power of two > 0", f"got {self.block_size}")
        if self.num_gpu_blocks is not None and self.num_gpu_blocks <= 0:
            raise ConfigError("num_gpu_blocks", "> 0", f"got {self.num_gpu_blocks}")
        if not 0 < self.gpu_memory_utilization <= 1:
            raise ConfigError("gpu_memory_utilization", "(0, 1]", f"got {self.gpu_memory_utilization}")
        if self.cross_attention_read not in ("dense-once", "paged-runs"):
            raise ConfigError("cross_attention_read", ("dense-once", "paged-runs"),
                              f"got {self.cross_attention_read!r}")
