"""What each notebook mode asks of the benches, without running one: ``refimpl.lab.studies.measure``
(every bench call of a study: refimpl.lab.bench.trial.run) and the flame graphs are replaced by fakes
that record the spec and return the committed Result of the same bench."""
import pytest

import refimpl.lab.studies as A
import refimpl.lab.studies.serving as V
import refimpl.lab.studies.startup as S
from refimpl.errors import ConfigError
from refimpl.lab.bench import guard
from refimpl.lab.bench.schema import Result
from refimpl.lab.bench.specs import ServeSpec, StartupSpec, WerSpec, parse_limits
from refimpl.lab.studies import REFERENCE, RESULTS_DIR, Study, legacy_file_name
from refimpl.lab.studies.startup import (
    FLAME_VARIANTS,
    StartupStudy,
    quick_setting,
    quick_size,
    quick_variants,
)
from refimpl.lab.studies.startup_tables import AFTER, BEFORE
from refimpl.variants import LADDER

REF = RESULTS_DIR / REFERENCE
STORED = {"startup": "startup_qwen2.5-vl-3b.json", "budget": "budget_qwen2.5-vl-3b.json",
          "throughput": "throughput_whisper-tiny.json", "paired": "paired_whisper-tiny.en_registry_runner-config.json",
          "workload": "workload_whisper-tiny.en_both_all.json", "wer": "wer_whisper-tiny.en.json"}


@pytest.fixture
def benches(monkeypatch):
    """Every bench call of a study: (bench, spec, in_process) for ``measure``, ("flame", spec,
    variant) for flame graphs; each returns the committed Result it would write."""
    calls: list[tuple] = []

    def measure(spec, in_process=False, out=None):
        calls.append((spec.bench, spec, in_process))
        name = STORED[spec.bench]
        if getattr(spec, "process_mode", "") == "mp":
            name = f"twoproc_startup_qwen2.5-vl-3b_{spec.reset_scope}.json"
        return Result.load(REF / name)
    monkeypatch.setattr(A, "measure", measure)
    monkeypatch.setattr(S, "flamegraph", lambda spec, v, *a, **k: calls.append(("flame", spec, v)))
    monkeypatch.setattr(guard, "wait_for_memory", lambda *a: None)
    return calls


def test_quick_rows_picked_by_their_fields_exist_under_the_release_names():
    assert (BEFORE, AFTER) == ("0.8.5", "0.9.0")
    assert quick_variants() == ("0.8.5", "0.9.0", "0.9.0+#24925", "shape-only")
    assert StartupStudy(mode="full").variants == LADDER and "shape-only" in LADDER


def test_mode_and_report_switch():
    assert Study().mode == "stored" and Study(mode="quick").quick and not Study(mode="full").quick
    with pytest.raises(ConfigError, match="mode"):
        Study(mode="fast")
    with pytest.raises(ConfigError, match="hardware"):
        Study(hardware="nope")


def test_stored_mode_measures_nothing(benches, tmp_path):
    """Stored mode reads the committed files through Result.load: files of schema 1 keep the old
    row names on disk (``legacy_file_name``) and are shown under the release rows."""
    s = StartupStudy(out_dir=tmp_path)
    assert s.flamegraphs() == {} and s.startup().bench == "startup" and s.budget().bench == "budget"
    assert {BEFORE, AFTER} <= set(s.startup().variants) and "cache-reset" not in s.startup().variants
    assert {k.split()[0] for k in s.two_process()} == {"v0.9.0", "all"}
    t = V.ServingStudy(out_dir=tmp_path)
    paired = t.paired()
    assert [tuple(r.variants) for r in paired] == [("0.10.2", "0.10.2+#24866"), ("0.10.2+#24866", "0.11.0")]
    assert set(t.encoder_batch().variants) == {"0.11.0", "audios-per-step@2", "audios-per-step@4", "audios-per-step@8"}
    t.workload(), t.wer(), t.unpaired()
    assert t.flame_registry() is None and benches == [] and not s.timings
    assert legacy_file_name("paired_whisper-tiny.en_audios-per-step_sweep.json") == \
        "paired_whisper-tiny.en_encoder-batch_sweep.json"
    with pytest.raises(ConfigError, match="hardware"):  # a folder without this bench's results
        V.ServingStudy(hardware="cpu-intel-xeon-2c", out_dir=tmp_path).paired()


