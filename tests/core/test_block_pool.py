"""BlockPool: null block reserved, all-or-nothing get, no double free, usage."""
import pytest

from refimpl.core.block_pool import BlockPool
from refimpl.errors import ConfigError, EngineStateError


def test_null_block_is_reserved():
    pool = BlockPool(10)
    assert pool.get_num_free_blocks() == 9
    ids = [b.block_id for b in pool.get_new_blocks(9)]
    assert sorted(ids) == list(range(1, 10)) and pool.null_block.block_id == 0
    assert pool.get_num_free_blocks() == 0 and pool.get_usage() == 1.0


def test_get_new_blocks_raises_and_takes_nothing_when_short():
    pool = BlockPool(5)
    pool.get_new_blocks(2)
    with pytest.raises(EngineStateError) as e:
        pool.get_new_blocks(3)
    assert e.value.field == "num_blocks" and e.value.limit == 2
    assert pool.get_num_free_blocks() == 2


def test_free_returns_blocks_tail_first_and_refuses_double_free():
    pool = BlockPool(6)
    blocks = pool.get_new_blocks(3)
    assert all(b.ref_cnt == 1 for b in blocks)
    pool.free_blocks(reversed(blocks))
    assert pool.get_num_free_blocks() == 5 and pool.get_usage() == 0.0
    # The two never-used blocks come first, then the freed tail before its head.
    assert [b.block_id for b in pool.get_new_blocks(5)] == [4, 5, 3, 2, 1]
    with pytest.raises(EngineStateError):
        pool.free_blocks([pool.null_block])
    fresh = BlockPool(3)
    b = fresh.get_new_blocks(1)
    fresh.free_blocks(b)
    with pytest.raises(EngineStateError, match="double free"):
        fresh.free_blocks(b)


def test_usage_fraction():
    pool = BlockPool(11)
    pool.get_new_blocks(5)
    assert pool.get_usage() == pytest.approx(0.5)


@pytest.mark.parametrize("n", [0, 1, -3, 2.5])
def test_bad_pool_size(n):
    with pytest.raises(ConfigError) as e:
        BlockPool(n)
    assert e.value.field == "num_gpu_blocks"
