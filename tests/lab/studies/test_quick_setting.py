"""The quick report's start-up setting comes from committed fresh-process ladders, not from the cost
model alone, and a quick run that lands on the other side of 1 from the full run says so first."""
from __future__ import annotations

import dataclasses

from refimpl.lab import report
from refimpl.lab.bench.schema import Result
from refimpl.lab.studies import REPO_ROOT
from refimpl.lab.studies import startup_regime as R
from refimpl.lab.studies.startup import AFTER, BEFORE, StartupStudy

COMMITTED_50K = REPO_ROOT / "results/cpu-amd-epyc-2c/startup_qwen2.5-vl-3b_release-rows_50k_2026-12-03.json"


def test_the_quick_setting_is_the_smallest_committed_one_where_the_finding_held():
    settings = R.committed_settings()
    q = R.quick_setting()
    assert q is not None and q.held and q in settings
    for c in q.ratios:
        assert c.get("low") is None or (c["estimate"] > R.QUICK_MIN_RATIO and c["low"] > 1)
    assert all(not s.held for s in settings if s.max_model_len < q.max_model_len)
    assert R.quick_size() == q.max_model_len
    spec = StartupStudy(mode="quick", out_dir=REPO_ROOT / "reports" / "unused").spec()
    assert (spec.max_model_len, spec.limit_mm_per_prompt) == (q.max_model_len, dict(
        (k, int(n)) for k, _, n in (x.partition("=") for x in q.limits)))
    assert spec.mm_processor_kwargs == dict(q.mm_processor_kwargs)


def test_a_setting_is_held_only_with_every_interval_above_one():
    q = R.QuickSetting(8192, (), (), ({"estimate": 1.3, "low": 1.2, "high": 1.4},
                                      {"estimate": 0.87, "low": 0.84, "high": 0.90}), ("a", "b"))
    assert not q.held
    assert not dataclasses.replace(q, ratios=({"estimate": 1.3, "low": None, "high": None},)).held
    assert dataclasses.replace(q, ratios=q.ratios[:1]).held
    assert "0.87 [0.84, 0.90]" in q.committed() and "`a`" in q.committed()


def swapped(res: Result) -> Result:
    """``res`` with 0.8.5's and 0.9.0's runs exchanged: the finding reversed."""
    v = dict(res.variants)
    v[BEFORE], v[AFTER] = res.variants[AFTER], res.variants[BEFORE]
    return dataclasses.replace(res, variants=v)


def test_a_reversed_run_is_announced_first_with_both_figures(tmp_path):
    res = Result.load(COMMITTED_50K)
    assert R.reversal_line(res) == "" and "REVERSES" not in R.regime_sentence(res)
    rev = swapped(res)
    line = R.reversal_line(rev)
    measured, full = R.regime(rev)["measured"], R.regime(rev)["full"]
    assert measured["high"] < 1 < full["low"]
    assert line.startswith("WARNING") and f"{measured['estimate']:.2f}" in line and f"{full['estimate']:.2f}" in line
    assert R.regime_sentence(rev).startswith(line)
    rev.write(tmp_path / "startup_qwen2.5-vl-3b.json")
    text = report.summary(tmp_path, "cpu", "quick")
    assert text.splitlines()[0] == line
    res.write(tmp_path / "startup_qwen2.5-vl-3b.json")
    assert report.summary(tmp_path, "cpu", "quick").startswith("# refimpl report")


def test_the_regime_sentence_labels_what_was_measured_and_what_was_committed():
    s = R.regime_sentence(Result.load(COMMITTED_50K))
    assert "measured here" in s and "At this setting, committed" in s
    assert "a prediction, not a measurement" in s and "The committed full run" in s


def test_the_cost_check_reads_committed_runs_older_than_the_parts():
    """The quick report's explorer on an Intel Xeon host compares against results/cpu-intel-xeon-2c,
    whose runs predate ``parts_s`` and ``peak_rss_bytes``: rows without a part miss, no KeyError."""
    from refimpl.lab.explore import cost_check
    from refimpl.lab.explore.cost_model import Calibration
    from refimpl.lab.studies import RESULTS_DIR
    cal = dataclasses.replace(Calibration.load(RESULTS_DIR / "cpu-amd-epyc-2c/calibration.json"),
                              hardware="cpu-intel-xeon-2c")
    rows = cost_check.compare(cal)
    assert rows and all(r.miss is None for r in rows) and all(r.metric != "peak_rss_bytes" or r.measured for r in rows)
    assert cost_check.within_goal(rows + cost_check.ratio_rows(rows), cal)
