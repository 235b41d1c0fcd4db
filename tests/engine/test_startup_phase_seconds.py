"""The start-up phases that isolate PR #17935's mechanism (issue 42): per phase the HF-processor,
hashing and dummy-building seconds (``StartupReport.mm_seconds_by_phase``), the profile run's encoder
forward alone (``profile_encoder_forward_s``). Behaviour, not timings: the parts are where the work
was counted, disjoint (sum <= their phase), and the forward is a part of ``profile_run``."""
import pytest

import refimpl.testing as rt
from refimpl.engine.core import EngineCore, StartupReport
from refimpl.engine.startup_plan import CHECK_PHASE
from refimpl.engine.startup_report import MM_PARTS
from refimpl.multimodal import MultiModalRegistry
from refimpl.variants import STARTUP_VARIANTS

SMALL = dict(max_model_len=4096, max_num_batched_tokens=4096, mm_processor_kwargs={"max_pixels": 28 * 28 * 64})


def qwen_report(row: str) -> StartupReport:
    """``shape-only`` by its row record: the bare name warns that its meaning changed in 0.2.0."""
    reg = MultiModalRegistry()
    variant = STARTUP_VARIANTS[row] if row == "shape-only" else row
    return EngineCore(rt.create_vllm_config(rt.QWEN, mm_registry=reg, **SMALL), variant).report


@pytest.mark.slow
@pytest.mark.parametrize("row", ["0.8.5", "0.9.0", "0.11.1", "shape-only"])
def test_the_parts_of_each_phase_are_within_it_and_where_the_work_was_counted(row):
    rep = qwen_report(row)
    assert list(rep.mm_seconds_by_phase) == [p for p in rep.phases if p != CHECK_PHASE]
    for phase, parts in rep.mm_seconds_by_phase.items():
        assert tuple(parts) == MM_PARTS and all(x >= 0.0 for x in parts.values()), (phase, parts)
        assert sum(parts.values()) <= rep.phases[phase], (phase, parts, rep.phases[phase])
        if rep.passes_by_phase[phase]:  # an HF pass with items took seconds in this phase
            assert parts["hf_processor_s"] > 0.0, phase
    assert sum(p["hf_processor_s"] for p in rep.mm_seconds_by_phase.values()) > 0.0 or rep.hf_processor_calls == 0
    by_phase = rt.processing_cache_by_phase(rt.create_vllm_config(rt.QWEN, **SMALL), row) \
        if row != "shape-only" else {}
    for phase, counts in by_phase.items():
        looked_up = counts["cache_hits"] + counts["cache_misses"]
        if looked_up:  # a cache lookup hashes its items first
            assert rep.mm_seconds_by_phase[phase]["hash_s"] > 0.0, phase


@pytest.mark.slow
def test_0_8_5_hashes_nothing_and_0_9_0_hashes_where_it_caches():
    """PR #17935's mechanism, seen in seconds: 0.8.5 has no cache during profiling (no hash), 0.9.0
    hashes in the phases whose lookups hit or miss its cache."""
    old, new = qwen_report("0.8.5"), qwen_report("0.9.0")
    assert all(p["hash_s"] == 0.0 for p in old.mm_seconds_by_phase.values())
    assert new.mm_seconds_by_phase["runner_init"]["hash_s"] > 0.0
    assert new.mm_seconds_by_phase["profile_run"]["hash_s"] > 0.0


@pytest.mark.slow
@pytest.mark.parametrize("model", ["qwen", "whisper-tiny"])
def test_the_encoder_forward_is_timed_alone_within_the_profile_run(model):
    if model == "qwen":
        rep = qwen_report("0.9.0")
    else:
        reg = MultiModalRegistry()
        rep = EngineCore(rt.create_vllm_config(model, max_num_seqs=2, mm_registry=reg), "refimpl").report
    assert rep.profile_encoder_tokens > 0
    assert 0.0 < rep.profile_encoder_forward_s <= rep.phases["profile_run"]
    # the forward is not the multimodal preprocessing: both fit in the phase together
    assert rep.profile_encoder_forward_s + sum(rep.mm_seconds_by_phase["profile_run"].values()) \
        <= rep.phases["profile_run"]
