"""The one trial loop (refimpl/lab/bench/trial.py): its orders, and nothing finished is lost when a
run does not finish (a failing run, Ctrl-C, a refimpl error raised in a worker); the Result says
why and ``exit_status`` maps it. Fresh processes are faked: no benchmark runs here."""
import json

import pytest

from refimpl.errors import ConfigError
from refimpl.lab.bench import fresh, serve, trial
from refimpl.lab.bench.fresh import FreshProcessError, run_in_fresh_process
from refimpl.lab.bench.schema import Result, validate
from refimpl.lab.bench.specs import spec_to_json
from refimpl.lab.bench.trial import exit_status, steps
from refimpl.lab.cli import main
from tests.lab.bench.utils import SPEC

ARGV = ["bench", "serve", "--variants", "0.10.2", "0.11.0", "--repeats", "3", "--no-warmup"]






def test_orders():
    labels = ("A", "B")
    assert [str(s) for s in steps(labels, 2, True)] == ["A warm-up", "B warm-up", "A repeat 1/2", "B repeat 1/2",
                                                        "A repeat 2/2", "B repeat 2/2"]
    assert [s.label for s in steps(("A", "B", "C"), 3, False, abba=True)] == list("ABCCBAABC")
    clock = iter([0.0, 10.0, 25.0, 100.0]).__next__  # round 1 took 10 s; 2 more fit in 30 s, not 3
    assert [str(s) for s in steps(labels, 100, False, abba=True, budget_s=30.0, clock=clock)] == \
        ["A round 1", "B round 1", "B round 2", "A round 2"]


def test_a_failed_run_keeps_the_runs_finished_before_it(runs_until):
    runs_until(5, TimeoutError("refimpl.lab.bench.fresh ran past 1800.0 s and was killed"))
    res = trial.run(SPEC)
    assert [len(res.runs(v)) for v in SPEC.labels] == [2, 2]  # A B A B done, A failed
    assert res.params["failed"].startswith("0.10.2 repeat 3/3: TimeoutError: refimpl.lab.bench.fresh ran past")
    assert res.params["interrupted"] is False and exit_status(res) == 1
    validate(res.to_dict())
    runs_until(99, RuntimeError("never"))
    res = trial.run(SPEC)
    assert res.params["failed"] is None and not res.params["interrupted"] and not res.missing and exit_status(res) == 0


def test_cli_writes_the_finished_runs_and_exits_1(runs_until, tmp_path, capsys):
    runs_until(2, FreshProcessError("refimpl.lab.bench.fresh exited with code 1", 1, "Traceback...\nboom"))
    out = tmp_path / "t.json"
    assert main([*ARGV, "--output-json", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == ("refimpl bench serve: error: 0.11.0 repeat 1/3: FreshProcessError: "
                       f"refimpl.lab.bench.fresh exited with code 1 (kept the 1 finished runs in {out})")
    res = Result.load(out)
    assert len(res.runs("0.10.2")) == 1 and res.runs("0.11.0") == [] and res.missing == ["runs"]
    assert res.params["failed"].endswith("boom")  # the worker's output tail is kept in the JSON


def test_a_refimpl_error_of_a_run_exits_2(runs_until, tmp_path, capsys):
    runs_until(1, ConfigError("num_gpu_blocks", 23, "too few KV blocks"))
    out = tmp_path / "t.json"
    assert main([*ARGV, "--output-json", str(out)]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith(
        "refimpl bench serve: error: 0.10.2 repeat 1/3: ConfigError: num_gpu_blocks: too few KV blocks (limit: 23)")
    assert json.loads(out.read_text())["params"]["refimpl_error"] is True


def test_ctrl_c_keeps_the_runs_marks_them_and_exits_130(runs_until, tmp_path, capsys, monkeypatch):
    runs_until(2, KeyboardInterrupt())
    res = trial.run(SPEC)
    assert res.params["interrupted"] is True and res.params["failed"] is None and exit_status(res) == 130
    assert [len(res.runs(v)) for v in SPEC.labels] == [1, 0]
    runs_until(2, KeyboardInterrupt())
    monkeypatch.chdir(tmp_path)  # no --output-json: reports/<bench>_<model>_<UTC>.json
    assert main(ARGV) == 130
    (out,) = (tmp_path / "reports").glob("throughput_whisper-tiny_*Z.json")
    assert Result.load(out).params["interrupted"] is True
    io = capsys.readouterr()
    assert "**Partial result** (runs per variant: 0.10.2 1, 0.11.0 0): interrupted" in io.out
    assert "no runs of 0.11.0" in io.out and f"wrote {out.relative_to(tmp_path)}" in io.out
    assert "interrupted: keeping the runs finished so far" in io.err


def test_the_worker_writes_a_refimpl_error_and_the_parent_raises_it_again(tmp_path, monkeypatch):
    def refuse(spec, variant):
        raise ConfigError("num_gpu_blocks", ("x", 2), "1 block holds no request")
    monkeypatch.setattr(serve, "run_once", refuse)
    monkeypatch.setattr(fresh, "die_with_parent", lambda: calls.append("die_with_parent"))
    calls: list[str] = []
    out = tmp_path / "run.json"
    assert fresh.main(["--spec", spec_to_json(SPEC), "--variant", "0.10.2", "--output-json", str(out)]) \
        == fresh.REFIMPL_ERROR_EXIT
    assert calls == ["die_with_parent"]
    rec = json.loads(out.read_text())["refimpl_error"]
    (tmp_path / "refimpl_test_refuser.py").write_text(  # a child exiting REFIMPL_ERROR_EXIT with that record
        "import argparse, json, sys\nap = argparse.ArgumentParser()\nap.add_argument('--output-json')\n"
        f"json.dump({{'refimpl_error': {rec!r}}}, open(ap.parse_args().output_json, 'w'))\n"
        f"sys.exit({fresh.REFIMPL_ERROR_EXIT})\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    with pytest.raises(ConfigError) as e:  # raised again in the parent, the same type, field and limit
        run_in_fresh_process("refimpl_test_refuser", [], timeout_s=60)
    assert type(e.value) is ConfigError and (e.value.field, e.value.limit, e.value.message) == (
        "num_gpu_blocks", ("x", 2), "1 block holds no request")


def test_a_notebook_s_failed_measurement_leaves_its_finished_runs(runs_until, tmp_path):
    from refimpl.lab.studies import measure
    runs_until(3, TimeoutError("refimpl.lab.bench.fresh ran past 1800.0 s and was killed"))
    with pytest.raises(RuntimeError, match="TimeoutError"):
        measure(SPEC, in_process=False, out=tmp_path / "t.json")
    res = Result.load(tmp_path / "t.json")
    assert [len(res.runs(v)) for v in SPEC.labels] == [1, 1] and "TimeoutError" in res.params["failed"]
