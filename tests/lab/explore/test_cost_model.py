"""The start-up cost model: its pass walk against every committed run's counts, its prices
against the formula on a synthetic calibration, and the calibrate bench's plumbing."""
import glob
import statistics
from pathlib import Path

import pytest

from refimpl.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
from refimpl.engine.startup_plan import StartupPlan
from refimpl.errors import ConfigError, UnknownModelError
from refimpl.lab.bench import guard
from refimpl.lab.bench.calibrate import hardware_folder, lines, result
from refimpl.lab.bench.schema import Result
from refimpl.lab.bench.specs import CalibrateSpec, spec_from_params
from refimpl.lab.bench.startup import make_vllm_config
from refimpl.lab.bench.trial import Trial
from refimpl.lab.cli import main as refimpl_cli
from refimpl.lab.cli import parse
from refimpl.lab.env import REPO_ROOT
from refimpl.lab.explore import cost_check
from refimpl.lab.explore import cost_model as cm
from refimpl.variants import STARTUP_VARIANTS
from tests.lab.utils import synthetic_rates

GiB = 1 << 30
STARTUPS = sorted(glob.glob(str(REPO_ROOT / "results/cpu-*/startup_qwen*.json")))
BUDGETS = sorted(glob.glob(str(REPO_ROOT / "results/cpu-*/budget_qwen*.json")))


@pytest.fixture
def cal():
    return cm.Calibration(synthetic_rates(), "cpu-synthetic-2c", "2026-01-01")


def _vc(path: str, run: dict, params: dict, bench: str = "startup") -> VllmConfig:
    spec = spec_from_params(bench, {**params, "max_model_len": run.get("max_model_len")})
    return make_vllm_config(spec.replace(device="cpu"))


@pytest.mark.parametrize("path", STARTUPS, ids=lambda p: Path(p).parent.name + "/" + Path(p).name)
def test_startup_plan_counts_what_every_committed_run_counted(path):
    """HF calls (text-only ones included), passes per phase, cache hits and misses and the cache
    bytes before the reset, for every variant of every committed start-up run."""
    res = Result.load(path)
    for v, d in res.variants.items():
        run = d["runs"][0]
        plan = StartupPlan.build(_vc(path, run, res.params), v)
        assert plan.hf_processor_calls == run["hf_processor_calls"], v
        assert {k: n for k, n in plan.hf_passes_by_phase().items() if n} == \
            {k: n for k, n in run["passes_by_phase"].items() if n}, v
        assert (plan.cache_hits, plan.cache_misses) == (run["cache_hits"], run["cache_misses"]), v
        assert plan.cache_bytes_before_reset == run["cache_bytes_before_reset"], v


@pytest.mark.parametrize("path", BUDGETS, ids=lambda p: Path(p).parent.name + "/" + Path(p).name)
def test_budget_plan_counts_what_every_committed_run_counted(path):
    res = Result.load(path)
    for v, d in res.variants.items():
        run = d["runs"][0]
        plan = StartupPlan.budget(_vc(path, run, res.params, "budget").model_config, v, len(run["calls_s"]))
        assert [int(bool(s.hf_items)) for s in plan.steps] == run["passes"], v
        assert plan.cache_hits == run["cache_hits"] and plan.hf_processor_calls == run["hf_processor_calls"], v


def test_oversize_item_fails_start_up_where_the_row_raised():
    vc = VllmConfig(ModelConfig("qwen2.5-vl-3b", device="cpu", mm_processor_cache_gb=1.0), SchedulerConfig(), CacheConfig())
    assert "value too large" in StartupPlan.build(vc, "0.9.0").failure
    assert StartupPlan.build(vc, "refimpl").failure is None  # oversize items skipped


