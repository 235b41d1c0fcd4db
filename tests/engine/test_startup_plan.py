"""The StartupPlan equals what a real EngineCore does: for every start-up row and a grid of
settings (max_model_len, limits, max_pixels, cache size), HF passes per phase, items, hits and
misses, cache bytes after each phase and before and after the reset, budgets, the profile run's
encoder tokens (``StartupPlan.expected_report`` against the StartupReport), or the same error.

Real start-ups of Qwen2.5-VL at the small model scale with small items (16 or 64 cells of 28x28
per image or frame: ~1-3 s each). The fast suite runs each row once at a setting of the grid
(the ladder's rows spread over it); every row over the whole grid and Whisper's registry reads are marked slow.
"""
import itertools

import pytest

from refimpl.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
from refimpl.engine.core import EngineCore
from refimpl.engine.startup_memory import peak_bytes, peak_bytes_by_holder
from refimpl.engine.startup_plan import CHECK_PHASE, PHASES, RESET_PHASE, StartupPlan
from refimpl.errors import CacheItemTooLargeError
from refimpl.multimodal import MultiModalRegistry
from refimpl.variants import LADDER, STARTUP_VARIANTS

ROWS = list(STARTUP_VARIANTS)
# (max_model_len, limit_mm_per_prompt, cells per image or frame, mm_processor_cache_gb, disabled)
GRID = [(1024, {}, 16, 4.0, False), (2048, {"video": 0}, 64, 4.0, False),
        (1024, {}, 64, 1e-6, False),               # smaller than one item: skipped or raised
        (1024, {"image": 0}, 16, 4.0, True),       # the user turned the cache off
        (2048, {"image": 2, "video": 1}, 16, 0.0, False),
        (1024, {}, 16, 0.012, False)]              # room for some items: the LRU evicts


def qwen(max_model_len, limits, cells, gb, disabled) -> VllmConfig:
    mc = ModelConfig("qwen2.5-vl-3b", max_model_len=max_model_len, device="cpu", limit_mm_per_prompt=limits,
                     mm_processor_kwargs={"max_pixels": 28 * 28 * cells}, mm_processor_cache_gb=gb,
                     disable_mm_preprocessor_cache=disabled)
    return VllmConfig(mc, SchedulerConfig(max_num_seqs=4, max_num_batched_tokens=512), CacheConfig())


def check(vc: VllmConfig, row: str) -> StartupPlan:
    plan = StartupPlan.build(vc, row)
    if plan.error is not None:
        with pytest.raises(CacheItemTooLargeError) as e:
            EngineCore(vc, STARTUP_VARIANTS[row], mm_registry=MultiModalRegistry())
        assert str(e.value) == str(plan.error)
        return plan
    core = EngineCore(vc, STARTUP_VARIANTS[row], mm_registry=MultiModalRegistry())  # the row: no name to warn about
    rep = core.report
    assert {k: getattr(rep, k) for k in plan.expected_report()} == plan.expected_report(), row
    assert plan.mismatches(rep) == []  # the engine's step-by-step check, here and not inside it
    assert list(rep.phases) == [CHECK_PHASE, *plan.phases]
    return plan


@pytest.mark.slow
@pytest.mark.parametrize("row", LADDER)
def test_plan_equals_the_engine_each_row_at_a_setting(row):
    check(qwen(*GRID[LADDER.index(row) % len(GRID)]), row)


@pytest.mark.slow
@pytest.mark.parametrize("row,setting", list(itertools.product(ROWS, range(len(GRID)))))
def test_plan_equals_the_engine_over_the_grid(row, setting):
    check(qwen(*GRID[setting]), row)


@pytest.mark.slow
@pytest.mark.parametrize("row", ["0.8.5", "0.9.0", "refimpl"])
def test_plan_equals_the_engine_for_whisper_with_registry_reads(row):
    """0.10.2's encoder-length sites: the KV check's reads (layers + 1) and the runner's, one HF pass each."""
    plan = check(VllmConfig(ModelConfig("whisper-tiny", device="cpu"), encoder_len_variant="0.10.2"), row)
    assert plan.hf_passes_by_phase()["kv_cache_init"] == 4 + 1 + 1


def test_the_plan_is_pure_and_names_every_phase():
    """No HF pass, no cache entry in the registries it reads; the phases in EngineCore's order."""
    from refimpl.engine.startup_plan import REGISTRY
    from refimpl.multimodal import MULTIMODAL_REGISTRY
    before = (REGISTRY.stats.hf_processor_calls, MULTIMODAL_REGISTRY.stats.hf_processor_calls, MULTIMODAL_REGISTRY.cache_bytes())
    plan = StartupPlan.build(VllmConfig(ModelConfig("qwen2.5-vl-3b", device="cpu")), "0.9.0")
    assert (REGISTRY.stats.hf_processor_calls, MULTIMODAL_REGISTRY.stats.hf_processor_calls,
            MULTIMODAL_REGISTRY.cache_bytes()) == before
    assert plan.phases == (*PHASES, RESET_PHASE)
    video = next(i for i in plan.steps[0].items if i.modality == "video")
    assert (video.shape, video.dtype, video.nbytes) == ((12, 3584, 3584, 3), "int64", 12 * 3584 * 3584 * 3 * 8)
    assert plan.reset_frees()["P1 engine core (mp)"] == (plan.cache_bytes_before_reset, 0)  # reset_scope v0.9.0
    at, held = peak_bytes_by_holder(plan)
    assert held["hash copies"] == 3 * video.nbytes and peak_bytes(plan) == sum(held.values())
    image = next(i for i in plan.steps[0].items if i.modality == "image")
    assert plan.hash_copy_bytes(plan.steps[0]) == 3 * video.nbytes + 6 * image.nbytes  # hasher.HASH_COPIES


def test_an_engine_on_a_used_registry_differs_from_the_fresh_process_plan():
    """The plan is of a fresh process: an engine whose registry already holds an item is not what it
    describes, and the check that says so is the test's (the engine runs none and logs nothing)."""
    reg = MultiModalRegistry()
    reg.processing_cache.put("an earlier engine's item", {}, nbytes=1)
    rep = EngineCore(qwen(*GRID[1]), "0.9.0", mm_registry=reg).report
    assert any(m.startswith("cache_bytes_by_phase") for m in StartupPlan.build(qwen(*GRID[1]), "0.9.0").mismatches(rep))
    with pytest.deprecated_call():
        assert rep.plan_mismatches is None  # the old field: "not checked", always


def test_on_cuda_the_plan_leaves_kv_blocks_to_the_profile_run():
    """Found on the H200 (results/gpu-nvidia-h200/): CUDA sizes the KV cache from gpu_memory_utilization less
    the profile run's measured peak, so the plan names no block count (and no host KV bytes) and the
    engine's count is not called a mismatch; a user's num_gpu_blocks is still planned."""
    vc = qwen(*GRID[0])
    vc.model_config.device = "cuda"  # built on CPU, then pointed at a GPU the plan never touches
    plan = StartupPlan.build(vc, "refimpl")
    assert (plan.num_gpu_blocks, plan.kv_bytes, plan.expected_report()["num_gpu_blocks"]) == (None, 0, None)

    class Report:
        def __getattr__(self, k):
            return 48475 if k == "num_gpu_blocks" else plan.expected_report()[k]
    assert plan.mismatches(Report()) == []
    vc.cache_config.num_gpu_blocks = 204
    assert StartupPlan.build(vc, "refimpl").expected_report()["num_gpu_blocks"] == 204
