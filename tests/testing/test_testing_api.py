"""refimpl.testing as an oracle API (issue 19): the scheduler helpers with image / video /
audio requests, the oracles against the mechanism they summarise (without an HF pass or the
dummy tensors), ReferenceLRU against ProcessingCache step by step (reset zeroes the
counters, as vLLM's LRUCache.clear), the strategies' items accepted by the processors, and
the bad-input table as data run against a validator of one's own."""
import importlib
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, find, given, settings

import refimpl.testing as rt
from refimpl.config import ModelConfig, SchedulerConfig, VllmConfig
from refimpl.core.encoder_cache_manager import compute_encoder_budget
from refimpl.engine.core import EngineCore
from refimpl.errors import CacheItemTooLargeError, UnknownVariantError
from refimpl.multimodal import MultiModalProfiler, MultiModalRegistry, ProcessingCache
from refimpl.testing import strategies
from refimpl.variants import get_startup_variant

SMALL_QWEN = dict(max_model_len=4096, mm_processor_kwargs={"max_pixels": 28 * 28 * 64})


def test_all_is_importable_and_documented():
    for name in rt.__all__:
        assert hasattr(rt, name), name
    doc = (Path(__file__).resolve().parents[2] / "docs" / "testing.md").read_text()
    missing = [n for n in rt.__all__ if f"`{n}" not in doc]
    assert not missing, f"docs/testing.md does not document {missing}"


@pytest.mark.parametrize("modality", ["image", "video"])
def test_qwen_mm_requests_run_to_completion(modality):
    s = rt.create_scheduler(rt.QWEN, max_num_batched_tokens=256, max_num_seqs=4, num_blocks=64,
                            encoder_compute_budget=200, encoder_cache_size=200)
    for r in rt.create_requests(5, model=rt.QWEN, prompt_len=120, num_mm_items=2, mm_len=60,
                                modality=modality, max_tokens=4):
        s.add_request(r)
    runner = rt.FakeModelRunner()
    done = rt.run_to_completion(s, runner)
    assert len(done) == 5 and all(len(o.output_token_ids) == 4 for o in done.values())
    assert runner.num_encoder_runs == 10  # every item encoded once, under a 200-token budget per step


def test_whisper_requests_hold_the_oracles_cross_blocks():
    cfg = rt.create_vllm_config()
    assert rt.cross_attention_blocks(cfg) == 94 and rt.blocks_for_one_request(cfg) == 123
    s = rt.create_scheduler(num_blocks=1 + 2 * 123)
    for r in rt.create_requests(4, max_tokens=6):
        s.add_request(r)
    rt.run_to_completion(s, rt.FakeModelRunner(cross_blocks=rt.cross_attention_blocks(cfg)))


def test_max_tokens_oracle():
    # vLLM 0.9.0 fits 12 frames after the image's tokens and caps at 16; from 0.10.2 the video
    # fits the whole seq_len (14 frames, the 0.11.0 cap)
    assert rt.max_tokens_per_item("qwen2.5-vl-3b", "0.9.0") == {"image": 16384, "video": 98304}
    assert rt.max_tokens_per_item("qwen2.5-vl-3b") == {"image": 16384, "video": 114688}
    # at max_pixels = 768 * 28^2: vLLM 0.9.0's square dummy (756 x 756) gives 729 tokens, 0.13.0's
    # factor pair and the true maximum 768 (896 x 672)
    small = dict(mm_processor_kwargs={"max_pixels": 768 * 28 * 28}, limit_mm_per_prompt={"video": 0})
    assert {v: rt.max_tokens_per_item("qwen2.5-vl-3b", v, **small)["image"] for v in ("0.9.0", "0.13.0", "refimpl")} \
        == {"0.9.0": 729, "0.13.0": 768, "refimpl": 768}
    assert {w: rt.max_tokens_per_item("qwen2.5-vl-3b", "0.9.0", worst_case=w, **small)["image"]
            for w in rt.WORST_CASES} == {"square": 729, "factor-pair": 768, "true-max": 768}
    assert rt.max_tokens_per_item("whisper-tiny") == {"audio": 1500}
    assert set(rt.ROWS) >= {"0.8.5", "0.9.0", "0.13.0", "refimpl", "shape-only"}
    with pytest.raises(UnknownVariantError, match="worst_case"):
        rt.max_tokens_per_item("whisper-tiny", worst_case="vllm-0.9.0")
    with pytest.raises(UnknownVariantError, match="variant"):
        rt.max_tokens_per_item("whisper-tiny", "no-such-row")
    with pytest.warns(DeprecationWarning, match="it is row '0.9.0'"):  # 0.1.0's names, until 0.3.0
        assert rt.max_tokens_per_item("whisper-tiny", "cache-reset") == {"audio": 1500}


