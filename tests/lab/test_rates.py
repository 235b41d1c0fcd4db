"""The typed rates record (refimpl/lab/bench/rates.py): every committed calibration converts both
ways without loss and prices every row as the dotted-key model did (predictions recorded at
commit 0dc2d74 by the pre-record code, tests/lab/data/cost_predictions_0dc2d74.json)."""
import dataclasses
import glob
import json
from pathlib import Path

import pytest

from cost_fixtures import synthetic_rates
from refimpl.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
from refimpl.engine.startup_plan import StartupPlan
from refimpl.lab.bench.calibrate import load_rates, memory_rates
from refimpl.lab.bench.rates import ModelRates, Rates, SizedRate
from refimpl.lab.env import REPO_ROOT
from refimpl.lab.explore import cost_model as cm

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
