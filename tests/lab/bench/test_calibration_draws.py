"""Issue 43: a calibration that is more than one draw. The encoder's per-pair price fitted so that it
cannot go negative (refimpl/lab/bench/fits.py), the dominant rates drawn several times inside one
run and stored as their median with the spread, and every committed calibration still loadable."""
import gc
import glob
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refimpl.lab.bench import calibrate_sections as sec
from refimpl.lab.bench.calibrate import result
from refimpl.lab.bench.fits import median_draw, pair_price, pair_price_fit
from refimpl.lab.bench.schema import Result
from refimpl.lab.bench.specs import CalibrateSpec
from refimpl.lab.bench.trial import Trial
from refimpl.lab.env import REPO_ROOT
from refimpl.lab.explore import cost_model as cm
from refimpl.multimodal.hasher import BYTE_PATHS
from tests.lab.utils import synthetic_rates

PAIRS = (1024, 4096, 16384)  # calibrate_sections.ENCODER_PAIRS' tokens per pair
CALIBRATIONS = sorted(glob.glob(str(REPO_ROOT / "results/**/calibration*.json"), recursive=True))


@pytest.mark.parametrize("c, a, b", [(0.0, 1.5e-4, 3e-9), (0.02, 1.2e-4, 0.0), (0.05, 1e-4, 2e-9), (0.0, 0.0, 1e-8)])
def test_the_fit_recovers_a_known_price(c, a, b):
    got = pair_price_fit(PAIRS, [pair_price(c, a, b, t) for t in PAIRS])
    assert got == pytest.approx((c, a, b), rel=1e-6, abs=1e-12)


def test_a_concave_price_no_longer_fits_a_negative_square():
    """Seconds per pair that grow slower than linearly (a per-pair cost, then per token) gave the
    plain a t + b t^2 least squares a negative b; the non-negative fit finds the per-pair cost."""
    seconds = [0.1 + 2e-4 * t for t in PAIRS]  # a per-pair cost, then per token
    plain = np.linalg.lstsq(np.stack([np.array(PAIRS), np.array(PAIRS) ** 2], axis=1).astype(float), seconds,
                            rcond=None)[0]
    assert plain[1] < 0  # the old form's square term
    c, a, b = pair_price_fit(PAIRS, seconds)
    assert (c, a, b) == pytest.approx((0.1, 2e-4, 0.0), rel=1e-6, abs=1e-12)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0.0, 50.0, allow_nan=False), min_size=3, max_size=3),
       st.lists(st.integers(1, 65536), min_size=3, max_size=3, unique=True))
def test_the_fitted_price_is_never_negative_and_never_falls(seconds, tokens):
    c, a, b = pair_price_fit(tokens, seconds)
    assert min(c, a, b) >= 0
    grid = np.linspace(0, 131072, 257)
    prices = [pair_price(c, a, b, t) for t in grid]
    assert min(prices) >= 0 and all(y >= x for x, y in zip(prices, prices[1:]))


def test_bad_points_are_refused():
    with pytest.raises(ValueError, match="one length"):
        pair_price_fit([1024, 4096], [0.1])
    with pytest.raises(ValueError, match=">= 0"):
        pair_price_fit([1024], [-1.0])
    with pytest.raises(ValueError, match="at least one draw"):
        median_draw([])


def test_a_drawn_rate_is_stored_as_its_median_with_every_draw():
    """The hash section on small arrays, two draws: the rate is the median of its draws and the
    Result's summary holds their median, min and max (n = draws over every run)."""
    r: dict[str, float] = {}
    draws: dict[str, list[float]] = {}
    sec.hashes(r, 16 << 20, draws, n=2)
    keys = {f"hash_s_per_gib.{p}.{k}" for p in BYTE_PATHS for k in ("ndarray", "image")}
    assert set(draws) == keys and all(len(draws[k]) == 2 for k in keys)
    assert all(r[k] == pytest.approx(float(np.median(draws[k]))) for k in keys)
    rates = {**synthetic_rates(), **r}
    runs = [{"variant": "rates", "rates": rates, "draws": draws, "load_avg": 1.5, "seconds": 20.0},
            {"variant": "rates", "rates": rates, "draws": {k: [v * 3 for v in x] for k, x in draws.items()},
             "load_avg": 2.5, "seconds": 21.0}]
    res = Result.from_dict(result(CalibrateSpec(repeats=2), Trial({"rates": runs}), in_process=True).to_dict())
    key = "hash_s_per_gib.v0.9.0.ndarray"
    pooled = draws[key] + [v * 3 for v in draws[key]]
    s = res.variants["rates"]["summary"][key]
    assert s["n"] == 4 and s["median"] == pytest.approx(float(np.median(pooled)))
    assert (s["min"], s["max"]) == pytest.approx((min(pooled), max(pooled)))
    assert res.variants["rates"]["summary"]["rss.base"]["n"] == 2  # not drawn: one value per run
    cal = cm.Calibration.from_result(res)
    assert cal.spread[key] == pytest.approx((min(pooled), max(pooled))) and cal.load_avg == 2.5
    assert "load 2.5" in cal.described and cal.date in cal.described


