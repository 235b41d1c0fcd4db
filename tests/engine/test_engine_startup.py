"""Engine start-up per row: HF passes per phase as the pass table computes them, the profiled
item, identical budgets, reset, a disabled cache, faults.

Real start-ups of Qwen2.5-VL at the small model scale (real processor) and a small context:
image only with ``max_pixels`` of 1024 patches of 28x28 (a 1024-token dummy image instead of
the 16384-token 3584x3584 one; ~1-3 s each) for every row, and image plus video (256-cell
frames, max_model_len 2048, 1024 batched tokens) for the rows where the video's frames decide
a pass. The expected passes come from the engine's StartupPlan (``hf_passes_by_phase``),
which docs/background.md's pass table also uses (tests/engine/test_release_rows.py).
"""
import dataclasses

import pytest

from refimpl.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
from refimpl.engine.core import EngineCore
from refimpl.engine.startup_plan import StartupPlan
from refimpl.errors import UnknownVariantError
from refimpl.multimodal import MULTIMODAL_REGISTRY
from refimpl.multimodal.worst_case import max_tokens_per_item
from refimpl.variants import STARTUP_VARIANTS, get_startup_variant

pytestmark = pytest.mark.slow  # engine start-ups

IMAGE_TOKENS = 1024  # max_pixels / (28 * 28): Qwen2.5-VL merges 2x2 patches of 14 px
BATCHED_TOKENS = 1024
# the kit's default with every lookup processed: the processing path of the per-item maximum
PROCESSED = dataclasses.replace(STARTUP_VARIANTS["refimpl"], name="refimpl-processed", formula_models=())


def qwen_config(**kw):
    mc = ModelConfig("qwen2.5-vl-3b", max_model_len=4096, device="cpu",
                     limit_mm_per_prompt={"video": 0},
                     mm_processor_kwargs={"max_pixels": 28 * 28 * IMAGE_TOKENS}, **kw)
    return VllmConfig(mc, SchedulerConfig(max_num_seqs=8, max_num_batched_tokens=BATCHED_TOKENS),
                      CacheConfig())


def video_config():
    mc = ModelConfig("qwen2.5-vl-3b", max_model_len=2048, device="cpu",
                     mm_processor_kwargs={"max_pixels": 28 * 28 * 256})
    return VllmConfig(mc, SchedulerConfig(max_num_seqs=8, max_num_batched_tokens=1024), CacheConfig())


@pytest.fixture(scope="module")
def startups():
    return {v: EngineCore(qwen_config(), row).report for v, row in STARTUP_VARIANTS.items()}  # rows: no warning


@pytest.fixture(scope="module")
def video_startups():
    return {v if isinstance(v, str) else v.name: EngineCore(video_config(), v).report
            for v in ("0.9.0", "0.11.0", "refimpl", STARTUP_VARIANTS["shape-only"], PROCESSED)}


@pytest.mark.parametrize("variant", list(STARTUP_VARIANTS))
def test_pass_counts_match_the_pass_table(startups, variant):
    cfg, rep = qwen_config(), startups[variant]
    want = StartupPlan.build(cfg, variant).hf_passes_by_phase()
    assert rep.passes_by_phase == want
    assert rep.hf_mm_passes == sum(want.values())


def test_pass_counts_with_video_match_the_pass_table(video_startups):
    cfg = video_config()
    for name, rep in video_startups.items():
        v = PROCESSED if name == PROCESSED.name else name
        assert rep.passes_by_phase == StartupPlan.build(cfg, v).hf_passes_by_phase(), name
    # 0.9.0: the lookup's video (image tokens taken out: 14 frames) and the profile run's
    # (1024 tokens: 8 frames) differ, so the profile run misses; from 0.11.0 they are one item
    assert video_startups["0.9.0"].passes_by_phase["profile_run"] == 1
    assert video_startups["refimpl-processed"].passes_by_phase["runner_init"] == 1


def test_the_default_profiles_the_per_item_maximum(video_startups):
    """Issue 21: on the formula, processing and shape-only paths alike, the profile run's item
    is the per-item maximum the encoder budget was sized for; 0.9.0 profiled a shorter video."""
    cfg = video_config()
    for name in ("refimpl", "shape-only", "refimpl-processed"):
        rep = video_startups[name]
        assert rep.profile_tokens_per_item == max(rep.max_tokens_per_item.values()) == \
            max(max_tokens_per_item(cfg.model_config, "refimpl").values()), name
    old = video_startups["0.9.0"]
    assert old.profile_tokens_per_item < max(old.max_tokens_per_item.values())


