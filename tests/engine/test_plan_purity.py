"""The StartupPlan and a dry MultiModalBudget are pure by what they build: no HF processor, feature
extractor or tokenizer constructed, no process-wide cache read or filled (issue 43: a plan that built
the HF processor moved its cost out of runner_init and out of every timed phase)."""
import functools

import pytest
import transformers

from refimpl import tokenizer
from refimpl.config import ModelConfig, SchedulerConfig, VllmConfig
from refimpl.engine.startup_plan import StartupPlan
from refimpl.multimodal import MULTIMODAL_REGISTRY, MultiModalRegistry, qwen2_5_vl, whisper, worst_case
from refimpl.multimodal.encoder_budget import MultiModalBudget
from refimpl.variants import STARTUP_VARIANTS

BUILT = ("Qwen2_5_VLProcessor", "Qwen2VLImageProcessor", "Qwen2VLVideoProcessor", "WhisperProcessor",
         "WhisperFeatureExtractor", "PreTrainedTokenizerFast")
CACHES = {"qwen build_hf_processor": qwen2_5_vl.build_hf_processor, "whisper build_hf_processor": whisper.build_hf_processor,
          "get_tokenizer": tokenizer.get_tokenizer, "worst_case_image_size": worst_case.worst_case_image_size}


@pytest.fixture
def built(monkeypatch):
    """Names of the HF classes constructed while the test runs."""
    names: list[str] = []
    for name in BUILT:
        cls = getattr(transformers, name)
        orig = cls.__init__

        @functools.wraps(orig)  # the signature stays: ProcessorMixin reads it
        def init(self, *a, _orig=orig, _name=name, **k):
            names.append(_name)
            _orig(self, *a, **k)
        monkeypatch.setattr(cls, "__init__", init)
    return names


def _state():
    return ({k: (f.cache_info().hits, f.cache_info().misses, f.cache_info().currsize) for k, f in CACHES.items()},
            MULTIMODAL_REGISTRY.cache_bytes(), MULTIMODAL_REGISTRY.stats.hf_processor_calls)


def test_the_counter_sees_a_construction(built):
    """The fixture does count: a processor of settings never built before is constructed."""
    qwen2_5_vl.build_hf_processor("qwen2.5-vl-3b", (("max_pixels", 28 * 28 * 41),))
    assert "Qwen2_5_VLProcessor" in built and "Qwen2VLImageProcessor" in built


@pytest.mark.slow
@pytest.mark.parametrize("row", list(STARTUP_VARIANTS))
def test_the_plan_builds_no_processor_and_fills_no_cache(built, row):
    # pixel settings no other test uses, so that a cached processor cannot hide a construction
    qwen = ModelConfig("qwen2.5-vl-3b", max_model_len=32768, device="cpu",
                       mm_processor_kwargs={"max_pixels": 28 * 28 * 43})
    before = _state()
    plans = [StartupPlan.build(VllmConfig(qwen), row), StartupPlan.budget(qwen, row, 3),
             StartupPlan.build(VllmConfig(ModelConfig("whisper-tiny", device="cpu")), row)]
    assert built == [] and _state() == before
    assert plans[0].profile_item is not None and plans[0].max_tokens_per_item["video"] > 0


@pytest.mark.slow
def test_a_dry_budget_equals_the_engine_s(built):
    """Dry sizes (configs) and the runner's (the HF processor) agree, pixels set or not."""
    for kw in ({}, {"max_pixels": 28 * 28 * 47, "min_pixels": 28 * 28 * 4}):
        mc = ModelConfig("qwen2.5-vl-3b", max_model_len=8192, device="cpu", mm_processor_kwargs=kw,
                         limit_mm_per_prompt={"image": 2, "video": 1})
        for row in ("0.9.0", "0.11.1", "refimpl"):
            n = len(built)
            dry = MultiModalBudget(mc, SchedulerConfig(), None, row, dry=True)
            assert len(built) == n
            mc.mm_switches = STARTUP_VARIANTS[row].mm_switches  # as EngineCore sets them
            wet = MultiModalBudget(mc, SchedulerConfig(), MultiModalRegistry(0), row)
            assert dry.as_dict() == wet.as_dict(), (kw, row)
    assert "Qwen2_5_VLProcessor" in built  # the engine's budget does build it (the formula reads its sizes)