def test_quick_start_up_runs_fresh_processes_at_its_size(benches, tmp_path):
    s = StartupStudy(mode="quick", out_dir=tmp_path)
    s.flamegraphs(), s.startup(), s.budget(), s.two_process()
    flames, runs = [c for c in benches if c[0] == "flame"], [c for c in benches if c[0] != "flame"]
    assert [v for _, _, v in flames] == [quick_variants()[-1]]
    assert [(b, in_process) for b, _, in_process in runs] == [("startup", False), ("budget", False)]
    for _, spec, _ in runs:
        assert isinstance(spec, StartupSpec) and spec.max_model_len == quick_size()
        q = quick_setting()  # the committed setting where the finding held
        assert spec.limit_mm_per_prompt == parse_limits(list(q.limits)) and spec.repeats == 2 and not spec.warmup
        assert spec.process_mode == "inproc"
    assert runs[0][1].variants == quick_variants() and runs[1][1].variants == (BEFORE, AFTER)
    assert runs[0][1].calls is None and runs[1][1].calls == 2
    assert set(s.timings) == {"startup_qwen2.5-vl-3b.json", "budget_qwen2.5-vl-3b.json"}


def test_full_start_up_runs_every_variant_then_both_reset_scopes(benches, tmp_path):
    s = StartupStudy(mode="full", out_dir=tmp_path)
    s.flamegraphs(), s.startup(), s.budget(), s.two_process()
    assert [c[2] for c in benches if c[0] == "flame"] == [v for v in LADDER if v in FLAME_VARIANTS]
    StartupStudy(mode="full", out_dir=tmp_path, flame_variants=None).flamegraphs()
    assert [c[2] for c in benches if c[0] == "flame"][len(FLAME_VARIANTS):] == list(LADDER)  # None: every variant
    runs = [c for c in benches if c[0] != "flame"]
    assert [(spec.variants, spec.repeats, spec.max_model_len) for _, spec, _ in runs[:2]] == [
        (LADDER, 2, None), ((BEFORE, AFTER), 2, None)]
    assert [(spec.process_mode, spec.reset_scope) for _, spec, _ in runs[2:]] == [
        ("mp", "v0.9.0"), ("mp", "all")]
    assert all(not in_process for *_, in_process in runs)
    assert {k.split(" (")[1].split()[0] for k in s.values["two_process"]} == {"this", "stored"}


def test_quick_serving_runs_tiny_paired_rounds_and_the_unpaired_check_in_process(benches, tmp_path):
    t = V.ServingStudy(mode="quick", out_dir=tmp_path)
    t.paired(), t.encoder_batch(), t.workload(), t.wer(), t.unpaired()
    by = {c[0]: c for c in benches}
    paired = [c[1] for c in benches if c[0] == "paired"]
    assert [s.variants for s in paired] == [("0.10.2", "0.10.2+#24866", "0.11.0"), ("0.11.0", "audios-per-step@2")]
    assert all(s.design == "paired" and s.repeats == 2 and not s.warmup and s.budget_s is None for s in paired)
    assert [s.against for s in paired] == ["previous", "first"]
    wl = by["workload"][1]
    assert isinstance(wl, ServeSpec) and wl.design == "workload" and wl.repeats == 1 and wl.warmup_requests == 1
    assert isinstance(by["wer"][1], WerSpec) and by["wer"][1].max_new_tokens == 8
    fresh = by["throughput"]
    assert fresh[1].design == "fresh" and fresh[2] is True  # in process, said so
    assert not any(in_process for b, _, in_process in benches if b != "throughput")  # trial.run refuses it
    # the rule is the pairs, not the mode: the committed run's 15 pairs show its gain
    assert t.values["paired"]["0.10.2+#24866 over 0.10.2"]["gain"] is not None


def test_full_serving_runs_the_budgets_and_fresh_processes(benches, monkeypatch, tmp_path):
    monkeypatch.setattr(V, "flamegraph", lambda spec, v, *a, **k: benches.append(("flame", spec, v)))
    t = V.ServingStudy(mode="full", out_dir=tmp_path)
    t.paired(), t.unpaired(), t.flame_registry()
    assert [(c[1].variants, c[1].budget_s) for c in benches if c[0] == "paired"] == [
        (("0.10.2", "0.10.2+#24866"), 120.0), (("0.10.2+#24866", "0.11.0"), 240.0)]
    assert [c[2] for c in benches if c[0] in ("throughput", "flame")] == [False, "0.10.2"]
