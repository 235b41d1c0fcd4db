"""Start-up measured whole: every second of ``EngineCore()`` falls in a named phase (issue 43: the
StartupPlan built in ``EngineCore.__init__`` before the first phase took 1.13 s that no phase held)."""
import pytest

from refimpl.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
from refimpl.engine import core
from refimpl.engine.core import EngineCore
from refimpl.engine.startup_plan import CHECK_PHASE, PHASES, RESET_PHASE
from refimpl.multimodal import MultiModalRegistry, qwen2_5_vl


def _small(max_pixels: int) -> VllmConfig:
    mc = ModelConfig("qwen2.5-vl-3b", max_model_len=1024, device="cpu", mm_processor_kwargs={"max_pixels": max_pixels})
    return VllmConfig(mc, SchedulerConfig(max_num_seqs=4, max_num_batched_tokens=512), CacheConfig())


@pytest.mark.slow
def test_the_phases_sum_to_the_wall_of_engine_core():
    import time
    for row in ("0.8.5", "0.9.0", "0.11.1"):
        cfg, reg = _small(28 * 28 * 16), MultiModalRegistry()
        t0 = time.perf_counter()
        engine = EngineCore(cfg, row, mm_registry=reg)  # held: freeing an engine is no part of EngineCore()
        wall = time.perf_counter() - t0
        rep = engine.report
        assert list(rep.phases) == [CHECK_PHASE, *PHASES, *([RESET_PHASE] if row != "0.8.5" else [])]
        assert rep.wall_s <= wall and abs(rep.total_s - wall) <= 0.02 * wall, (row, rep.phases, wall)
        del engine


@pytest.mark.slow
def test_the_checks_build_no_processor_the_runner_does(monkeypatch):
    """Cold, the HF processor is built in runner_init (pass #1 or the formula), not before it."""
    seen = {}
    check = core.check_startup_memory

    def spy(*a, **k):
        out = check(*a, **k)
        seen["after checks"] = qwen2_5_vl.build_hf_processor.cache_info().currsize
        return out
    monkeypatch.setattr(core, "check_startup_memory", spy)
    init = core.GPUModelRunner.__init__

    def runner_init(self, *a, **k):
        init(self, *a, **k)
        seen["after runner_init"] = qwen2_5_vl.build_hf_processor.cache_info().currsize
    monkeypatch.setattr(core.GPUModelRunner, "__init__", runner_init)
    for row in ("0.8.5", "0.11.1"):  # a processing lookup, a formula
        qwen2_5_vl.build_hf_processor.cache_clear()
        EngineCore(_small(28 * 28 * 20), row, mm_registry=MultiModalRegistry())
        assert seen == {"after checks": 0, "after runner_init": 1}, row
