"""The typed rates record (refimpl/lab/bench/rates.py): every committed calibration converts both
ways without loss and prices every row as the dotted-key model did (predictions recorded at
commit 0dc2d74 by the pre-record code, tests/lab/bench/data/cost_predictions_0dc2d74.json)."""
import dataclasses
import glob
import json
from pathlib import Path

import pytest

from refimpl.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
from refimpl.engine.startup_plan import StartupPlan
from refimpl.lab.bench.calibrate import load_rates, memory_rates
from refimpl.lab.bench.rates import ModelRates, Rates, SizedRate
from refimpl.lab.env import REPO_ROOT
from refimpl.lab.explore import cost_model as cm
from tests.lab.utils import synthetic_rates

CALIBRATIONS = sorted(glob.glob(str(REPO_ROOT / "results/*/calibration*.json")))
GOLDEN = json.loads((Path(__file__).parent / "data/cost_predictions_0dc2d74.json").read_text())


@pytest.mark.parametrize("path", CALIBRATIONS, ids=lambda p: Path(p).parent.name + "/" + Path(p).name)
def test_committed_calibrations_convert_both_ways(path):
    from refimpl.lab.bench.schema import Result
    flat = {k: v["median"] for k, v in Result.load(path).variants["rates"]["summary"].items()}
    rates = load_rates(path)
    assert isinstance(rates, Rates) and {k: rates.to_flat()[k] for k in flat} == flat
    assert set(rates.to_flat()) - set(flat) <= {"size_gib"}  # older ones did not store it (128 MiB)
    assert Rates.from_flat(rates.to_flat()) == rates
    with pytest.raises(dataclasses.FrozenInstanceError):
        rates.rss_base = 0  # type: ignore[misc]


def test_committed_calibrations_price_every_row_as_before():
    keys = [k for k in GOLDEN if k.split("|")[0] in {str(Path(p).relative_to(REPO_ROOT)) for p in CALIBRATIONS}]
    assert len(keys) > 50
    cals = {}
    for key in keys:
        path, model, n, row = key.split("|")
        cal = cals.setdefault(path, cm.Calibration.load(REPO_ROOT / path))
        mc = ModelConfig(model, device="cpu", max_model_len=int(n))
        plan = StartupPlan.budget(mc, "0.9.0", 3) if row.startswith("budget") else \
            StartupPlan.build(VllmConfig(mc, SchedulerConfig(), CacheConfig()), row)
        p = cm.predict(plan, cal)
        want = GOLDEN[key]
        assert p.seconds == pytest.approx(want["seconds"], rel=1e-12), key
        assert p.phases == pytest.approx(want["phases"], rel=1e-12), key
        assert p.peak_rss == want["peak_rss"], key


def test_unknown_key_is_named_and_missing_rate_says_rerun():
    with pytest.raises(KeyError, match="model.qwen2.5-vl-3b.typo_s"):
        Rates.from_flat({**synthetic_rates(), "model.qwen2.5-vl-3b.typo_s": 1.0})
    r = Rates.from_flat(synthetic_rates())
    assert r.models["whisper-tiny.en"].registry_call_s == 0.009
    assert r.model("whisper-large-v3", "kv_s_per_gib") == r.models["whisper-tiny"].kv_s_per_gib  # its family's
    with pytest.raises(KeyError, match="rerun refimpl bench calibrate"):
        r.model("qwen2.5-vl-3b", "encoder_s_per_item")
    assert memory_rates(r, "qwen2.5-vl-3b").weights == int(r.models["qwen2.5-vl-3b"].weights_rss)
    assert SizedRate(1.0).at(10 * 2 ** 30, 0.125, 1.0) == 1.0 and ModelRates().load_s is None


def test_the_dotted_accessors_warn_and_still_answer():
    cal = cm.Calibration(synthetic_rates(), "cpu-synthetic-2c", "2026-01-01")
    assert isinstance(cal.rates, Rates)
    with pytest.warns(DeprecationWarning, match="Calibration.rates"):
        assert cal["hash_s_per_gib.v0.9.0.ndarray"] == 3.0
    with pytest.warns(DeprecationWarning, match="rates.model"):
        assert cal.model_rate("qwen2.5-vl-3b", "kv_s_per_gib") == 0.4
    with pytest.warns(DeprecationWarning):
        assert cal.model_rate("qwen2.5-vl-3b", "hf.text_only_s", "hf.text_only_s") == 0.01


def test_hf_rates_follow_the_frame_size_between_small_and_full_frames():
    flat = {**synthetic_rates(), "hf.video_frame_mp": 2.0, "hf.image_mp": 4.0, "large.hf.frame_mp": 8.0,
            "large.hf.image_s_per_mp": 0.08, "large.hf.video_s_per_mp.int64": 0.1}
    r, old = Rates.from_flat(flat), Rates.from_flat(synthetic_rates())
    assert Rates.from_flat(r.to_flat()) == r and r.hf_large_video_s_per_mp == {"int64": 0.1}
    small = 4 * 2.0 * 0.02 + 4 * 2.0 * 0.03  # 4 frames of 2 MP: in x 0.02 + out x 0.03
    assert r.hf_video_s("int64", 4, 8.0, 8.0) == pytest.approx(small) == old.hf_video_s("int64", 4, 8.0, 8.0)
    assert r.hf_video_s("int64", 1, 8.0, 16.0) == pytest.approx(8.0 * 0.1)  # a full-size frame: its input MP
    assert r.hf_video_s("int64", 1, 16.0, 32.0) == pytest.approx(16.0 * 0.1)  # held beyond it
    mid = r.hf_video_s("int64", 2, 8.0, 8.0)  # 4 MP frames: halfway in log2 between 2 and 8 MP
    assert mid == pytest.approx(0.5 * 8.0 * 0.05 + 0.5 * 8.0 * 0.1)
    assert r.hf_video_s("uint8", 1, 8.0, 16.0) == pytest.approx(8.0 * 0.01 + 16.0 * 0.03)  # no full-size uint8 rate
    assert r.hf_image_s(8.0) == pytest.approx(8.0 * 0.08) and old.hf_image_s(8.0) == pytest.approx(8.0 * 0.02)
    with pytest.raises(KeyError, match="hf.video_in_s_per_mp.float16"):
        r.hf_video_s("float16", 1, 1.0, 2.0)


def test_a_lone_frame_padded_to_the_pair_holds_more_working_set():
    from refimpl.lab.bench.specs import StartupSpec
    from refimpl.lab.bench.startup import make_vllm_config
    flat = {**synthetic_rates(), "hf.video_peak_per_element.int64": 12.0, "hf.video_peak_per_out_element.int64": 8.0}
    mem, old = memory_rates(Rates.from_flat(flat), "qwen2.5-vl-3b"), memory_rates(Rates.from_flat(synthetic_rates()), "qwen2.5-vl-3b")
    plan = StartupPlan.build(make_vllm_config(StartupSpec(max_model_len=128000).replace(device="cpu")), "0.9.2")
    (lone,) = [i for s in plan.steps for i in s.hf_items]
    assert lone.shape[0] == 1 and lone.out_mp == pytest.approx(2 * lone.in_mp)
    assert mem.hf_working_set(lone) == pytest.approx(lone.elements * (12.0 + 2 * 8.0))
    assert old.hf_working_set(lone) == lone.elements * 20.0  # a calibration without the output rate: as before
