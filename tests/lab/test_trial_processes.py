"""The trial loop with real worker processes: a killed bench leaves no worker behind, the analysis reads a partial result (the loop's logic is in tests/core/test_trial.py)."""
import os
import subprocess
import sys
import time

import psutil
import pytest

from refimpl.lab.bench import guard, trial
from refimpl.lab.bench.schema import Result
from refimpl.lab.bench.specs import ServeSpec, StartupSpec

SPEC = ServeSpec(variants=("0.10.2", "0.11.0"), repeats=3, warmup=False)


def fake_run(i: int) -> dict:
    return {"variant": "x", "device": "cpu", "requests_per_s": 1.0 + i, "output_tokens_per_s": 10.0 + i,
            "registry_s_total": 0.01, "wall_s": 1.0, "torch_num_threads": 1, "registry_calls": 3, "steps": 5,
            "step_time_ms_median": 3.0}


@pytest.fixture
def runs_until(monkeypatch):
    """``runs_until(n, exc)``: fresh-process runs 1..n-1 succeed, run n raises ``exc``."""
    monkeypatch.setattr(guard, "check_memory", lambda *a, **k: None)

    def setup(n: int, exc: BaseException):
        calls = []

        def fake(module, args, timeout_s=None, *, env=None):
            calls.append(args)
            if len(calls) == n:
                raise exc
            return fake_run(len(calls))
        monkeypatch.setattr(trial, "run_in_fresh_process", fake)
        return calls
    return setup


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl(PR_SET_PDEATHSIG) is Linux's")
def test_a_killed_bench_leaves_no_worker_behind(tmp_path):
    """A stand-in worker (die_with_parent, then sleep) under a stand-in bench killed by SIGTERM."""
    pid_file = tmp_path / "worker.pid"
    (tmp_path / "refimpl_test_sleeper.py").write_text(
        "import os, sys, time\nfrom refimpl.lab.bench.fresh import die_with_parent\ndie_with_parent()\n"
        f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(120)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    bench = subprocess.Popen([sys.executable, "-c", "from refimpl.lab.bench.fresh import run_in_fresh_process; "
                              "run_in_fresh_process('refimpl_test_sleeper', [], timeout_s=120)"], env=env)
    try:
        for _ in range(600):
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


@pytest.mark.slow
def test_the_analysis_reads_a_partial_result(runs_until, tmp_path):
    """Results interrupted or failed part way: the tables, figure and summaries show the runs
    that exist and say the result is partial."""
    from refimpl.lab.studies import startup as S
    from refimpl.lab.studies import throughput as T
    runs_until(4, KeyboardInterrupt())
    res = trial.run(SPEC.replace(variants=("0.10.2", "0.10.2+#24866", "0.11.0")).replace(repeats=2))
    text = T.summary_md(res, tmp_path)
    assert "**Partial result** (runs per variant: 0.10.2 1, 0.10.2+#24866 1, 0.11.0 1): interrupted" in text
    runs_until(3, TimeoutError("x"))
    res = trial.run(SPEC.replace(variants=("0.10.2", "0.10.2+#24866", "0.11.0")))
    assert "| 0.11.0 / 0.10.2+#24866 | - | - | no runs of 0.11.0 |" in T.summary_md(res, tmp_path)
    T.throughput_figure(res, tmp_path)
    srun = {"device": "cpu", "total_s": 2.0, "phases": {"load": 1.0}, "hf_mm_passes": 3, "peak_rss_bytes": 1e9}
    runs_until(99, RuntimeError("never"))
    sres = Result("startup", res.env, {**StartupSpec().params(), "failed": "0.9.0 repeat 1/3: TimeoutError: x"},
                  {"0.8.5": {"runs": [srun], "summary": {}}, "0.9.0": {"runs": [], "summary": {}}},
                  missing=["runs"])
    assert "**Partial result** (runs per variant: 0.8.5 1, 0.9.0 0): 0.9.0 repeat 1/3: TimeoutError" \
        in S.summary_md(sres)
