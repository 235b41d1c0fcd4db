"""The cost model's size-dependent rates and per-frame-pair encoder price, and the same-day
benchmark table of refimpl/lab/explore/same_day.py (on committed ladders with planted misses;
no timing asserted)."""
import copy

import pytest

from refimpl.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
from refimpl.engine.startup_plan import StartupPlan
from refimpl.lab.bench.schema import Result
from refimpl.lab.cli import main as refimpl_cli
from refimpl.lab.env import REPO_ROOT
from refimpl.lab.explore import cost_model as cm
from refimpl.lab.explore import same_day
from tests.lab.utils import synthetic_rates

GiB = 1 << 30
LADDER_50K = REPO_ROOT / "results/cpu-amd-epyc-2c/startup_qwen2.5-vl-3b_release-rows_50k.json"


def _cal(**extra: float) -> cm.Calibration:
    return cm.Calibration({**synthetic_rates(), **extra}, "cpu-synthetic-2c", "2026-01-01")


def test_sized_rate_interpolates_in_log_size_and_holds_beyond_the_sizes():
    cal = _cal(**{"size_gib": 0.125, "large.gib": 1.0, "large.copy_s_per_gib": 2.0})
    r = cal.rates
    small = r.copy_s_per_gib.small
    assert r.sized(r.copy_s_per_gib, 0.01 * GiB) == small
    assert r.sized(r.copy_s_per_gib, GiB / 8) == pytest.approx(small)
    assert r.sized(r.copy_s_per_gib, 12 * GiB) == pytest.approx(2.0)
    assert r.sized(r.copy_s_per_gib, GiB / 2 ** 1.5) == pytest.approx((small + 2.0) / 2)  # halfway in log2
    v090 = r.hash_s_per_gib["v0.9.0.ndarray"]
    assert v090.large is None and r.sized(v090, 12 * GiB) == v090.small  # no large rate


def test_hash_of_a_large_item_reads_the_large_rate():
    vc = VllmConfig(ModelConfig("qwen2.5-vl-3b", device="cpu"), SchedulerConfig(), CacheConfig())
    plan = StartupPlan.build(vc, "0.9.0")
    old = cm.predict(plan, _cal())
    cal = _cal(**{"large.gib": 1.0, "large.hash_s_per_gib.v0.9.0.ndarray": 6.0})
    new = cm.predict(plan, cal)
    arrays = [i.nbytes for s in plan.steps for i in s.items if s.hashed and i.kind == "ndarray"]
    rate = cal.rates.hash_s_per_gib["v0.9.0.ndarray"]
    assert max(arrays) > 3 * GiB and cal.rates.sized(rate, max(arrays)) == 6.0
    assert new.seconds["hash_s"] - old.seconds["hash_s"] == pytest.approx(
        sum(n / GiB * (cal.rates.sized(rate, n) - 3.0) for n in arrays))
    assert new.seconds["hash_s"] > old.seconds["hash_s"] + max(arrays) / GiB * 2.9


