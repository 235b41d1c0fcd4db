"""The calibration bench measured in one process (soak; the cost model's tests are in tests/lab/explore/test_cost_model.py)."""
import pytest

from refimpl.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
from refimpl.engine.startup_plan import StartupPlan
from refimpl.lab.bench.specs import CalibrateSpec
from refimpl.lab.explore import cost_model as cm


@pytest.mark.soak  # ~25 s; `make calibrate` runs the real one
def test_calibrate_measures_in_one_process(tmp_path):
    """A real calibration, small: every key the model reads for Whisper is measured."""
    from refimpl.lab.bench import trial
    res = trial.run(CalibrateSpec(repeats=1, size_mib=16, models=("whisper-tiny",)), in_process=True,
                    out=tmp_path / "calibration.json", check=True)
    cal = cm.Calibration.load(tmp_path / "calibration.json")
    assert res.bench == "calibrate" and cal.rates.hash_peak["v0.9.0.ndarray"] > cal.rates.hash_peak["stream.ndarray"]
    vc = VllmConfig(ModelConfig("whisper-tiny", device="cpu"), SchedulerConfig(), CacheConfig())
    pred = cm.predict(StartupPlan.build(vc, "0.9.0"), cal)
    assert pred.total_s > 0 and pred.peak_rss_bytes > cal.rates.rss_base
