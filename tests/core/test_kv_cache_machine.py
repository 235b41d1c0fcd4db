"""The KV cache manager as a hypothesis state machine (the example tests are in tests/core/test_kv_cache_manager.py)."""
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from refimpl.core.kv_cache_manager import KVCacheManager, cdiv
from refimpl.request import Request

ENC = 1500


def req(rid="r", n=4):
    return Request(rid, list(range(1, n + 1)))


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
