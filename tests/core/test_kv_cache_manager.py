"""KVCacheManager: cross-attention blocks exact and allocated once, all-or-nothing across
groups, no leak / double allocation (incl. a hypothesis state machine)."""
import pytest

from refimpl.core.kv_cache_manager import KVCacheManager, cdiv
from refimpl.errors import InvalidInputError
from refimpl.request import Request

ENC = 1500


def req(rid="r", n=4):
    return Request(rid, list(range(1, n + 1)))


@pytest.mark.parametrize("block_size,expected", [(16, 94), (32, 47), (8, 188)])
def test_cross_blocks_exact_and_allocated_once(block_size, expected):
    m = KVCacheManager(block_size, 1000, is_encoder_decoder=True)
    r = req(n=4)
    new = m.allocate_slots(r, 4, ENC)
    self_ids, cross_ids = new.get_block_ids()
    assert len(cross_ids) == expected == cdiv(ENC, block_size) and len(self_ids) == 1
    # Decode steps: self-attention grows, cross-attention never does.
    for _ in range(3 * block_size):
        r.num_computed_tokens += 1 if r.num_computed_tokens else 4
        step = m.allocate_slots(r, 1)
        assert step.get_block_ids()[1] == []
    self_ids, cross_ids = m.get_block_ids("r")
    assert len(cross_ids) == expected
    assert len(self_ids) == cdiv(r.num_computed_tokens + 1, block_size)
    assert not set(self_ids) & set(cross_ids)
    # Re-asking for the encoder tokens allocates nothing more.
    assert m.allocate_slots(r, 1, ENC).get_block_ids()[1] == []
    m.free(r)
    assert m.get_num_free_blocks() == 999 and m.usage == 0.0


def test_all_or_nothing_across_groups():
    m = KVCacheManager(16, 1 + 94, is_encoder_decoder=True)  # 94 usable: cross fits, self not
    assert m.allocate_slots(req(), 4, ENC) is None
    assert m.get_num_free_blocks() == 94 and m.get_block_ids("r") == ([], [])
    m2 = KVCacheManager(16, 1 + 95, is_encoder_decoder=True)
    assert m2.allocate_slots(req(), 4, ENC) is not None and m2.get_num_free_blocks() == 0


def test_second_request_waits_until_first_frees():
    m = KVCacheManager(16, 1 + 100, is_encoder_decoder=True)
    a, b = req("a"), req("b")
    assert m.allocate_slots(a, 4, ENC) is not None
    assert m.allocate_slots(b, 4, ENC) is None and m.get_num_free_blocks() == 5
    m.free(a)
    assert m.allocate_slots(b, 4, ENC) is not None


def test_decoder_only_never_allocates_cross_blocks():
    m = KVCacheManager(16, 50, is_encoder_decoder=False)
    r = req(n=40)
    assert m.allocate_slots(r, 40).get_block_ids() == ([1, 2, 3], [])
    with pytest.raises(InvalidInputError) as e:
        m.allocate_slots(r, 1, ENC)
    assert e.value.field == "num_encoder_tokens"


def test_bad_arguments_and_free_of_unknown():
    m = KVCacheManager(16, 50, is_encoder_decoder=True)
    with pytest.raises(InvalidInputError, match="num_new_tokens"):
        m.allocate_slots(req(), 0)
    with pytest.raises(InvalidInputError, match="num_encoder_tokens"):
        m.allocate_slots(req(), 1, -5)
    m.free("never-allocated")  # abort before admission: no-op
    assert m.get_num_free_blocks() == 49