def test_prices_follow_the_formula(cal):
    """0.9.0 at 128k: three lookups and the profile pass hash every item by its 3-copy path;
    the first pass builds the processor; one mm HF call per missing set and the text-only calls."""
    vc = VllmConfig(ModelConfig("qwen2.5-vl-3b", device="cpu"), SchedulerConfig(), CacheConfig())
    plan = StartupPlan.build(vc, "0.9.0")
    pred = cm.predict(plan, cal)
    hashed = sum(s.hashed_bytes for s in plan.steps)
    assert pred.seconds["hash_s"] == pytest.approx(hashed / GiB * 3.0)
    video = [i for i in plan.steps[0].items if i.modality == "video"][0]
    assert video.nbytes == 12 * 3584 * 3584 * 3 * 8 and video.dtype == "int64"
    fills = sum(i.nbytes / GiB * (0.6 if i.modality == "image" else 0.4) for s in plan.steps
                for i in {j.spec: j for j in s.items}.values())
    assert pred.seconds["dummy_s"] == pytest.approx(fills + 2.0)  # + the processor's first build
    assert pred.seconds["hf_text_only_s"] == pytest.approx(6 * 0.01)  # 2 + 1 + 2 + 1, as committed (8 - 2 mm)
    assert pred.total_s == pytest.approx(sum(pred.phases.values()))
    assert pred.label == "predicted (cost model, calibration of cpu-synthetic-2c, 2026-01-01)"


def test_peaks_order_as_the_committed_ladder(cal):
    """Peak RSS falls along the ladder where the measured one does: 3 hash copies > 2 > none,
    int64 > uint8 > formula > shape-only."""
    res = Result.load(REPO_ROOT / "results/cpu-amd-epyc-2c/startup_qwen2.5-vl-3b.json")
    vc = _vc("", res.runs("0.9.0")[0], res.params)
    pred = {v: cm.predict(StartupPlan.build(vc, v), cal).peak_rss_bytes for v in res.variants}
    meas = {v: statistics.median(r["peak_rss_bytes"] for r in res.runs(v)) for v in res.variants}
    order = lambda d: sorted(d, key=d.get)  # noqa: E731
    assert order(pred)[-1] == order(meas)[-1] == "0.9.0"
    assert pred["0.9.0+#19484"] > pred["0.9.0+#24925+uint8"] > pred["0.9.0+#19756+#24925+uint8"]


def test_comparison_rows_and_table(cal):
    paths = [REPO_ROOT / "results/cpu-amd-epyc-2c/startup_qwen2.5-vl-3b.json",
             REPO_ROOT / "results/cpu-amd-epyc-2c/budget_qwen2.5-vl-3b.json"]
    rows = cost_check.compare(cal, paths)
    metrics = {(r.variant, r.metric) for r in rows}
    assert ("0.9.0", "total_s") in metrics and ("0.8.5", "call_2_s") in metrics and ("0.9.0", "peak_rss_bytes") in metrics
    table = cost_check.comparison_table(rows, cal)
    assert cal.label in table and "error" in table
    assert all(r.miss is not None for r in rows if not r.metric.endswith("bytes"))


def test_calibration_lookup(tmp_path):
    assert cm.Calibration.for_this_machine(tmp_path) is None
    assert hardware_folder({"gpu": None, "cpu": {"model": "AMD EPYC", "logical_cores": 2}}) == "cpu-amd-epyc-2c"
    assert hardware_folder({"gpu": None, "cpu": {"model": "Intel(R) Xeon(R) Processor", "logical_cores": 2}}) \
        == "cpu-intel-xeon-2c"


def test_calibrate_is_a_bench():
    spec, out, in_process = parse(["calibrate", "--repeats", "1", "--size-mib", "32", "--models", "whisper-tiny"])
    assert isinstance(spec, CalibrateSpec) and spec.models == ("whisper-tiny",) and spec.labels == ("rates",)
    assert spec.command() == "refimpl bench calibrate --models whisper-tiny --size-mib 32"
    with pytest.raises(ConfigError, match="size_mib"):
        guard.check(CalibrateSpec(size_mib=8))
    with pytest.raises(UnknownModelError, match="models"):
        guard.check(CalibrateSpec(models=("gpt2",)))