def test_every_row_gives_the_budget_of_its_per_item_maximum(startups):
    budgets = {(r.encoder_compute_budget, r.encoder_cache_size) for r in startups.values()}
    assert budgets == {(BATCHED_TOKENS, BATCHED_TOKENS)}  # max(batched tokens, largest item)
    cfg = qwen_config()
    for name, r in startups.items():  # square (vLLM) and true maximum agree on a 32 x 32 grid
        assert r.max_tokens_per_item == max_tokens_per_item(cfg.model_config, name) == {"image": IMAGE_TOKENS}


def test_reset_empties_the_cache(startups):
    assert startups["0.9.0"].cache_bytes_before_reset > 0
    assert startups["0.9.0"].cache_bytes_after_reset == 0
    assert startups["0.9.2"].cache_bytes_after_reset == 0
    assert startups["0.8.5"].cache_bytes_before_reset == 0  # profiling bypassed the cache
    assert "reset_mm_cache" in startups["0.9.0"].phases and "reset_mm_cache" not in startups["0.8.5"].phases


def test_cache_hits_only_with_cache(startups):
    assert startups["0.8.5"].cache_hits == 0
    assert startups["0.9.0"].cache_hits >= 3


def test_a_disabled_cache_during_profiling_per_row():
    """0.9.0 filled the processing cache during start-up whatever the user set (PR #17935);
    0.10.1 first honoured the setting there (0 GiB; the flag became 0 GiB), and the kit's
    default follows, on the processing path too."""
    forced = EngineCore(qwen_config(disable_mm_preprocessor_cache=True), "0.9.0").report
    assert forced.cache_bytes_before_reset > 0 and forced.cache_hits >= 3
    for row, setting in (("0.10.2", {"disable_mm_preprocessor_cache": True}),
                         (PROCESSED, {"disable_mm_preprocessor_cache": True}),
                         (PROCESSED, {"mm_processor_cache_gb": 0})):
        rep = EngineCore(qwen_config(**setting), row).report
        assert rep.cache_bytes_before_reset == 0 and rep.cache_hits == 0


def test_second_startup_in_same_process_is_identical(startups):
    again = EngineCore(qwen_config(), "0.9.0").report
    first = startups["0.9.0"]
    assert again.passes_by_phase == first.passes_by_phase
    assert (again.encoder_compute_budget, again.encoder_cache_size) == (
        first.encoder_compute_budget, first.encoder_cache_size)


def test_failed_startup_leaves_no_cache_filled(monkeypatch):
    from refimpl.worker import gpu_model_runner
    def boom(self):
        raise RuntimeError("capture failed")
    monkeypatch.setattr(gpu_model_runner.GPUModelRunner, "capture_model", boom)
    with pytest.raises(RuntimeError, match="capture failed"):
        EngineCore(qwen_config(), "0.9.0")
    assert MULTIMODAL_REGISTRY.cache_bytes() == 0


def test_unknown_variant_named():
    with pytest.raises(UnknownVariantError, match="variant"):
        get_startup_variant("fast")
    with pytest.raises(UnknownVariantError, match="0.9.0"):  # the error names the choices
        get_startup_variant("cache-reset2")
    with pytest.warns(DeprecationWarning, match="it is row '0.9.0'"):  # a 0.1.0 name, until 0.3.0
        assert get_startup_variant("cache-reset") is STARTUP_VARIANTS["0.9.0"]


def test_variant_records_name_their_switches():
    v085, v090, v092 = (STARTUP_VARIANTS[v] for v in ("0.8.5", "0.9.0", "0.9.2"))
    assert not v085.cache_during_profiling and not v085.reset_at_end
    assert v090.cache_during_profiling and v090.reset_at_end and not v090.uses_formula("qwen2.5-vl-3b")
    assert v092.uses_formula("qwen2.5-vl-3b") and not v092.uses_formula("whisper-tiny")
    assert v092.mm_switches.hash_byte_path == "v0.9.2" and v092.mm.dummy_video_dtype == "int64"
    assert all(v.reproduces for v in STARTUP_VARIANTS.values())
    assert {n for n, v in STARTUP_VARIANTS.items() if v.release} == {
        "0.8.5", "0.9.0", "0.9.2", "0.10.2", "0.11.0", "0.11.1", "0.13.0"}