def test_max_tokens_and_budget_oracles_equal_processing_the_dummy_item():
    reg = MultiModalRegistry()
    mc = ModelConfig("qwen2.5-vl-3b", device="cpu", **SMALL_QWEN)
    processed = reg.get_max_tokens_per_item_by_modality(mc, disable_cache=True)
    assert reg.stats.hf_mm_passes == 1
    assert rt.max_tokens_per_item(mc) == processed
    cfg = VllmConfig(mc, SchedulerConfig(max_num_batched_tokens=2048))
    assert rt.encoder_budget(cfg) == compute_encoder_budget(mc, cfg.scheduler_config, reg, disable_cache=True)
    assert rt.encoder_budget(rt.create_vllm_config()) == (1500, 8192)


def test_dummy_specs_equal_the_real_dummy_items_and_allocate_nothing():
    mc = ModelConfig("qwen2.5-vl-3b", device="cpu", limit_mm_per_prompt={"image": 2}, **SMALL_QWEN)
    raw = MultiModalProfiler(MultiModalRegistry().create_processor(mc)).dummy_inputs.get_dummy_mm_data(
        4096, {"image": 2, "video": 1})
    specs = rt.dummy_input_specs(mc)
    assert specs["image"] == [rt.TensorSpec((h, w, 3), "uint8") for w, h in (im.size for im in raw["image"])]
    assert specs["video"] == [rt.TensorSpec.of(v) for v in raw["video"]]
    proc = MultiModalRegistry().create_processor(mc, disable_cache=True)
    inp = proc.dummy_inputs.get_dummy_processor_inputs(4096, {"image": 2, "video": 1})
    real = proc.apply(inp.prompt, inp.mm_data)
    assert rt.dummy_processed_specs(mc) == {m: [{k: rt.TensorSpec.of(t) for k, t in d.items()} for d in items]
                                            for m, items in real.mm_kwargs.items()}
    # the default Qwen2.5-VL image + video: gigabytes described, meta tensors underneath
    big = rt.dummy_processed_specs("qwen2.5-vl-3b")
    assert sum(t.nbytes for items in big.values() for d in items for t in d.values()) > 2e9
    builder = MultiModalRegistry().create_processor(ModelConfig("qwen2.5-vl-3b", device="cpu")).dummy_inputs
    out = builder.get_dummy_processed_inputs(128000, {"image": 1, "video": 1}, device="meta")
    assert out.mm_kwargs["video"][0]["pixel_values_videos"].is_meta
    assert rt.dummy_input_specs("whisper-tiny") == {"audio": [rt.TensorSpec((480000,), "float32")]}
    assert rt.dummy_input_specs("whisper-tiny", "0.13.0") == {"audio": [rt.TensorSpec((480000,), "float64")]}
    assert rt.dummy_input_specs("qwen2.5-vl-3b", "0.11.0", limit_mm_per_prompt={"image": 0})["video"] == [
        rt.TensorSpec((14, 3584, 3584, 3), "int64")]  # vLLM <= 0.11.0's np.full(shape, 255)
    # the row's switches, as EngineCore sets them on the model config: what the builder allocates
    for row, dtype in (("0.11.0", "int64"), ("0.11.1", "uint8")):
        cfg = ModelConfig("qwen2.5-vl-3b", device="cpu", limit_mm_per_prompt={"image": 0},
                          mm_switches=get_startup_variant(row).mm, **SMALL_QWEN)
        video = MultiModalRegistry().create_processor(cfg).dummy_inputs.get_dummy_mm_data(4096, {"video": 1})["video"][0]
        assert rt.dummy_input_specs(cfg, row)["video"] == [rt.TensorSpec.of(video)] and str(video.dtype) == dtype


