"""Nothing finished is lost when a fresh-process bench does not finish (refimpl/bench/orchestrate.py):
a failing run, Ctrl-C, a refimpl error raised in a worker. The run functions are faked: no
benchmark runs here."""
import json
import os
import subprocess
import sys
import time

import psutil
import pytest

import refimpl.bench.orchestrate as orch
import refimpl.bench.throughput as thr
from refimpl.bench.fresh import FreshProcessError
from refimpl.bench.memory import request_bytes
from refimpl.bench.orchestrate import partial_result, run_fresh
from refimpl.bench.schema import Result, validate
from refimpl.bench.throughput import ThroughputSpec
from refimpl.cli import main
from refimpl.errors import ConfigError

SPEC = ThroughputSpec(variants=("registry", "scheduler-config"), repeats=3, warmup=False)
ARGV = ["bench", "throughput", "--variant", "registry,scheduler-config", "--repeats", "3", "--no-warmup"]


def fake_run(i: int) -> dict:
    return {"variant": "x", "device": "cpu", "requests_per_s": 1.0 + i, "output_tokens_per_s": 10.0 + i,
            "registry_s_total": 0.01, "wall_s": 1.0, "torch_num_threads": 1}


@pytest.fixture
def runs_until(monkeypatch):
    """``runs_until(n, exc)``: worker runs 1..n-1 succeed, run n raises ``exc``."""
    monkeypatch.setattr(thr, "preflight", lambda spec: None)

    def setup(n: int, exc: BaseException):
        calls = []

        def fake(module, args, timeout_s=None, *, env=None):
            calls.append(args)
            if len(calls) == n:
                raise exc
            return fake_run(len(calls))
        monkeypatch.setattr(orch, "run_in_fresh_process", fake)
        return calls
    return setup


def test_a_failed_run_keeps_the_runs_finished_before_it(runs_until):
    runs_until(5, TimeoutError("refimpl.bench.worker ran past 1800.0 s and was killed"))
    with pytest.raises(TimeoutError) as e:  # the error as it was, for `except TimeoutError`
        run_fresh(SPEC)
    res = partial_result(e.value)
    assert [len(res.runs(v)) for v in SPEC.variants] == [2, 2]  # A B A B done, A failed
    assert res.params["failed"].startswith("registry repeat 3/3: TimeoutError: refimpl.bench.worker ran past")
    assert res.params["interrupted"] is False
    validate(res.to_dict())
    assert partial_result(ValueError("not from a bench")) is None


def test_a_complete_result_says_so(runs_until):
    runs_until(99, RuntimeError("never"))
    res = run_fresh(SPEC)
    assert res.params["failed"] is None and res.params["interrupted"] is False and not res.missing


