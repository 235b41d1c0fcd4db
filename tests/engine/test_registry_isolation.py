"""Every component uses the registry it is given (issue 19; the PR #17935 kind of bug): an
engine built on a private MultiModalRegistry counts the same HF passes per phase and leaves
the same bytes after its reset as one on the global registry, and the global registry's
cache and counters stay as they were. The pass-count oracle (refimpl.testing) agrees with
both without building an engine.

Qwen2.5-VL at test size with video on (images of 64 tokens, 4096-token context, 256 batched
tokens): vLLM 0.9.0's profile run then builds its dummy video for 256 tokens (8 frames), not
the lookup's 16 (the frame cap), so the 0.9.0 row does one pass in profile_run as well.
"""
import pickle

import numpy as np
import pytest
import torch

from refimpl.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
from refimpl.engine.core import EngineCore
from refimpl.engine.llm_engine import LLMEngine
from refimpl.multimodal import MULTIMODAL_REGISTRY, MultiModalRegistry
from refimpl.testing import FakeRegistry, fresh_registry, hf_passes_by_phase

pytestmark = pytest.mark.slow  # engine start-ups per row on two registries

VARIANTS = ("0.8.5", "0.9.0", "0.9.0+#19756", "refimpl")


def qwen_config(mm_registry=None):
    mc = ModelConfig("qwen2.5-vl-3b", max_model_len=4096, device="cpu",
                     mm_processor_kwargs={"max_pixels": 28 * 28 * 64})
    return VllmConfig(mc, SchedulerConfig(max_num_seqs=8, max_num_batched_tokens=256), CacheConfig(),
                      mm_registry=mm_registry)


def summary(core: EngineCore) -> dict:
    r = core.report
    return dict(passes=r.passes_by_phase, hf_mm_passes=r.hf_mm_passes, hits=r.cache_hits,
                before=r.cache_bytes_before_reset, after=r.cache_bytes_after_reset,
                budget=(r.encoder_compute_budget, r.encoder_cache_size), max_tokens=r.max_tokens_per_item,
                blocks=r.num_gpu_blocks)


def global_state() -> tuple:
    c = MULTIMODAL_REGISTRY.processing_cache
    return c.order, c.stats(), MULTIMODAL_REGISTRY.stats.as_dict()


@pytest.fixture(scope="module")
def runs():
    out: dict = {v: {} for v in VARIANTS}
    with fresh_registry():
        for v in VARIANTS:
            out[v]["global"] = summary(EngineCore(qwen_config(), v))
    with fresh_registry():
        # something of the user's own in the global cache, which a private engine must not touch
        proc = MULTIMODAL_REGISTRY.create_processor(qwen_config().model_config)
        proc.apply("<|image_pad|>", {"image": np.full((40, 60, 3), 9, np.uint8)})
        for v in VARIANTS:
            before = global_state()
            private = MultiModalRegistry()
            out[v].update(private=summary(EngineCore(qwen_config(private), v)),
                          untouched=global_state() == before, private_stats=private.stats.as_dict())
    return out


@pytest.mark.parametrize("variant", VARIANTS)
def test_private_registry_equals_global(runs, variant):
    r = runs[variant]
    assert r["private"] == r["global"]
    assert r["private_stats"]["hf_mm_passes"] == r["private"]["hf_mm_passes"] > 0  # counted where it ran
    assert r["untouched"], "building on a private registry changed the global one"


def test_pass_counts_per_variant(runs):
    """0.8.5 processes at every pass (4); 0.9.0 hits at #2 and #5 (#3's video differs from
    #1's); the formula (PR #19756, and refimpl) processes only #3."""
    assert {v: runs[v]["global"]["hf_mm_passes"] for v in VARIANTS} == {"0.8.5": 4, "0.9.0": 2,
                                                                      "0.9.0+#19756": 1, "refimpl": 1}
    assert runs["0.9.0"]["global"]["before"] > 0 == runs["0.9.0"]["global"]["after"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_pass_oracle_equals_engine(runs, variant):
    assert hf_passes_by_phase(qwen_config(), variant) == runs[variant]["global"]["passes"]


def test_whisper_config_reads_the_registry_only_under_the_0_10_2_rows():
    mc = lambda: ModelConfig("whisper-tiny", device="cpu")  # noqa: E731
    for variant, calls in (("0.10.2", 1), ("0.10.2+#24866", 1), ("0.10.2+#24989", 1), ("0.11.0", 0),
                           ("0.13.0", 0), ("0.14.0", 0), ("audios-per-step", 0)):
        reg = FakeRegistry()
        cfg = VllmConfig(mc(), encoder_len_variant=variant, mm_registry=reg)
        assert reg.calls == calls, variant
        assert cfg.scheduler_config.encoder_len_per_item == 1500
    # the config's value is the registry's own answer (one real, uncached pass)
    assert MultiModalRegistry().get_encdec_max_encoder_len(mc()) == 1500


def test_whisper_engine_on_a_private_registry_leaves_the_global_alone():
    before = global_state()
    reg = MultiModalRegistry()
    engine = LLMEngine(VllmConfig(ModelConfig("whisper-tiny", device="cpu"), SchedulerConfig(max_num_seqs=2),
                                  CacheConfig(num_gpu_blocks=300), encoder_len_variant="0.10.2",
                                  mm_registry=reg), process_mode="inproc")
    engine.add_request("a", {"multi_modal_data": {"audio": np.zeros(1600, np.float32)}})
    while engine.has_unfinished_requests():
        engine.step()
    assert reg.stats.encdec_calls > 0 and reg.stats.hf_mm_passes > 0
    assert engine.scheduler.vllm_config.get_mm_registry() is reg
    assert global_state() == before


def test_registry_does_not_travel_with_a_pickled_config():
    cfg = pickle.loads(pickle.dumps(qwen_config(MultiModalRegistry())))
    assert cfg.mm_registry is None and cfg.get_mm_registry() is MULTIMODAL_REGISTRY


def test_fresh_registry_empties_and_restores_the_global_one():
    with fresh_registry():  # this test's own global state
        MULTIMODAL_REGISTRY.processing_cache.put("mine", {"x": torch.zeros(4)})
        MULTIMODAL_REGISTRY.stats.hf_mm_passes = 3
        cache, before = MULTIMODAL_REGISTRY.processing_cache, global_state()
        with fresh_registry() as reg:
            assert reg is MULTIMODAL_REGISTRY and len(reg.processing_cache) == 0 and reg.stats.hf_mm_passes == 0
            reg.processing_cache.put("other", {"x": torch.zeros(8)})
            reg.stats.hf_mm_passes += 5
        assert MULTIMODAL_REGISTRY.processing_cache is cache and global_state() == before
        assert MULTIMODAL_REGISTRY.processing_cache.order == ("mine",)