@pytest.mark.slow
@pytest.mark.parametrize("row", ["0.9.0", "0.9.2", "0.11.0", "refimpl"])
def test_pass_oracle_raises_where_start_up_does(row):
    """A processing cache smaller than one dummy item: the releases raise cachetools' "value
    too large" at the first step that stores it (0.9.0 at the runner's lookup, 0.9.2 on at the
    profile run's dummy: the formula skips the lookups); refimpl serves it uncached (#53016)."""
    def tiny():
        return rt.create_vllm_config(rt.QWEN, max_num_batched_tokens=2048, mm_processor_cache_gb=0.0001,
                                     mm_registry=MultiModalRegistry(), **SMALL_QWEN)
    try:
        engine: object = EngineCore(tiny(), row).report.passes_by_phase
    except CacheItemTooLargeError as e:
        engine = str(e)
    try:
        oracle: object = rt.hf_passes_by_phase(tiny(), row)
    except CacheItemTooLargeError as e:
        oracle = str(e)
    assert oracle == engine
    assert isinstance(engine, str) == (row != "refimpl"), engine
    with pytest.raises(UnknownVariantError, match="variant"):
        rt.hf_passes_by_phase(tiny(), "no-such-row")


# ------------------------------------------------------------------------ cache reference model
def _val(nbytes: int) -> dict:
    return {"x": torch.zeros(nbytes, dtype=torch.uint8)}


@settings(max_examples=60, deadline=None)
@given(strategies.cache_ops())
def test_reference_lru_matches_processing_cache_step_by_step(ops):
    cache, ref = ProcessingCache(10_000), rt.ReferenceLRU(10_000)
    for op in ops:
        if op[0] == "get":
            assert (cache.get(op[1]) is not None) == ref.get(op[1])
        elif op[0] == "put":
            assert cache.put(op[1], _val(op[2])) == ref.put(op[1], op[2])
        elif op[0] == "set_capacity":
            cache.set_capacity(op[1])
            ref.set_capacity(op[1])
        else:
            cache.reset()
            ref.reset()
        assert ref.mismatches(cache) == [], op
        assert (cache.evictions, cache.rejected) == (ref.evictions, ref.rejected)


def test_reset_zeroes_counters_and_order_is_public():
    cache = ProcessingCache(100)
    cache.put("a", _val(40))
    cache.put("b", _val(40))
    assert cache.get("a") is not None and cache.get("zz") is None
    assert cache.order == ("b", "a") and cache.entry_bytes("a") == 40
    cache.put("c", _val(40))  # evicts b
    assert cache.order == ("a", "c") and (cache.hits, cache.misses, cache.evictions) == (1, 1, 1)
    cache.reset()
    assert cache.stats() == dict(entries=0, bytes=0, capacity_bytes=100, hits=0, misses=0, evictions=0,
                                 rejected=0, invalidated=0)


# ------------------------------------------------------------------------ strategies
@pytest.fixture(scope="module")
def kit():
    return rt.BadInputKit()


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(img=strategies.mm_items("image"), video=strategies.videos(), audio=strategies.audios())
def test_strategy_items_are_accepted(kit, img, video, audio):
    assert kit.qwen_apply("<|image_pad|><|video_pad|>", {"image": img, "video": video}).mm_placeholders.keys() == {
        "image", "video"}
    assert kit.whisper_apply(audio).mm_placeholders["audio"][0].length == 1500