def test_a_run_without_draws_is_summarised_per_run_as_before():
    runs = [{"variant": "rates", "rates": synthetic_rates(), "seconds": 20.0}]
    res = result(CalibrateSpec(repeats=1), Trial({"rates": runs}), in_process=True)
    cal = cm.Calibration.from_result(res)
    assert cal.spread == {} and cal.load_avg is None and "load not recorded" in cal.condition


@pytest.mark.parametrize("path", CALIBRATIONS, ids=lambda p: str(Path(p).relative_to(REPO_ROOT / "results")))
def test_every_committed_calibration_still_loads(path):
    """Every file loads: older ones (no draws, no load average, no per-pair constant: the encoder's
    constant reads 0) and the drawn ones since issue 43 (their load average read back)."""
    cal = cm.Calibration.load(path)
    assert cal.date != "undated" and cal.hardware in path
    older = '"load_avg"' not in Path(path).read_text()
    assert (cal.load_avg is None) == older
    q = cal.rates.models.get("qwen2.5-vl-3b")
    if q is not None:
        assert q.encoder_tokens and (q.encoder_pair_s is None if older else q.encoder_pair_s >= 0)
    assert cal.date in cal.described and cal.condition.startswith(cal.hardware)


def test_the_large_hash_draws_v0_9_0_only():
    """The 1 GiB section on a small array: v0.9.0 (start-up hashes 0.34-3.45 GiB items on it) drawn n
    times, the others once (v0.9.2 hashes a 0.29 GiB item at most; stream is flat with size)."""
    r: dict[str, float] = {}
    draws: dict[str, list[float]] = {}
    sec.large(r, 32 << 20, draws, n=2)
    assert {k: len(v) for k, v in draws.items()} == {
        "large.hash_s_per_gib.v0.8.5.ndarray": 1, "large.hash_s_per_gib.v0.9.0.ndarray": 2,
        "large.hash_s_per_gib.v0.9.2.ndarray": 1, "large.hash_s_per_gib.stream.ndarray": 1}
    assert all(r[k] == pytest.approx(float(np.median(v))) for k, v in draws.items())
    assert all(r[f"large.fill_s_per_gib.{d}"] > 0 for d in ("int64", "uint8")) and r["large.copy_s_per_gib"] > 0


# the dominant rates of docs/cost-model.md "Draws": each drawn at least three times in one run
DOMINANT = ({f"hash_s_per_gib.{p}.{k}" for p in BYTE_PATHS for k in ("ndarray", "image")}
            | {"large.hash_s_per_gib.v0.9.0.ndarray", "large.hf.image_s_per_mp", "large.hf.video_s_per_mp.uint8",
               "large.hf.video_s_per_mp.int64", "model.qwen2.5-vl-3b.encoder_s_at_tokens"})


def test_the_section_plan_draws_each_dominant_rate_three_times(monkeypatch):
    """The whole plan of a run (calibrate.run_once's), small: arrays of 8 / 16 MiB, the full-size frame
    224 x 224, encoder pairs of 16, 64 and 256 tokens. Each dominant rate gets at least three draws and
    is their median; the fit has its three points; every section is timed; the collector is left
    unfrozen."""
    from refimpl.multimodal.qwen2_5_vl_info import Qwen2_5_VLProcessingInfo
    monkeypatch.setattr(sec, "ENCODER_PAIRS", ((112, 2), (224, 2), (448, 1)))
    monkeypatch.setattr(Qwen2_5_VLProcessingInfo, "get_image_size_with_most_features", lambda self: (224, 224))
    spec = CalibrateSpec(models=("qwen2.5-vl-3b",), size_mib=8, large_mib=16)
    r: dict[str, float] = {}
    draws: dict[str, list[float]] = {}
    seconds = sec.run_plan(sec.plan(spec), r, draws)
    assert list(seconds) == [s.name for s in sec.plan(spec)] and all(v >= 0 for v in seconds.values())
    assert {"hashes", "large", "HF processor", "model qwen2.5-vl-3b"} <= set(seconds)
    assert DOMINANT <= set(draws) and all(len(draws[k]) >= sec.DRAWS >= 3 for k in DOMINANT)
    assert all(r[k] == pytest.approx(float(np.median(draws[k]))) for k in DOMINANT)
    assert len(draws["large.hash_s_per_gib.v0.9.2.ndarray"]) == 1  # a minor rate: drawn once
    assert r["model.qwen2.5-vl-3b.encoder_tokens"] == 64 and r["model.qwen2.5-vl-3b.encoder_pair_s_per_token"] >= 0
    assert gc.get_freeze_count() == 0


def test_measure_counts_the_seconds_inside_its_timed_calls():
    """calibrate_measure.TIMED (read by scripts/calibrate_sections.py) grows by each timed call's seconds."""
    import time

    from refimpl.lab.bench.calibrate_measure import TIMED, measure
    seconds, calls = TIMED["seconds"], TIMED["calls"]
    s, _ = measure(lambda: time.sleep(0.01))
    assert TIMED["calls"] == calls + 1 and TIMED["seconds"] - seconds == pytest.approx(s)


def test_the_sections_script_prints_its_help_without_measuring():
    import subprocess
    import sys
    out = subprocess.run([sys.executable, str(REPO_ROOT / "scripts/calibrate_sections.py"), "--help"],
                         capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)
    assert out.returncode == 0 and "usage" in out.stdout and "imports" not in out.stdout