def test_encoder_priced_per_frame_pair_when_the_calibration_has_the_rates():
    vc = VllmConfig(ModelConfig("qwen2.5-vl-3b", device="cpu"), SchedulerConfig(), CacheConfig())
    plan = StartupPlan.build(vc, "0.11.1")
    i = plan.profile_item
    pairs = -(-i.shape[0] // 2)
    a, b = 1e-4, 1e-8
    cal = _cal(**{"model.qwen2.5-vl-3b.encoder_pair_s_per_token": a, "model.qwen2.5-vl-3b.encoder_pair_s_per_token2": b})
    t = i.tokens / pairs
    copy_s = i.processed_bytes / GiB * cal.rates.copy_s_per_gib.small
    assert pairs > 1 and cm.predict(plan, cal).seconds["encoder_s"] == pytest.approx(
        plan.encoder_items * (pairs * (a * t + b * t * t) + copy_s))
    old = _cal()  # no per-pair rates: the power law over the item, as before
    assert cm.predict(plan, old).seconds["encoder_s"] == pytest.approx(
        plan.encoder_items * (i.tokens / 4096 + copy_s))


def _planted(tmp_path, hardware: str):
    """The committed 50k ladder cut to three rows; 0.9.0's hashing and 0.11.1's profile run
    1000 s slower than measured."""
    res = Result.load(LADDER_50K)
    res.variants = {v: copy.deepcopy(res.variants[v]) for v in ("0.8.5", "0.9.0", "0.11.1")}
    for r in res.variants["0.9.0"]["runs"]:
        r["parts_s"]["hash_s"] += 1000.0
        r["total_s"] += 1000.0
    for r in res.variants["0.11.1"]["runs"]:
        r["phases"]["profile_run"] += 1000.0
        r["total_s"] += 1000.0
    ladder = tmp_path / "ladder.json"
    res.write(ladder)
    (tmp_path / "results" / hardware).mkdir(parents=True)
    Result.load(LADDER_50K).write(tmp_path / "results" / hardware / "startup_qwen2.5-vl-3b_release-rows_50k.json")
    return ladder


def test_same_day_table_names_the_planted_misses(tmp_path):
    cal = _cal()
    ladder = _planted(tmp_path, cal.hardware)
    rows = {r.variant: r for r in same_day.ladder_rows(cal, ladder)}
    assert rows["0.8.5"].ratio is None and rows["0.9.0"].ratio is not None
    assert same_day.worst_part(rows["0.9.0"].gaps).startswith("hash_s:")
    assert same_day.worst_part(rows["0.11.1"].gaps).startswith("profile_rest:")
    for r in rows.values():  # the parts add up to the total, predicted and measured
        assert sum(g[0] for g in r.gaps.values()) == pytest.approx(r.seconds[0])
        assert sum(g[1] for g in r.gaps.values()) == pytest.approx(r.seconds[1])
    table = same_day.same_day_table(cal, [ladder], tmp_path / "results")
    line = next(x for x in table.splitlines() if x.startswith("| 0.9.0 |"))
    assert "hash_s:" in line and "✗" in line
    assert f"{cal.hardware}/startup_qwen2.5-vl-3b_release-rows_50k.json:" in line  # the committed ladder, labelled
    assert "profile_rest:" in next(x for x in table.splitlines() if x.startswith("| 0.11.1 |"))
    assert cal.label in table and "max_model_len 50000" in table


def test_same_day_flag_prints_the_table(tmp_path, capsys):
    from refimpl.lab.bench.calibrate import result
    from refimpl.lab.bench.specs import CalibrateSpec
    from refimpl.lab.bench.trial import Trial
    from tests.lab.utils import synthetic_rates as rates
    result(CalibrateSpec(repeats=1), Trial({"rates": [{"variant": "rates", "rates": rates(), "seconds": 1.0}]}),
           in_process=True).write(tmp_path / "calibration.json")
    cal = cm.Calibration.load(tmp_path / "calibration.json")
    ladder = _planted(tmp_path, cal.hardware)
    assert refimpl_cli(["cost-check", "--same-day", str(tmp_path / "calibration.json"), str(ladder),
                            "--results", str(tmp_path / "results")]) == 0
    out = capsys.readouterr().out
    assert "| 0.9.0 |" in out and "hash_s:" in out


def test_carried_rates_keep_the_old_day_and_take_the_new_shape():
    old = _cal()
    new = cm.Calibration({**synthetic_rates(), "copy_s_per_gib": 1.0, "large.copy_s_per_gib": 3.0, "large.gib": 1.0,
                          "model.qwen2.5-vl-3b.encoder_pair_s_per_token": 2e-4,
                          "model.qwen2.5-vl-3b.encoder_pair_s_per_token2": 1e-8}, "cpu-other-2c", "2026-02-02")
    c = same_day.carry_rates(old, new)
    small = old.rates.copy_s_per_gib.small
    assert c.date == old.date and c.rates.copy_s_per_gib.small == small and c.rates.large_gib == 1.0
    assert c.rates.copy_s_per_gib.large == pytest.approx(small * 3.0)
    q, q0 = c.rates.models["qwen2.5-vl-3b"], old.rates.models["qwen2.5-vl-3b"]
    a, b, t = q.encoder_pair_s_per_token, q.encoder_pair_s_per_token2, q0.encoder_tokens
    assert a * t + b * t * t == pytest.approx(q0.encoder_s_at_tokens) and a / b == pytest.approx(2e4)


def test_a_calibration_made_with_page_reporting_off_says_so():
    """A run made with page_reporting_order 11 (reporting off) records it; the label names it, so the
    explorer and the tables never pass such rates off as the VM's default."""
    off = cm.Calibration.load(REPO_ROOT / "results/cpu-amd-epyc-2c/same-day-2026-12-04-no-reporting-3/calibration.json")
    on = cm.Calibration.load(REPO_ROOT / "results/cpu-amd-epyc-2c/same-day-2026-12-04/calibration.json")
    assert off.label.endswith("2026-12-04, free page reporting off)") and off.host == "free page reporting off"
    assert on.label == "predicted (cost model, calibration of cpu-amd-epyc-2c, 2026-12-04)" and on.host == ""