@pytest.mark.parametrize("want", [("P", "RGBA", True), ("P", "RGB", False), ("L", None, True), ("RGB", None, True)])
def test_strategies_cover_palettes_and_transparency(want):
    """Each kind is found by a deterministic search (derandomize: seeded from this test, no
    example database): the outcome depends neither on a draw, on the order, nor on what the
    shared .hypothesis folder holds. (It drew 200 examples at random and asserted all four kinds
    among them: an unlucky draw could miss one.)"""
    def kind(img):
        return img.mode, img.palette.mode if img.mode == "P" else None, "transparency" in img.info
    found = find(strategies.images(modes=("P", "L", "RGB")), lambda img: kind(img) == want,
                 settings=settings(max_examples=2000, derandomize=True, database=None, deadline=None,
                                   suppress_health_check=list(HealthCheck)))
    assert kind(found) == want


# ------------------------------------------------------------------------ bad inputs as data
def test_every_case_input_is_data():
    for case in rt.BAD_INPUT_CASES:
        assert isinstance(case.input, rt.BadInput) and callable(getattr(rt.BadInputKit, case.input.entry))


def test_bad_inputs_against_a_users_own_validator():
    """A validator of one's own: vLLM-style, plain ValueError without field or limit."""
    def my_sampling_params(max_tokens=16, temperature=1.0, seed=None):
        if not isinstance(max_tokens, int) or max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
        if temperature < 0:
            raise ValueError("temperature must be non-negative")
        if abs(temperature) > sys.float_info.max or temperature != temperature:
            raise ValueError("temperature must be finite")
        if seed is not None and not -(2**63) <= seed < 2**63:
            raise ValueError("seed must fit in int64")

    cases = [c for c in rt.BAD_INPUT_CASES if c.input.entry == "sampling"]
    assert len(cases) >= 4 and {"max_tokens", "temperature", "seed"} <= {k for c in cases for k in c.input.kwargs}
    for case in cases:
        try:
            my_sampling_params(**case.input.kwargs)
            exc = None
        except Exception as e:  # noqa: BLE001 - what the case judges
            exc = e
        assert case.mismatches(exc) == []
    lax = cases[0]
    assert lax.mismatches(None) and lax.mismatches(RuntimeError("boom"))  # not refused: flagged


def test_plain_value_error_is_a_refusal_not_a_crash(kit):
    case = rt.Case("x", "g", "what", "entry", lambda k: (_ for _ in ()).throw(ValueError("nope")),
                   raises=ValueError, field=None, limit=None)
    out = rt.run_case(case, kit)
    assert out.kind == "raised" and out.exc_type == "ValueError" and rt.is_refusal(ValueError())
    assert not rt.is_refusal(TypeError()) and rt.run_case(
        rt.Case("y", "g", "w", "e", lambda k: 1 / 0), kit).kind == "crashed"


def test_strategies_without_hypothesis_say_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "hypothesis", None)  # as if not installed
    monkeypatch.delitem(sys.modules, "refimpl.testing.strategies")
    with pytest.raises(ImportError, match=r"needs hypothesis: pip install 'refimpl\[lab\]'"):
        importlib.import_module("refimpl.testing.strategies")


def test_several_videos_get_vllms_frame_share():
    """vLLM's get_num_frames_with_most_features: the floor of the frames that fit over the
    videos, odd shares kept (the HF processor pads them); refimpl's row rounds a share down to
    whole temporal patches. 980x980 frames (square rule), 16384 tokens, 2 videos: 26 frames fit."""
    kw = dict(seq_len=16384, mm_counts={"video": 2}, mm_processor_kwargs={"max_pixels": 1003520},
              limit_mm_per_prompt={"video": 2})
    frames = {row: {s.shape[0] for s in rt.dummy_input_specs(rt.QWEN, row, **kw)["video"]}
              for row in ("0.9.0", "0.11.0", "refimpl")}
    assert frames == {"0.9.0": {13}, "0.11.0": {13}, "refimpl": {12}}
