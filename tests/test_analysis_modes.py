"""What each notebook mode asks of the benches, without running one: the bench entry points are
replaced by fakes that record the spec and return the committed Result of the same bench."""
import pytest

import refimpl.analysis as A
import refimpl.analysis.serving as V
import refimpl.analysis.startup as S
from refimpl.analysis import REFERENCE, RESULTS_DIR, Study
from refimpl.analysis.startup import QUICK_MAX_MODEL_LEN, StartupStudy, quick_variants
from refimpl.analysis.startup_tables import AFTER, BEFORE
from refimpl.bench import paired, wer, workload
from refimpl.bench.schema import Result
from refimpl.errors import ConfigError
from refimpl.variants import STARTUP_VARIANTS

REF = RESULTS_DIR / REFERENCE
PATTERN = {"paired": "paired_*_registry_*.json", "workload": "workload_*_both_all.json", "wer": "wer_*.json"}


@pytest.fixture
def benches(monkeypatch):
    """Every bench call of a study: (bench, spec, in_process) for ``measure``, (name, spec) for
    in-process benches and flame graphs; each returns the committed Result it would write."""
    calls: list[tuple] = []

    def measure(spec, in_process=False, out=None):
        calls.append((spec.bench, spec, in_process))
        name = {"startup": "startup_qwen2.5-vl-3b.json", "budget": "budget_qwen2.5-vl-3b.json",
                "throughput": "throughput_whisper-tiny.json"}[spec.bench]
        if getattr(spec, "process_mode", "") == "mp":
            name = f"twoproc_startup_qwen2.5-vl-3b_{spec.reset_scope}.json"
        return Result.load(REF / name)

    def fake(name: str):
        def run(spec, *a, **k):
            calls.append((name, spec))
            return Result.load(next(REF.glob(PATTERN[name])))
        return run
    monkeypatch.setattr(A, "measure", measure)
    monkeypatch.setattr(S, "flamegraph", lambda spec, v, *a, **k: calls.append(("flame", spec, v)))
    monkeypatch.setattr(S, "wait_for_memory", lambda *a: None)
    for mod, name in ((paired, "paired"), (workload, "workload"), (wer, "wer")):
        monkeypatch.setattr(mod, "run", fake(name))
    return calls


def test_mode_and_report_switch():
    assert Study().mode == "stored"
    assert Study(quick=True).mode == "quick" and Study(quick=False, mode="stored").mode == "full"
    with pytest.raises(ConfigError, match="mode"):
        Study(mode="fast")
    with pytest.raises(ConfigError, match="hardware"):
        Study(hardware="nope")


def test_stored_mode_measures_nothing(benches, tmp_path):
    s = StartupStudy(out_dir=tmp_path)
    assert s.flamegraphs() == {} and s.startup().bench == "startup" and s.budget().bench == "budget"
    assert {k.split()[0] for k in s.two_process()} == {"v0.9.0", "all"}
    t = V.ServingStudy(out_dir=tmp_path)
    t.paired(), t.encoder_batch(), t.workload(), t.wer(), t.unpaired()
    assert t.flame_registry() is None and benches == [] and not s.timings
    with pytest.raises(ConfigError, match="hardware"):  # a folder without this bench's results
        V.ServingStudy(hardware="cpu-intel-xeon-2c", out_dir=tmp_path).paired()


def test_quick_start_up_runs_fresh_processes_at_its_size(benches, tmp_path):
    s = StartupStudy(quick=True, out_dir=tmp_path)
    s.flamegraphs(), s.startup(), s.budget(), s.two_process()
    flames, runs = [c for c in benches if c[0] == "flame"], [c for c in benches if c[0] != "flame"]
    assert [v for _, _, v in flames] == [quick_variants()[-1]]
    assert [(b, in_process) for b, _, in_process in runs] == [("startup", False), ("budget", False)]
    for _, spec, _ in runs:
        assert spec.max_model_len == QUICK_MAX_MODEL_LEN and spec.limit_mm_per_prompt == {"image": 0}
        assert spec.repeats == 2 and not spec.warmup and spec.process_mode == "inproc"
    assert runs[0][1].variants == quick_variants() and runs[1][1].variants == (BEFORE, AFTER)
    assert set(s.timings) == {"startup_qwen2.5-vl-3b.json", "budget_qwen2.5-vl-3b.json"}


def test_full_start_up_runs_every_variant_then_both_reset_scopes(benches, tmp_path):
    s = StartupStudy(mode="full", out_dir=tmp_path)
    s.flamegraphs(), s.startup(), s.budget(), s.two_process()
    assert [c[2] for c in benches if c[0] == "flame"] == list(STARTUP_VARIANTS)
    runs = [c for c in benches if c[0] != "flame"]
    assert [(spec.variants, spec.repeats, spec.max_model_len) for _, spec, _ in runs[:2]] == [
        (tuple(STARTUP_VARIANTS), 3, None), ((BEFORE, AFTER), 5, None)]
    assert [(spec.process_mode, spec.reset_scope) for _, spec, _ in runs[2:]] == [
        ("mp", "v0.9.0"), ("mp", "all")]
    assert all(not in_process for *_, in_process in runs)
    assert {k.split(" (")[1].split()[0] for k in s.values["two_process"]} == {"this", "stored"}


def test_quick_serving_runs_tiny_paired_rounds_and_the_unpaired_check_in_process(benches, tmp_path):
    t = V.ServingStudy(quick=True, out_dir=tmp_path)
    t.paired(), t.encoder_batch(), t.workload(), t.wer(), t.unpaired()
    by = {c[0]: c for c in benches}
    assert [c[1].variants for c in benches if c[0] == "paired"] == [
        ("registry", "runner-config", "scheduler-config"), ("scheduler-config", "encoder-batch@2")]
    assert all(c[1].rounds == 2 and c[1].warmup_rounds == 0 for c in benches if c[0] == "paired")
    assert by["workload"][1].repeats == 1 and by["throughput"][2] is True  # in process, said so
    # the rule is the pairs, not the mode: the committed run's 15 pairs show its gain
    assert t.values["paired"]["runner-config over registry"]["gain"] is not None


def test_full_serving_runs_the_budgets_and_fresh_processes(benches, monkeypatch, tmp_path):
    monkeypatch.setattr(V, "flamegraph", lambda spec, v, *a, **k: benches.append(("flame", spec, v)))
    t = V.ServingStudy(mode="full", out_dir=tmp_path)
    t.paired(), t.unpaired(), t.flame_registry()
    assert [(c[1].variants, c[1].budget_s) for c in benches if c[0] == "paired"] == [
        (("registry", "runner-config"), 150.0), (("runner-config", "scheduler-config"), 450.0)]
    assert [c[2] for c in benches if c[0] in ("throughput", "flame")] == [False, "registry"]
