"""The trial loop with real worker processes: a killed bench leaves no worker behind, the analysis reads a partial result (the loop's logic is in tests/lab/bench/test_trial.py)."""
import os
import subprocess
import sys
import time

import psutil
import pytest

from refimpl.lab.bench import trial
from refimpl.lab.bench.schema import Result
from refimpl.lab.bench.specs import StartupSpec
from tests.lab.bench.utils import SPEC


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