def test_cli_writes_the_finished_runs_and_exits_1(runs_until, tmp_path, capsys):
    runs_until(2, FreshProcessError("refimpl.bench.worker exited with code 1", 1, "Traceback...\nboom"))
    out = tmp_path / "t.json"
    assert main([*ARGV, "--output-json", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == ("refimpl bench throughput: error: scheduler-config repeat 1/3: FreshProcessError: "
                       f"refimpl.bench.worker exited with code 1 (kept the 1 finished runs in {out})")
    res = Result.load(out)
    assert len(res.runs("registry")) == 1 and res.runs("scheduler-config") == [] and res.missing == ["runs"]
    assert res.params["failed"].endswith("boom")  # the worker's output tail is kept in the JSON


def test_a_refimpl_error_of_a_run_exits_2(runs_until, tmp_path, capsys):
    runs_until(1, ConfigError("num_gpu_blocks", 23, "too few KV blocks"))
    out = tmp_path / "t.json"
    assert main([*ARGV, "--output-json", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("refimpl bench throughput: error: registry repeat 1/3: ConfigError: "
                              "num_gpu_blocks: too few KV blocks (limit: 23)")
    assert json.loads(out.read_text())["missing"] == ["runs"]


def test_ctrl_c_keeps_the_runs_marks_them_and_exits_130(runs_until, tmp_path, capsys):
    runs_until(2, KeyboardInterrupt())
    res = run_fresh(SPEC)  # in Python: the partial Result, marked
    assert res.params["interrupted"] is True and res.params["failed"] is None
    assert [len(res.runs(v)) for v in SPEC.variants] == [1, 0]
    runs_until(2, KeyboardInterrupt())
    out = tmp_path / "t.json"
    assert main([*ARGV, "--output-json", str(out)]) == 130
    res = Result.load(out)
    assert res.params["interrupted"] is True and len(res.runs("registry")) == 1
    assert "scheduler-config: no finished run" in capsys.readouterr().out


def test_the_worker_writes_a_refimpl_error_and_the_parent_raises_it_again(tmp_path, monkeypatch):
    from refimpl.bench import worker
    from refimpl.bench.fresh import REFIMPL_ERROR_EXIT, refimpl_error_from_record, run_in_fresh_process

    def refuse(spec, variant):
        raise ConfigError("num_gpu_blocks", ("x", 2), "1 block holds no request")
    monkeypatch.setattr(thr, "run_once", refuse)
    monkeypatch.setattr(worker, "die_with_parent", lambda: calls.append("die_with_parent"))
    calls: list[str] = []
    out = tmp_path / "run.json"
    assert worker.main(["--spec", SPEC.to_json(), "--variant", "registry", "--output-json", str(out)]) \
        == REFIMPL_ERROR_EXIT
    assert calls == ["die_with_parent"]
    rec = json.loads(out.read_text())["refimpl_error"]
    e = refimpl_error_from_record(rec)
    assert type(e) is ConfigError and (e.field, e.limit, e.message) == ("num_gpu_blocks", ["x", 2],
                                                                       "1 block holds no request")
    # a child exiting REFIMPL_ERROR_EXIT with that record: raised again in the parent, same type
    (tmp_path / "refimpl_test_refuser.py").write_text(
        "import argparse, json, sys\nap = argparse.ArgumentParser()\nap.add_argument('--output-json')\n"
        f"json.dump({{'refimpl_error': {rec!r}}}, open(ap.parse_args().output_json, 'w'))\n"
        f"sys.exit({REFIMPL_ERROR_EXIT})\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    with pytest.raises(ConfigError, match=r"num_gpu_blocks: 1 block holds no request \(limit: \['x', 2\]\)"):
        run_in_fresh_process("refimpl_test_refuser", [], timeout_s=60)


def test_throughput_refuses_requests_the_memory_cannot_hold(monkeypatch, capsys, tmp_path):
    import refimpl.memory
    from refimpl.errors import InsufficientMemoryError
    from refimpl.memory import GiB
    per = 480_000 * 4 + 80 * 3000 * 4  # whisper-tiny: 30 s of float32 audio + its log-mel features
    assert request_bytes(ThroughputSpec().model, 10, True) == 10 * per
    assert request_bytes(ThroughputSpec().model, 10, False) \
        == 10 * 480_000 * 4
    monkeypatch.setattr(refimpl.memory, "check_serving_memory", lambda config, available: GiB)  # the engine
    thr.preflight(ThroughputSpec(num_requests=64), available=GiB + 64 * per)
    with pytest.raises(InsufficientMemoryError) as e:  # the engine's bytes count too
        thr.preflight(ThroughputSpec(num_requests=64), available=GiB + 64 * per - 1)
    assert e.value.field == "num_requests" and e.value.limit == GiB + 64 * per - 1
    assert str(e.value).startswith("num_requests: 64 requests hold up to 0.2 GiB")
    monkeypatch.setattr(thr, "run_once", lambda *a: pytest.fail("ran despite too little memory"))
    assert main(["bench", "throughput", "--num-requests", "100000000", "--in-process",
                 "--output-json", str(tmp_path / "t.json")]) == 2
    assert capsys.readouterr().err.startswith("refimpl bench throughput: error: num_requests: 100000000 requests")
    assert not (tmp_path / "t.json").exists()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl(PR_SET_PDEATHSIG) is Linux's")
def test_a_killed_bench_leaves_no_worker_behind(tmp_path):
    """A stand-in worker (die_with_parent, then sleep) under a stand-in bench killed by SIGTERM."""
    pid_file = tmp_path / "worker.pid"
    (tmp_path / "refimpl_test_sleeper.py").write_text(
        "import os, sys, time\nfrom refimpl.bench.fresh import die_with_parent\ndie_with_parent()\n"
        f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(120)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    bench = subprocess.Popen([sys.executable, "-c", "from refimpl.bench.fresh import run_in_fresh_process; "
                              "run_in_fresh_process('refimpl_test_sleeper', [], timeout_s=120)"], env=env)
    try:
        for _ in range(300):
            if pid_file.exists() and pid_file.read_text():
                break
            time.sleep(0.05)
        worker = psutil.Process(int(pid_file.read_text()))
        bench.terminate()
        bench.wait(30)
        for _ in range(400):  # up to 20 s for the kernel's SIGTERM to end it
            try:
                if worker.status() == psutil.STATUS_ZOMBIE:
                    break
            except psutil.NoSuchProcess:
                break
            time.sleep(0.05)
        else:
            worker.kill()
            pytest.fail("the worker outlived its bench")
    finally:
        if bench.poll() is None:
            bench.kill()


def test_the_analysis_reads_a_partial_result(tmp_path):
    """A Result interrupted after 2 + 1 + 0 runs: the tables, figure and summaries show the runs
    that exist and say the result is partial."""
    import matplotlib
    matplotlib.use("Agg")
    from refimpl.analysis import startup as S
    from refimpl.analysis import throughput as T
    from refimpl.bench.orchestrate import build_result
    from refimpl.bench.startup import StartupSpec
    run = {**fake_run(0), "registry_calls": 3, "steps": 5, "step_time_ms_median": 3.0}
    res = build_result(ThroughputSpec(variants=("registry", "runner-config", "scheduler-config")),
                       {"registry": [run, run], "runner-config": [run], "scheduler-config": []}, False,
                       interrupted=True)
    text = T.summary_md(res, tmp_path)
    assert "**Partial result** (runs per variant: registry 2, runner-config 1, scheduler-config 0): interrupted" in text
    assert "| scheduler-config / runner-config | - | - | no runs of scheduler-config |" in text
    T.throughput_figure(res, None, tmp_path)
    srun = {"device": "cpu", "total_s": 2.0, "phases": {"load": 1.0}, "hf_mm_passes": 3, "peak_rss_bytes": 1e9}
    sres = build_result(StartupSpec(model="qwen2.5-vl-3b", variants=("no-cache", "cache-reset")),
                        {"no-cache": [srun], "cache-reset": []}, False, failed="cache-reset repeat 1/3: TimeoutError: x")
    text = S.summary_md(sres)
    assert "**Partial result** (runs per variant: no-cache 1, cache-reset 0): cache-reset repeat 1/3: TimeoutError" in text
    assert T.partial_note(build_result(SPEC, {v: [run] for v in SPEC.variants}, False)) == ""


def test_an_interrupted_paired_bench_exits_130(monkeypatch, tmp_path):
    import refimpl.bench.paired as paired
    spec = paired.PairedSpec(variants=("runner-config", "scheduler-config"))
    empty = {v: {"wall_s": [], "cpu_s": [], "registry_s": [], "registry_calls": [], "steps": []}
             for v in spec.variants}
    monkeypatch.setattr(paired, "run", lambda spec, progress=None: paired.result_of(
        spec, {"by_variant": empty, "tokens_identical": True, "benchmark_s": 0.0, "interrupted": True}, [], 1))
    assert main(["bench", "paired", "--variant", "runner-config,scheduler-config",
                 "--output-json", str(tmp_path / "p.json")]) == 130
    assert Result.load(tmp_path / "p.json").params["interrupted"] is True


def test_a_notebook_s_failed_measurement_leaves_its_finished_runs(runs_until, tmp_path):
    from refimpl.analysis import measure
    runs_until(3, TimeoutError("refimpl.bench.worker ran past 1800.0 s and was killed"))
    with pytest.raises(TimeoutError):
        measure(SPEC, in_process=False, out=tmp_path / "t.json")
    res = Result.load(tmp_path / "t.json")
    assert [len(res.runs(v)) for v in SPEC.variants] == [1, 1] and "TimeoutError" in res.params["failed"]
