"""One prediction for one setting: the explorer, the regime sentence ``refimpl bench startup`` and
notebook 01 print, and the cost check give the same 0.9.0 / 0.8.5 for the same full setting, pixels
included (issue 43: the sentence built its config without --mm-processor-kwargs, 1.29 against the
explorer's 1.61 at 32768 tokens, image 2, video 1, max_pixels 1003520)."""
import json

import pytest

from refimpl.lab.bench.schema import Result
from refimpl.lab.explore import cost_check, prediction
from refimpl.lab.explore.calibrations import default_calibration
from refimpl.lab.explore.explorer import Settings, explore
from refimpl.lab.studies import REFERENCE, RESULTS_DIR, startup_regime

SETTING = dict(max_model_len=32768, limit_mm_per_prompt={"image": 2, "video": 1})
PIXELS = {"max_pixels": 1003520}
# a committed start-up Result whose runs stand in for a measurement at SETTING (the predictions read its settings)
STORED = RESULTS_DIR / REFERENCE / "startup_qwen2.5-vl-3b_release-rows_fresh-64k-maxpix_2026-12-03.json"


@pytest.fixture(scope="module")
def cal():  # the default every caller reads (issue 43: the newest one a committed same-day check validated)
    found, _ = default_calibration(REFERENCE, REFERENCE, RESULTS_DIR)
    assert found is not None and found.check
    return found


@pytest.fixture
def stored(tmp_path):
    d = json.loads(STORED.read_text())
    d["params"].update(SETTING, mm_processor_kwargs=PIXELS, variants=["0.8.5", "0.9.0"])
    d["variants"] = {v: d["variants"][v] for v in ("0.8.5", "0.9.0")}
    for v in d["variants"].values():
        for run in v["runs"]:
            run.update(max_model_len=SETTING["max_model_len"], limit_mm_per_prompt=SETTING["limit_mm_per_prompt"])
    path = tmp_path / "startup_qwen2.5-vl-3b_setting.json"
    path.write_text(json.dumps(d))
    return path


def test_one_setting_one_number(cal, stored):
    one = prediction.predicted_ratio(prediction.setting_config(mm_processor_kwargs=PIXELS, **SETTING), cal)
    ex = {v: explore(Settings(variant=v, max_pixels=PIXELS["max_pixels"], **SETTING), cal).prediction.total_s
          for v in ("0.9.0", "0.8.5")}
    res = Result.load(stored)
    r = startup_regime.regime(res)
    (check,) = [row for row in cost_check.ratio_rows(cost_check.compare(cal, [stored])) if row.variant == "0.9.0"]
    assert ex["0.9.0"] / ex["0.8.5"] == pytest.approx(one, rel=1e-12)
    assert r["predicted"] == pytest.approx(one, rel=1e-12)
    assert check.predicted == pytest.approx(one, rel=1e-12)
    assert f"(a prediction, not a measurement): {one:.2f} at this size" in startup_regime.regime_sentence(res)
    assert "max_pixels 1003520" in r["size"]
    # the pixels change the prediction, so a caller that dropped them would fail above
    bare = prediction.predicted_ratio(prediction.setting_config(**SETTING), cal)
    assert abs(bare - one) > 0.01
