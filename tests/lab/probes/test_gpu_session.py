"""Issue 48's GPU session, prepared on the CPU: the registry-call probe (W2), the paired design's
precision stop (W4), the rules written before the run (the output length, the pass rule) and the whole
script's dry run with its resume (behaviour, never timings)."""
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from refimpl.errors import ConfigError
from refimpl.lab import cli
from refimpl.lab.bench import guard, serve, sweep, trial
from refimpl.lab.bench.schema import Result, validate
from refimpl.lab.bench.specs import ServeSpec
from refimpl.lab.probes import cli as probe_cli
from refimpl.lab.probes import probe_function
from refimpl.lab.probes.registry_call import WAYS
from refimpl.lab.probes.specs import RegistryCallSpec
from refimpl.lab.studies import gpu_session as gs

ROOT = Path(__file__).resolve().parents[3]
A, B = W4 = gs.W4_VARIANTS


def test_registry_call_probe_times_each_way_and_counts_every_call():
    res = probe_function("registry-call")(RegistryCallSpec(model="whisper-tiny.en", calls=3, threaded_calls=2, hf_calls=2))
    validate(res.to_dict())
    assert res.bench == "registry-call" and tuple(res.variants) == WAYS
    assert [len(v["runs"]) for v in res.variants.values()] == [3, 2, 2]
    assert all(r["s"] > 0 for v in res.variants.values() for r in v["runs"])
    assert res.params["encoder_len"] == 1500
    assert res.params["registry_calls"] == (3 + 1) + (2 + 1) + 1  # each way's untimed call, the last lookup


@pytest.mark.parametrize("spec, field", [
    (RegistryCallSpec(calls=0), "calls"), (RegistryCallSpec(hf_calls=0), "hf_calls"),
    (RegistryCallSpec(model="qwen2.5-vl-3b"), "model"),
])
def test_registry_call_probe_refuses_bad_input_naming_the_field(spec, field):
    with pytest.raises(Exception) as e:
        spec.check()
    assert getattr(e.value, "field", None) == field


def _paired(**kw) -> ServeSpec:
    return ServeSpec(design="paired", model="whisper-tiny.en", variants=(A, B), device="cpu", **kw)


@pytest.mark.parametrize("kw, field", [
    (dict(stop_half_width=0.0), "stop_half_width"), (dict(stop_half_width=0.8, stop_min_pairs=1), "stop_min_pairs"),
])
def test_the_precision_stop_refuses_bad_values(kw, field):
    with pytest.raises(ConfigError) as e:
        guard.check(_paired(**kw), memory=False)
    assert e.value.field == field
    with pytest.raises(ConfigError) as e:
        guard.check(ServeSpec(design="workload", stop_half_width=0.8), memory=False)
    assert e.value.field == "stop_half_width"


def _runs(n: int, a: float = 1.03, b: float = 1.0, jitter: float = 0.0) -> dict[str, list[dict]]:
    rec = lambda w, i: {"wall_s": w * (1 + jitter * (i % 3 - 1)), "registry_s": 0.0}  # noqa: E731
    return {A: [rec(a, i) for i in range(n)], B: [rec(b, i + 1) for i in range(n)]}  # B's jitter out of phase


def test_the_precision_stop_reads_the_half_width_only_after_whole_rounds_and_min_pairs():
    spec = _paired(stop_half_width=0.8, stop_min_pairs=4).resolve()
    assert serve.enough(spec, _runs(4)) and "after 4 pairs" in serve.enough(spec, _runs(4))
    assert serve.enough(spec, _runs(2)) is None              # fewer pairs than stop_min_pairs
    assert serve.enough(spec, _runs(5)) is None              # not a whole A B B A round
    assert serve.enough(spec, {A: _runs(4)[A], B: _runs(3)[B]}) is None   # a round half done
    assert serve.enough(spec, _runs(4, jitter=0.2)) is None  # wide: 20% jitter per block
    assert serve.enough(_paired(stop_min_pairs=4).resolve(), _runs(4)) is None   # the rule off


