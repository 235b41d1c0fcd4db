"""BlockPool and KVCacheBlock: the paged KV cache's physical blocks.

Mirrors ``vllm/v1/core/block_pool.py`` and ``KVCacheBlock`` (0.10.2): block 0 is the null block,
free blocks wait in a FIFO (a deque for ``FreeKVCacheBlockQueue``), a freed request's tail goes
back first. Left out: prefix caching (off for Whisper in 0.10.2), KV events.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Iterable

from refimpl.errors import ConfigError, EngineStateError


@dataclass(eq=False)
class KVCacheBlock:
    """One block of ``block_size`` token slots. ``ref_cnt``: owners (0 = free)."""
    block_id: int
    ref_cnt: int = 0
    is_null: bool = False

    def __repr__(self) -> str:
        return f"KVCacheBlock({self.block_id}, ref_cnt={self.ref_cnt})"


class BlockPool:
    """``num_gpu_blocks`` blocks, ``num_gpu_blocks - 1`` usable. Raises ConfigError below 2."""

    def __init__(self, num_gpu_blocks: int):
        if isinstance(num_gpu_blocks, bool) or not isinstance(num_gpu_blocks, int) or num_gpu_blocks < 2:
            raise ConfigError("num_gpu_blocks", ">= 2 (block 0 is the null block)", f"got {num_gpu_blocks!r}")
        self.num_gpu_blocks = num_gpu_blocks
        self.blocks = [KVCacheBlock(i) for i in range(num_gpu_blocks)]
        self.free_block_queue: deque[KVCacheBlock] = deque(self.blocks)
        self.null_block = self.free_block_queue.popleft()
        self.null_block.is_null = True

    def get_new_blocks(self, num_blocks: int) -> list[KVCacheBlock]:
        """Take ``num_blocks`` free blocks (ref_cnt 1). Raises EngineStateError, taking none, when fewer are free."""
        if num_blocks < 0 or num_blocks > len(self.free_block_queue):
            raise EngineStateError("num_blocks", len(self.free_block_queue),
                                   f"cannot get {num_blocks} free blocks from the pool")
        out = [self.free_block_queue.popleft() for _ in range(num_blocks)]
        for blk in out:
            assert blk.ref_cnt == 0, blk
            blk.ref_cnt = 1
        return out

    def free_blocks(self, ordered_blocks: Iterable[KVCacheBlock]) -> None:
        """Drop one reference of each block; those at 0 go to the back of the free queue in this order.
        Raises EngineStateError on a double free or on freeing the null block."""
        for blk in ordered_blocks:
            if blk.is_null or blk.ref_cnt <= 0:
                raise EngineStateError("ref_cnt", "> 0", f"double free of {blk}")
            blk.ref_cnt -= 1
            if blk.ref_cnt == 0:
                self.free_block_queue.append(blk)

    def get_num_free_blocks(self) -> int:
        return len(self.free_block_queue)

    def get_usage(self) -> float:
        """Fraction (0..1) of usable blocks in use."""
        total = self.num_gpu_blocks - 1
        return 1.0 - self.get_num_free_blocks() / total
