"""KVCacheManager over two KV-cache groups: decoder self-attention and cross-attention.

Mirrors ``vllm/v1/core/kv_cache_manager.py``, the no-prefix-cache coordinator and the full /
cross managers of ``single_type_kv_cache_manager.py`` (0.10.2), over one BlockPool. Left out:
prefix caching, sliding window / Mamba groups, lookahead slots, KV connectors.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Optional

from refimpl.core.block_pool import BlockPool, KVCacheBlock
from refimpl.errors import InvalidInputError
from refimpl.request import Request


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass
class KVCacheBlocks:
    """Blocks per group: ``blocks[0]`` self-attention, ``blocks[1]`` cross-attention."""
    blocks: tuple[list[KVCacheBlock], list[KVCacheBlock]]

    def get_block_ids(self) -> tuple[list[int], list[int]]:
        return tuple([b.block_id for b in g] for g in self.blocks)  # type: ignore[return-value]

    def is_empty(self) -> bool:
        return not any(self.blocks)


class SingleTypeKVCacheManager:
    """Blocks of one attention type, per request (``req_to_blocks``)."""

    def __init__(self, block_pool: BlockPool, block_size: int):
        self.block_pool = block_pool
        self.block_size = block_size
        self.req_to_blocks: defaultdict[str, list[KVCacheBlock]] = defaultdict(list)

    def get_num_blocks_to_allocate(self, request_id: str, num_tokens: int) -> int:
        """Blocks still missing to hold ``num_tokens`` tokens in total (never negative)."""
        have = len(self.req_to_blocks.get(request_id, ()))
        return max(cdiv(num_tokens, self.block_size) - have, 0)

    def allocate_new_blocks(self, request_id: str, num_tokens: int) -> list[KVCacheBlock]:
        n = self.get_num_blocks_to_allocate(request_id, num_tokens)
        if n == 0:
            return []
        new = self.block_pool.get_new_blocks(n)
        self.req_to_blocks[request_id].extend(new)
        return new

    def free(self, request_id: str) -> None:
        # Tail first, as vLLM: the most recently filled blocks are reused first.
        self.block_pool.free_blocks(reversed(self.req_to_blocks.pop(request_id, [])))


class FullAttentionManager(SingleTypeKVCacheManager):
    """Decoder self-attention: blocks grow with the tokens of the request."""


class CrossAttentionManager(SingleTypeKVCacheManager):
    """Cross-attention: a fixed block count set once at admission (none for ``num_encoder_tokens`` 0)."""


class KVCacheManager:
    """Allocates and frees a request's blocks in every group, all or nothing (``num_gpu_blocks``
    includes the null block). Raises ConfigError."""

    def __init__(self, block_size: int, num_gpu_blocks: int, is_encoder_decoder: bool = False):
        self.block_size = block_size
        self.is_encoder_decoder = is_encoder_decoder
        self.block_pool = BlockPool(num_gpu_blocks)
        self.self_attn = FullAttentionManager(self.block_pool, block_size)
        self.cross_attn: Optional[CrossAttentionManager] = (
            CrossAttentionManager(self.block_pool, block_size) if is_encoder_decoder else None)

    def allocate_slots(self, request: Request, num_new_tokens: int,
                       num_encoder_tokens: int = 0) -> Optional[KVCacheBlocks]:
        """Room for ``num_computed_tokens + num_new_tokens`` decoder tokens and, when
        ``num_encoder_tokens`` > 0, the cross-attention KV of that many encoder positions. Returns the
        new blocks per group, or None (nothing allocated) when the pool cannot hold them. Raises
        InvalidInputError for num_new_tokens <= 0, negative or decoder-only num_encoder_tokens."""
        if num_new_tokens <= 0:
            raise InvalidInputError("num_new_tokens", "> 0", f"got {num_new_tokens}")
        if num_encoder_tokens < 0:
            raise InvalidInputError("num_encoder_tokens", ">= 0", f"got {num_encoder_tokens}")
        cross = self.cross_attn
        if num_encoder_tokens and cross is None:
            raise InvalidInputError("num_encoder_tokens", 0,
                                    "decoder-only models have no cross-attention blocks")
        rid = request.request_id
        num_tokens = request.num_computed_tokens + num_new_tokens
        need_self = self.self_attn.get_num_blocks_to_allocate(rid, num_tokens)
        need_cross = (cross.get_num_blocks_to_allocate(rid, num_encoder_tokens)
                      if cross is not None and num_encoder_tokens else 0)
        if need_self + need_cross > self.block_pool.get_num_free_blocks():
            return None
        new_self = self.self_attn.allocate_new_blocks(rid, num_tokens)
        new_cross = (cross.allocate_new_blocks(rid, num_encoder_tokens)
                     if cross is not None and need_cross else [])
        return KVCacheBlocks((new_self, new_cross))

    def free(self, request: Request | str) -> None:
        """Return every block of the request (both groups) to the pool. Unknown ids: no-op."""
        rid = request if isinstance(request, str) else request.request_id
        self.self_attn.free(rid)
        if self.cross_attn is not None:
            self.cross_attn.free(rid)

    def get_blocks(self, request_id: str) -> KVCacheBlocks:
        cross = self.cross_attn.req_to_blocks.get(request_id, []) if self.cross_attn else []
        return KVCacheBlocks((list(self.self_attn.req_to_blocks.get(request_id, [])), list(cross)))

    def get_block_ids(self, request_id: str) -> tuple[list[int], list[int]]:
        """(self-attention block ids, cross-attention block ids) of the request."""
        return self.get_blocks(request_id).get_block_ids()

    def get_num_free_blocks(self) -> int:
        return self.block_pool.get_num_free_blocks()

    @property
    def usage(self) -> float:
        """Fraction (0..1) of usable blocks in use."""
        return self.block_pool.get_usage()

    def num_blocks_held(self) -> int:
        """Blocks held by requests, both groups (for leak checks)."""
        groups = [self.self_attn] + ([self.cross_attn] if self.cross_attn else [])
        return sum(len(b) for g in groups for b in g.req_to_blocks.values())