def test_calibrate_result_and_lines():
    runs = [{"variant": "rates", "rates": synthetic_rates(), "seconds": 20.0} for _ in range(2)]
    res = result(CalibrateSpec(repeats=2), Trial({"rates": runs}), in_process=True)
    res = Result.from_dict(res.to_dict())  # the schema accepts it
    cal = cm.Calibration.from_result(res)
    assert cal.rates.hash_s_per_gib["v0.9.0.ndarray"].small == 3.0 and cal.hardware == hardware_folder(res.env["hardware"])
    text = "\n".join(lines(res))
    assert "v0.9.0 3.00" in text and "whisper-tiny.en 9.0 ms" in text


def test_every_row_predicts(cal):
    for model in ("qwen2.5-vl-3b", "whisper-tiny", "whisper-large-v3"):
        vc = VllmConfig(ModelConfig(model, device="cpu", **({"max_model_len": 16384} if model.startswith("qwen") else {})),
                        SchedulerConfig(), CacheConfig())
        for row in STARTUP_VARIANTS:
            pred = cm.predict(StartupPlan.build(vc, row), cal)
            assert pred.total_s > 0 and pred.peak_rss_bytes > GiB, (model, row)


def test_comparison_takes_a_50k_run_and_prints_from_the_command_line(tmp_path, capsys):
    """A 50k run in the calibration's folder gets its rows; ``refimpl cost-check``
    prints the table and the per-length counts; without a calibration it says so (exit 2)."""
    runs = [{"variant": "rates", "rates": synthetic_rates(), "seconds": 20.0}]
    result(CalibrateSpec(repeats=1), Trial({"rates": runs}), in_process=True).write(tmp_path / "calibration.json")
    cal = cm.Calibration.load(tmp_path / "calibration.json")
    (tmp_path / cal.hardware).mkdir()
    src = Result.load(REPO_ROOT / "results/cpu-amd-epyc-2c-shared/startup_qwen2.5-vl-3b_50k.json")
    src.write(tmp_path / cal.hardware / "startup_qwen2.5-vl-3b_50k.json")
    rows = cost_check.compare(cal, cost_check.sources(cal, tmp_path))
    assert {r.max_model_len for r in rows} == {50000} and {r.variant for r in rows} == set(src.variants)
    assert any("50000, seconds" in line for line in cost_check.within_goal(rows))
    assert refimpl_cli(["cost-check", "--calibration", str(tmp_path / "calibration.json"), "--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert cal.label in out and "max_model_len 50000, peak RSS" in out
    assert refimpl_cli(["cost-check", "--results", str(tmp_path / "none")]) == 2
    assert "no calibration for this machine" in capsys.readouterr().err


def test_ratios_to_the_reference_row_for_every_committed_ladder(cal):
    """Each start-up row's seconds over 0.8.5's in the same Result, predicted and measured; the
    summary splits seconds by the calibration's day and names each ladder's ratios."""
    rows = cost_check.compare(cal, [REPO_ROOT / "results/cpu-amd-epyc-2c/startup_qwen2.5-vl-3b_release-rows.json"])
    ratios = cost_check.ratio_rows(rows)
    totals = {r.variant: r for r in rows if r.metric == "total_s"}
    r090 = next(r for r in ratios if r.variant == "0.9.0")
    assert r090.metric == "total_s / 0.8.5" and "0.8.5" not in {r.variant for r in ratios}
    assert r090.measured == pytest.approx(totals["0.9.0"].measured / totals["0.8.5"].measured)
    assert r090.predicted == pytest.approx(totals["0.9.0"].predicted / totals["0.8.5"].predicted)
    lines = cost_check.within_goal(rows + ratios, cal)
    assert any("ratio to 0.8.5 (results/cpu-amd-epyc-2c/startup_qwen2.5-vl-3b_release-rows.json)" in x for x in lines)
    assert any("seconds, other days" in x for x in lines)  # the synthetic calibration's day is 2026-01-01
    assert f"| {r090.measured:.2f}x | {r090.predicted:.2f}x |" in cost_check.comparison_table(ratios, cal)
