"""The mirrored input caches as a hypothesis state machine (the example tests are in tests/engine/test_mm_input_cache.py)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from refimpl.config import ModelConfig
from tests.engine.utils import Pair


def _clip(seed: int) -> np.ndarray:
    n = (4000, 6000, 8000, 3000, 5000)[seed]
    return np.random.default_rng(seed).normal(0, 0.1, n).astype(np.float32)


class MirrorMachine(RuleBasedStateMachine):
    """Requests of one clip (Whisper takes one; 5 distinct clips, capacity 2.5 items) through P0's processor,
    the P0 mirror, the wire and the P1 mirror; resets; aborts (which leave the mirrors alone)."""

    CLIPS = [_clip(i) for i in range(5)]
    FRESH: list = []

    def __init__(self):
        super().__init__()
        from refimpl.multimodal import MULTIMODAL_REGISTRY
        mc = ModelConfig("whisper-tiny", device="cpu", mm_processor_cache_gb=2.5 * 960_000 / (1 << 30))
        self.registry = MULTIMODAL_REGISTRY
        self.processor = MULTIMODAL_REGISTRY.create_processor(mc)
        self.registry.reset_processor_cache()
        if not MirrorMachine.FRESH:
            fresh = MULTIMODAL_REGISTRY.create_processor(mc, disable_cache=True)
            MirrorMachine.FRESH = [fresh.apply("", {"audio": [c]}).mm_kwargs["audio"][0]
                                   for c in self.CLIPS]
        self.pair = Pair(mc.mm_cache_bytes)
        self.in_flight: list[int] = []
        self.next_id = 0

    @rule(i=st.integers(0, 4))
    def request(self, i):
        mm = self.processor.apply("", {"audio": [self.CLIPS[i]]}, return_mm_hashes=True)
        (got,) = self.pair.send(mm.mm_kwargs["audio"], mm.mm_hashes["audio"])
        assert torch.equal(got["input_features"], self.FRESH[i]["input_features"])
        self.in_flight.append(self.next_id)
        self.next_id += 1

    @precondition(lambda self: self.in_flight)
    @rule(data=st.data())
    def abort(self, data):
        self.in_flight.remove(data.draw(st.sampled_from(self.in_flight)))

    @rule()
    def reset(self):
        self.in_flight.clear()  # the engine refuses a reset with requests in flight
        self.registry.reset_processor_cache()
        self.pair.reset()

    def teardown(self):
        self.registry.reset_processor_cache()  # leave the process-wide cache as found: empty

    @invariant()
    def mirrors_agree(self):
        assert self.pair.agree()
        assert self.pair.p0.bytes <= self.pair.p0.capacity_bytes


TestMirrorMachine = pytest.mark.slow(MirrorMachine.TestCase)
TestMirrorMachine.settings = settings(max_examples=6, stateful_step_count=12, deadline=None)


@pytest.mark.soak
def test_mirror_machine_soak():
    from hypothesis.stateful import run_state_machine_as_test
    run_state_machine_as_test(MirrorMachine, settings=settings(max_examples=200, stateful_step_count=30,
                                                               deadline=None))
