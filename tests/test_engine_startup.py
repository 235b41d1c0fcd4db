"""Engine start-up (vLLM PR #17935): pass counts per variant, identical budgets, reset, faults.

Qwen2.5-VL at the small model scale (real processor) with video off and the processor's
``max_pixels`` at 1024 patches of 28x28 (a 1024-token dummy image instead of the 16384-token
3584x3584 one; 2048 batched tokens): the pass counts, budgets and reset do not depend on the
image size, and each start-up costs ~1-3 s instead of ~6-17 s. The real-size worst-case image
is processed in tests/test_dummy_data.py and tests/test_shape_only.py.
"""
import pytest

from refimpl.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
from refimpl.engine.core import EngineCore
from refimpl.errors import UnknownVariantError
from refimpl.multimodal import MULTIMODAL_REGISTRY
from refimpl.variants import STARTUP_VARIANTS, get_startup_variant

# The pass table of docs/background.md, image only: passes #1 (runner_init), #2 and #3 (profile_run), #5
# (scheduler_init). The dummy image does not depend on seq_len, so #3 hits what #1 stored.

pytestmark = pytest.mark.slow  # engine start-ups

EXPECTED_PASSES = {
    "no-cache": {"runner_init": 1, "profile_run": 2, "scheduler_init": 1},
    "cache-reset": {"runner_init": 1, "profile_run": 0, "scheduler_init": 0},
    "formula": {"runner_init": 0, "profile_run": 1, "scheduler_init": 0},
    "shape-only": {"runner_init": 0, "profile_run": 0, "scheduler_init": 0},
}


IMAGE_TOKENS = 1024  # max_pixels / (28 * 28): Qwen2.5-VL merges 2x2 patches of 14 px
BATCHED_TOKENS = 2048


def qwen_config(**kw):
    mc = ModelConfig("qwen2.5-vl-3b", max_model_len=4096, device="cpu",
                     limit_mm_per_prompt={"video": 0},
                     mm_processor_kwargs={"max_pixels": 28 * 28 * IMAGE_TOKENS}, **kw)
    return VllmConfig(mc, SchedulerConfig(max_num_seqs=8, max_num_batched_tokens=BATCHED_TOKENS),
                      CacheConfig())


@pytest.fixture(scope="module")
def startups():
    return {v: EngineCore(qwen_config(), v).report for v in EXPECTED_PASSES}


@pytest.mark.parametrize("variant", list(EXPECTED_PASSES))
def test_pass_counts_match_background_table(startups, variant):
    rep = startups[variant]
    got = {k: rep.passes_by_phase[k] for k in EXPECTED_PASSES[variant]}
    assert got == EXPECTED_PASSES[variant]
    assert rep.hf_mm_passes == sum(EXPECTED_PASSES[variant].values())


def test_every_variant_gives_identical_budgets(startups):
    budgets = {(r.encoder_compute_budget, r.encoder_cache_size) for r in startups.values()}
    assert budgets == {(BATCHED_TOKENS, BATCHED_TOKENS)}  # max(batched tokens, largest item)
    assert {tuple(sorted(r.max_tokens_per_item.items())) for r in startups.values()} == {
        (("image", IMAGE_TOKENS),)}


def test_reset_empties_the_cache(startups):
    assert startups["cache-reset"].cache_bytes_before_reset > 0
    assert startups["cache-reset"].cache_bytes_after_reset == 0
    assert startups["formula"].cache_bytes_after_reset == 0
    assert startups["no-cache"].cache_bytes_before_reset == 0  # profiling bypassed the cache
    assert "reset_mm_cache" in startups["cache-reset"].phases


def test_cache_hits_only_with_cache(startups):
    assert startups["no-cache"].cache_hits == 0
    assert startups["cache-reset"].cache_hits >= 3


def test_second_startup_in_same_process_is_identical(startups):
    again = EngineCore(qwen_config(), "cache-reset").report
    first = startups["cache-reset"]
    assert again.passes_by_phase == first.passes_by_phase
    assert (again.encoder_compute_budget, again.encoder_cache_size) == (
        first.encoder_compute_budget, first.encoder_cache_size)


def test_failed_startup_leaves_no_cache_filled(monkeypatch):
    from refimpl.worker import gpu_model_runner
    def boom(self):
        raise RuntimeError("capture failed")
    monkeypatch.setattr(gpu_model_runner.GPUModelRunner, "capture_model", boom)
    with pytest.raises(RuntimeError, match="capture failed"):
        EngineCore(qwen_config(), "cache-reset")
    assert MULTIMODAL_REGISTRY.cache_bytes() == 0


def test_unknown_variant_named():
    with pytest.raises(UnknownVariantError, match="variant"):
        get_startup_variant("fast")


def test_variant_records_name_their_switches():
    no_cache, reset, formula = (STARTUP_VARIANTS[v] for v in ("no-cache", "cache-reset", "formula"))
    assert not no_cache.cache_during_profiling and not no_cache.reset_at_end
    assert reset.cache_during_profiling and reset.reset_at_end and not reset.max_tokens_by_formula
    assert formula.max_tokens_by_formula
    assert all(v.reproduces for v in STARTUP_VARIANTS.values())