def _fake(records):
    class Fake:
        def __init__(self, spec):
            self.i = 0

        def __call__(self, step):
            if step.round is None:
                return {}
            self.i += 1
            return dict(records(step.label, step.round), tokens=[[1, 2]])
    return Fake


def _record(a_wall: float):
    def records(label, r):
        over = label == A
        return {"wall_s": a_wall if over else 1.0, "cpu_s": 1.0, "registry_s": 0.03 if over else 0.0,
                "registry_calls": 30 if over else 0, "steps": 100,
                "step_summary": {"decode": {"steps": 100, "wall_s_total": 1.0, "wall_s_median": 0.01}}}
    return records


def test_the_trial_stops_by_the_precision_rule_and_says_so(monkeypatch):
    monkeypatch.setattr(serve, "executor", _fake(_record(1.03)))
    res = trial.run(_paired(stop_half_width=0.8, stop_min_pairs=6, repeats=40))
    assert res.params["rounds_run"] == 6 and "after 6 pairs" in res.params["stopped_early"]
    out = gs.verdict(res)   # direct 3.00 points; from its parts 30 x 1 ms / (100 x 10 ms) = 3.00 points
    assert out["agree"] and out["points_apart"] == pytest.approx(0.0, abs=1e-9)
    assert out["direct"]["pairs"] == 6 and set(out["telemetry"]) == {A, B}


def test_the_pass_rule_fails_when_the_direct_gain_is_not_its_parts(monkeypatch):
    monkeypatch.setattr(serve, "executor", _fake(_record(1.08)))
    res = trial.run(_paired(repeats=6))
    assert "stopped_early" not in res.params and res.params["rounds_run"] == 6
    out = gs.verdict(res)   # direct 8 points against 3 from its parts
    assert not out["agree"] and out["points_apart"] == pytest.approx(5.0, abs=1e-6)


def test_the_output_length_rule_keeps_224_inside_the_band_and_moves_to_3_percent_outside():
    step_s = 0.01
    call_in = 0.03 * step_s * gs.W4_OUTPUT_LEN * gs.W4_REQUESTS / gs.W4_CONCURRENCY / gs.W4_REQUESTS  # 3% at 224
    n, g = gs.choose_output_len(call_in, step_s)
    assert n == 224 and g == pytest.approx(0.03, rel=1e-3)
    n, g = gs.choose_output_len(2 * call_in, step_s)   # 6% at 224: a longer L
    assert 224 < n <= 440 and abs(g - 0.03) < abs(gs.predicted_gain(2 * call_in, step_s, 224) - 0.03)
    assert gs.choose_output_len(100 * call_in, step_s)[0] == 440   # the range's ends
    assert gs.choose_output_len(call_in / 100, step_s)[0] == 128


def _plan(call: str, out: Path) -> dict[str, list[str]]:
    done = subprocess.run(["bash", "scripts/gpu_session.sh", call], cwd=ROOT, capture_output=True, text=True,
                          env=dict(os.environ, PLAN="1", OUT=str(out)), timeout=60)
    assert done.returncode == 0, done.stderr
    return {w[1]: w[3:] for w in (shlex.split(line) for line in done.stdout.splitlines() if line.startswith("PLAN "))}


