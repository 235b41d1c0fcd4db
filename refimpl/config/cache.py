"""CacheConfig: the paged KV cache's block size and size. Mirrors ``vllm/config/cache.py`` (0.10.2).
Left out: swap space, prefix caching, fp8 KV, CPU offload, sliding windows.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional

from refimpl.errors import ConfigError


@dataclass
class CacheConfig:
    """Paged KV cache: ``block_size`` (tokens), ``num_gpu_blocks`` (None: set by KV sizing),
    ``kv_cache_memory_bytes`` (the KV cache on CPU; CUDA uses ``gpu_memory_utilization``).

    ``cross_attention_read`` (ours): how Whisper's runner reads the running requests' cross K/V, one
    call per layer for all of them. ``"dense-once"``: copied once per request into its row of a
    per-layer (2, rows, H, 1500, D) tensor (``CrossKVSlots``; ``dense_copy_bytes`` per running
    request, left free when KV is sized on CUDA), read as a view; ``"paged-runs"``: one gather of
    every request's cross blocks each step (a copy per step, no memory held between steps)."""
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
