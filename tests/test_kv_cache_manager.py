"""KVCacheManager: cross-attention blocks exact and allocated once, all-or-nothing across
groups, no leak / double allocation (incl. a hypothesis state machine)."""
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

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


class KVManagerMachine(RuleBasedStateMachine):
    """Random admit / grow / finish / abort / preempt against a reference model."""

    @initialize(num_blocks=st.integers(96, 400), block_size=st.sampled_from([16, 32]),
                enc=st.sampled_from([ENC, ENC, 1, 16, 17, 1024]))
    def setup(self, num_blocks, block_size, enc):
        self.enc = enc  # cross-attention length: Whisper's 1500, or edge cases around a block
        self.m = KVCacheManager(block_size, num_blocks, is_encoder_decoder=True)
        self.bs, self.total = block_size, num_blocks - 1
        self.running: dict[str, Request] = {}
        self.tokens: dict[str, int] = {}  # decoder tokens with KV slots
        self.next_id = 0

    @rule(prompt=st.integers(1, 40))
    def admit(self, prompt):
        r = req(f"r{self.next_id}", prompt)
        self.next_id += 1
        free = self.m.get_num_free_blocks()
        need = cdiv(prompt, self.bs) + cdiv(self.enc, self.bs)
        out = self.m.allocate_slots(r, prompt, self.enc)
        assert (out is not None) == (need <= free)
        if out is None:
            assert self.m.get_num_free_blocks() == free
        else:
            self.running[r.request_id], self.tokens[r.request_id] = r, prompt

    @precondition(lambda self: self.running)
    @rule(data=st.data(), k=st.integers(1, 40))
    def grow(self, data, k):
        rid = data.draw(st.sampled_from(sorted(self.running)))
        r = self.running[rid]
        r.num_computed_tokens = self.tokens[rid]
        free = self.m.get_num_free_blocks()
        need = cdiv(self.tokens[rid] + k, self.bs) - cdiv(self.tokens[rid], self.bs)
        out = self.m.allocate_slots(r, k)
        assert (out is not None) == (need <= free)
        if out is None:
            assert self.m.get_num_free_blocks() == free
        else:
            assert len(out.get_block_ids()[0]) == need and out.get_block_ids()[1] == []
            self.tokens[rid] += k

    @precondition(lambda self: self.running)
    @rule(data=st.data(), how=st.sampled_from(["finish", "abort", "preempt"]))
    def release(self, data, how):
        rid = data.draw(st.sampled_from(sorted(self.running)))
        r = self.running.pop(rid)
        self.tokens.pop(rid)
        self.m.free(r)
        if how == "preempt":  # recompute: re-admitted later from scratch with its tokens
            r.num_computed_tokens = 0
            self.m.free(r)  # freeing twice is harmless: nothing is held any more
        assert self.m.get_block_ids(rid) == ([], [])

    @precondition(lambda self: self.running)
    @rule()
    def drain(self):
        """Finish everything: idle means every usable block is free with ref_cnt 0."""
        for r in list(self.running.values()):
            self.m.free(r)
        self.running.clear()
        self.tokens.clear()
        assert self.m.get_num_free_blocks() == self.total and self.m.num_blocks_held() == 0
        assert all(b.ref_cnt == 0 for b in self.m.block_pool.blocks)

    @invariant()
    def no_leak_no_double_allocation(self):
        if not hasattr(self, "m"):
            return
        ids = []
        for rid in self.running:
            s, c = self.m.get_block_ids(rid)
            assert len(c) == cdiv(self.enc, self.bs)
            assert len(s) == cdiv(self.tokens[rid], self.bs)
            ids += s + c
        assert len(ids) == len(set(ids)) and 0 not in ids
        assert len(ids) + self.m.get_num_free_blocks() == self.total
        assert all(b.ref_cnt == (b.block_id in set(ids)) for b in self.m.block_pool.blocks[1:])


TestKVManagerMachine = pytest.mark.slow(KVManagerMachine.TestCase)
TestKVManagerMachine.settings = settings(max_examples=40, stateful_step_count=30, deadline=None)