def test_the_gpu_plan_sections_in_order_and_every_command_passes_the_guard(tmp_path):
    """PLAN=1 at the GPU sizes: the sections of each call in order, each refimpl line parsed and checked
    (with cpu for cuda, absent here), the issue's sizes in the specs."""
    one, two = _plan("call1", tmp_path), _plan("call2", tmp_path)
    assert list(one) == ["W0", "W2", "W3", "W4_plan", "W4", "W4_verdict", "W5"] and list(two) == ["C2a", "C2b"]
    specs = {}
    for name, argv in {**one, **two}.items():
        if argv[:3] != [argv[0], "-m", "refimpl.lab.cli"]:
            continue
        args = argv[3:]
        if args[:1] == ["probe"]:
            spec, _ = probe_cli.parse(args[1:])
            spec.check()
        elif args[:2] == ["bench", "sweep"]:
            run = sweep.plan(Path(args[args.index("--params") + 1]), "serve", tmp_path, "W3", dry_run=True)
            spec = [r.spec.resolve() for r in run.runs]
        else:
            spec, _, _ = cli.parse(args[1:])
            assert spec.device == "cuda"
            guard.check(spec.replace(device="cpu"), memory=False)
            spec = spec.resolve()
        specs[name] = spec
    assert (specs["W2"].calls, specs["W2"].threaded_calls, specs["W2"].hf_calls) == (300, 100, 100)
    w3 = {r.name: r.spec.resolve() for r in sweep.plan(tmp_path / "W3.toml", "serve", tmp_path, "W3", dry_run=True).runs}
    for c in (1, 4, 16, 64):
        assert (w3[f"c{c}"].max_concurrency, w3[f"c{c}"].output_len) == (c, 200 + c)
    assert w3["generate"].variants == ("hf-generate",) and (w3["generate"].num_requests, w3["generate"].output_len) == (16, 32)
    w4 = specs["W4"]
    assert w4.variants == W4 and (w4.max_concurrency, w4.output_len, w4.budget_s) == (4, 224, 150)
    assert (w4.stop_half_width, w4.stop_min_pairs) == (0.8, 12)
    assert specs["W5"].variants == ("0.10.2", "0.10.2+#24866", "0.11.0")
    c2a, c2b = specs["C2a"], specs["C2b"]
    assert (c2a.calls, c2a.repeats, c2a.warmup, c2a.max_model_len) == (1, 3, False, 128000)
    assert c2b.variants == ("0.11.1", "0.9.0+#19756") and not c2b.warmup and c2b.repeats == 1


@pytest.mark.slow
def test_the_whole_session_dry_runs_on_the_cpu_and_resumes(tmp_path):
    """DRY=1: call 1 at small sizes writes every section's JSON (W4 and W5 ended by a stop rule, never a
    cap: DRY's call budget is 3000 s and its caps 20 times the GPU's, far above the dry work's minutes
    on a loaded host), then RESUME=1 skips them all."""
    env = dict(os.environ, DRY="1", OUT=str(tmp_path), PYTHON=sys.executable)
    run = lambda: subprocess.run(["bash", "scripts/gpu_session.sh", "call1"], cwd=ROOT, env=env,  # noqa: E731
                                 capture_output=True, text=True, timeout=3600)  # above DRY's CALL1_S
    first = run()
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    made = ["W0_telemetry.json", "W2_registry_call.json", "W3/generate.json", "W4_plan.json", "W4_ab.json",
            "W4_verdict.json", "W5_rows.json"]
    for name in made:
        assert (tmp_path / name).exists(), name
    for name in ("W2_registry_call.json", "W4_ab.json", "W5_rows.json",
                 *(f"W3/{n}.json" for n in ("c2", "mixed_c4", "encoder", "generate"))):
        validate(Result.load(tmp_path / name).to_dict())
    w4 = Result.load(tmp_path / "W4_ab.json")
    assert w4.params.get("stopped_early") or w4.params["rounds_run"] >= 1   # the precision stop, else the budget ended it (rounds depend on the host)
    w5 = Result.load(tmp_path / "W5_rows.json")
    assert not w5.params["interrupted"] and w5.params["rounds_run"] >= 1   # W5 ended by its 4 s budget
    assert 128 <= gs.plan(Result.load(tmp_path / "W2_registry_call.json"),
                          Result.load(tmp_path / "W3/c2.json"))["output_len"] <= 440
    mixed = Result.load(tmp_path / "W3/mixed_c4.json").runs("0.11.0")[0]["step_summary"]
    assert mixed["mixed"]["steps"] >= 4
    stamps = {n: (tmp_path / n).stat().st_mtime_ns for n in made}
    env["RESUME"] = "1"
    again = run()
    assert again.returncode == 0, again.stdout[-3000:]
    assert again.stdout.count("(RESUME=1): skipped") == 7
    assert {n: (tmp_path / n).stat().st_mtime_ns for n in made} == stamps
