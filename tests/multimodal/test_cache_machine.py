"""The processing cache as a hypothesis state machine against a reference LRU (the thread tests are in tests/multimodal/test_cache_properties.py)."""
from __future__ import annotations

from collections import OrderedDict

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from refimpl.config import ModelConfig
from refimpl.multimodal import MultiModalRegistry, ProcessingCache
from tests.multimodal.utils import IMG_SIZES, QWEN_SMALL, _same_output, _val, reference_outputs


class CacheMachine(RuleBasedStateMachine):
    """Reference model: ``self.model`` OrderedDict key -> size in LRU order (oldest first)."""

    @initialize(cap=st.integers(0, 400_000))
    def setup(self, cap):
        self.images, self.refs = reference_outputs()
        self.reg = MultiModalRegistry()
        self.proc = self.reg.create_processor(ModelConfig("qwen2.5-vl-3b", **QWEN_SMALL))
        self.cache: ProcessingCache = self.reg.processing_cache
        self.cache.set_capacity(cap)
        self.model: OrderedDict[str, int] = OrderedDict()
        self.tags: dict[str, int] = {}
        self.next_tag = 0

    # -- model helpers --------------------------------------------------------------------
    def _model_put(self, key: str, size: int) -> bool:
        if size > self.cache.capacity_bytes:
            return False
        self.model.pop(key, None)
        while self.model and sum(self.model.values()) + size > self.cache.capacity_bytes:
            self.model.popitem(last=False)
        self.model[key] = size
        return True

    def _drop_dead_tags(self):
        self.tags = {k: t for k, t in self.tags.items() if k in self.model}

    # -- rules ----------------------------------------------------------------------------
    @rule(k=st.integers(0, 12), size=st.one_of(st.integers(0, 150_000), st.integers(390_000, 500_000)))
    def put(self, k, size):
        key, tag = f"k{k}", self.next_tag
        self.next_tag += 1
        before = (list(self.cache._data), self.cache.bytes, self.cache.evictions)
        stored = self.cache.put(key, _val(size, tag))
        assert stored == self._model_put(key, size + 8)
        if stored:
            self.tags[key] = tag
        else:  # oversized: refused, nothing evicted, nothing changed
            assert size + 8 > self.cache.capacity_bytes
            assert (list(self.cache._data), self.cache.bytes, self.cache.evictions) == before
        self._drop_dead_tags()

    @rule(k=st.integers(0, 12))
    def get(self, k):
        key = f"k{k}"
        v = self.cache.get(key)
        assert (v is not None) == (key in self.model)
        if v is not None:
            assert int(v["tag"]) == self.tags[key]  # its own value, never another key's
            assert v["x"].numel() + 8 == self.model[key]
            self.model.move_to_end(key)

    @rule(i=st.integers(0, len(IMG_SIZES) - 1))
    def process_image(self, i):
        out = self.proc.apply("<|image_pad|>", {"image": self.images[i]})
        _same_output(out, self.refs[i])  # hit or miss: equal to a fresh HF call
        h = out.mm_hashes["image"][0]
        size = sum(t.nbytes for t in out.mm_kwargs["image"][0].values())
        if h in self.model:
            self.model.move_to_end(h)
        else:
            self._model_put(h, size)
        self._drop_dead_tags()

    @rule(cap=st.integers(0, 400_000))
    def set_capacity(self, cap):
        self.cache.set_capacity(cap)
        while self.model and sum(self.model.values()) > cap:
            self.model.popitem(last=False)
        self._drop_dead_tags()

    @precondition(lambda self: self.model)
    @rule()
    def reset(self):
        self.reg.reset_processor_cache()
        self.model.clear()
        self.tags.clear()

    # -- invariants -----------------------------------------------------------------------
    @invariant()
    def bound_and_order(self):
        if not hasattr(self, "cache"):
            return
        c = self.cache
        assert c.bytes <= c.capacity_bytes
        assert c.bytes == sum(sz for _, sz in c._data.values())
        assert c.bytes == sum(t.nbytes for v, _ in c._data.values() for t in v.values())
        assert list(c._data) == list(self.model), "LRU order differs from the model"


TestCacheMachine = pytest.mark.slow(CacheMachine.TestCase)
TestCacheMachine.settings = settings(max_examples=25, stateful_step_count=20, deadline=None,
                                     suppress_health_check=[HealthCheck.too_slow])
