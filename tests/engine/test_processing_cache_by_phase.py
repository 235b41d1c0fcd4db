"""processing_cache_by_phase: the processing cache per start-up phase in vLLM's order, read from
the StartupPlan, equals what a real EngineCore start-up of the row counts (its HF calls, cache
hits, misses, bytes by phase and after the reset)."""
import pytest

import refimpl.testing as rt
from refimpl.engine.core import EngineCore
from refimpl.multimodal import MultiModalRegistry

SMALL = dict(max_model_len=4096, max_num_batched_tokens=4096, mm_processor_kwargs={"max_pixels": 28 * 28 * 64})


def config(registry=None, **kw):
    return rt.create_vllm_config(rt.QWEN, mm_registry=registry or MultiModalRegistry(), **{**SMALL, **kw})


@pytest.mark.slow
@pytest.mark.parametrize("row", ["0.8.5", "0.9.0", "0.11.1"])
def test_the_phases_add_up_to_a_real_start_up(row):
    reg = MultiModalRegistry()
    with rt.count_hf_passes(reg) as passes:
        engine = EngineCore(config(reg), row)
    by_phase = rt.processing_cache_by_phase(config(), row)
    assert tuple(by_phase) == rt.CACHE_PHASES
    assert all(tuple(rec) == rt.CACHE_COUNTERS for rec in by_phase.values())
    total = {c: sum(rec[c] for rec in by_phase.values()) for c in ("hf_calls_with_items", "hf_calls_text_only",
                                                                     "cache_hits", "cache_misses")}
    rep = engine.report
    assert total["hf_calls_with_items"] == passes.with_items == rep.hf_mm_passes
    assert total["hf_calls_text_only"] == passes.without_items
    assert (total["cache_hits"], total["cache_misses"]) == (rep.cache_hits, rep.cache_misses)
    for phase in rt.CACHE_PHASES[:-1]:
        assert by_phase[phase]["cache_bytes"] == rep.cache_bytes_by_phase[phase], phase
        assert by_phase[phase]["hf_calls_with_items"] == rep.passes_by_phase[phase], phase
    assert by_phase["reset_mm_cache"]["cache_bytes"] == rep.cache_bytes_after_reset


def test_0_9_0_caches_from_the_first_lookup_and_the_reset_empties_it():
    """PR #17935: the runner's lookup misses and stores one item per modality, the profile run and
    the scheduler hit them; the reset leaves nothing. 0.8.5 caches nothing and has no reset."""
    c = rt.processing_cache_by_phase(config(), "0.9.0")
    assert (c["runner_init"]["cache_misses"], c["runner_init"]["cache_stores"]) == (2, 2)
    assert c["runner_init"]["cache_entries_by_modality"] == {"image": 1, "video": 1}
    assert c["scheduler_init"]["cache_hits"] == 2 and c["scheduler_init"]["hf_calls_with_items"] == 0
    assert c["scheduler_init"]["cache_entries"] == 2 and c["scheduler_init"]["cache_bytes"] > 0
    assert c["reset_mm_cache"] == {**dict.fromkeys(rt.CACHE_COUNTERS, 0), "cache_entries_by_modality": {}}
    old = rt.processing_cache_by_phase(config(), "0.8.5")
    assert [old[p]["hf_calls_with_items"] for p in ("runner_init", "profile_run", "scheduler_init")] == [1, 2, 1]
    assert all(rec[k] == 0 for rec in old.values() for k in ("cache_hits", "cache_misses", "cache_stores",
                                                             "cache_entries", "cache_bytes"))


def test_the_user_s_cache_off_is_ignored_by_0_9_0_and_honoured_from_0_10_2():
    off = config(disable_mm_preprocessor_cache=True)
    assert rt.processing_cache_by_phase(off, "0.9.0") == rt.processing_cache_by_phase(config(), "0.9.0")
    assert all(rec["cache_entries"] == 0 for rec in rt.processing_cache_by_phase(off, "0.10.2").values())
