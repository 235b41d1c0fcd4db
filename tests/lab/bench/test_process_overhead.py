"""A fresh run's per-process overhead (issue 42): the parent stamps its launch time, the worker
records what it paid before its bench began (``process_overhead_s`` and its split) beside the
bench's own fields; the start-up bench's JSON carries the per-phase parts and the encoder forward."""
import json
import os
import sys
import textwrap
import time
import types

import pytest

from refimpl.engine.startup_plan import CHECK_PHASE
from refimpl.engine.startup_report import MM_PARTS
from refimpl.lab.bench import fresh
from refimpl.lab.bench import startup as S
from refimpl.lab.bench.specs import StartupSpec

CHILD = textwrap.dedent("""
    import argparse, json, os
    ap = argparse.ArgumentParser()
    ap.add_argument("--output-json", required=True)
    a = ap.parse_args()
    json.dump({"launch": os.environ.get("REFIMPL_LAUNCH_TIME")}, open(a.output_json, "w"))
""")


def test_the_parent_stamps_its_launch_time_for_the_child(tmp_path):
    (tmp_path / "refimpl_launch_child.py").write_text(CHILD)
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    t0 = time.time()
    out = fresh.run_in_fresh_process("refimpl_launch_child", [], timeout_s=60, env=env)
    assert fresh.LAUNCH_ENV == "REFIMPL_LAUNCH_TIME"
    assert t0 <= float(out["launch"]) <= time.time()


def _main(monkeypatch, tmp_path, launched):
    seen = {}

    def run_once(spec, variant):
        seen["variant"] = variant
        return {"variant": variant, "total_s": 1.0}
    monkeypatch.setattr(fresh, "bench_module", lambda spec: types.SimpleNamespace(run_once=run_once))
    if launched is None:
        monkeypatch.delenv(fresh.LAUNCH_ENV, raising=False)
    else:
        monkeypatch.setenv(fresh.LAUNCH_ENV, repr(launched))
    out = tmp_path / "run.json"
    spec = fresh.spec_to_json(StartupSpec(variants=("0.9.0",)))
    assert fresh.main(["--spec", spec, "--variant", "0.9.0", "--output-json", str(out)]) == 0
    assert seen == {"variant": "0.9.0"} and fresh.LAUNCH_ENV not in os.environ
    return json.loads(out.read_text())


def test_the_worker_records_its_overhead_beside_the_bench_fields(monkeypatch, tmp_path):
    launched = time.time() - 2.0  # as if the interpreter and imports had taken 2 s
    run = _main(monkeypatch, tmp_path, launched)
    assert run["variant"] == "0.9.0" and run["total_s"] == 1.0
    over = run["process_overhead"]
    assert run["process_overhead_s"] >= 2.0 and over["interpreter_s"] >= 2.0 and over["bench_imports_s"] >= 0.0
    assert abs(over["interpreter_s"] + over["bench_imports_s"] - run["process_overhead_s"]) < 1e-9


def test_a_worker_started_by_hand_records_no_overhead(monkeypatch, tmp_path):
    run = _main(monkeypatch, tmp_path, None)
    assert "process_overhead_s" not in run and "process_overhead" not in run


def test_the_startup_json_has_the_mechanism_fields():
    spec = StartupSpec(model="qwen2.5-vl-3b", max_model_len=4096, variants=("0.9.0",),
                       mm_processor_kwargs={"max_pixels": 28 * 28 * 64}).resolve()
    run = json.loads(json.dumps(S.run_once(spec, "0.9.0")))  # as the JSON holds it
    assert {"mm_seconds_by_phase", "profile_encoder_forward_s"} <= set(S.REPORTED) <= set(run)
    assert set(run["mm_seconds_by_phase"]) == set(run["phases"]) - {"config", CHECK_PHASE}
    assert all(tuple(p) == MM_PARTS for p in run["mm_seconds_by_phase"].values())
    assert 0.0 < run["profile_encoder_forward_s"] <= run["phases"]["profile_run"]


def test_an_in_process_startup_imports_no_two_process_machinery():
    """The cut of the fresh worker's imports: the start-up bench imports the two-process front end,
    the audio clips and the photos only where they run (``python -X importtime`` named them)."""
    code = ("import sys, refimpl.lab.bench.startup; "
            "print(sorted(m for m in ('refimpl.engine.mp.frontend', 'refimpl.audio', 'refimpl.multimodal.photos', "
            "'zmq') if m in sys.modules))")
    import subprocess
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ}, check=True).stdout.strip()
    assert out == "[]", out


def test_the_start_up_report_shows_the_parts_the_forward_and_the_overhead():
    import copy

    from refimpl.lab.bench.schema import Result
    from refimpl.lab.studies import REFERENCE, RESULTS_DIR
    from refimpl.lab.studies import startup_mechanism as M
    res = Result.load(RESULTS_DIR / REFERENCE / "startup_qwen2.5-vl-3b.json")  # runs before the fields
    assert M.mechanism_table(res) == M.NO_PHASE_PARTS and "process overhead" not in M.mechanism_md(res)
    res = copy.deepcopy(res)
    for v in res.variants.values():
        for r in v["runs"]:
            r["mm_seconds_by_phase"] = {p: {"hf_processor_s": 0.0, "hash_s": 0.0, "dummy_s": 0.0} for p in r["phases"]}
            r["mm_seconds_by_phase"]["profile_run"] = {"hf_processor_s": 0.25 * r["phases"]["profile_run"],
                                                       "hash_s": 0.0, "dummy_s": 0.5 * r["phases"]["profile_run"]}
            r["profile_encoder_forward_s"], r["process_overhead_s"] = 0.1, 7.0
            r["process_overhead"] = {"interpreter_s": 6.0, "bench_imports_s": 1.0}
    run = res.runs(next(iter(res.variants)))[0]
    parts = M.phase_parts(run)
    assert list(parts) == ["profile_run"]  # only the phases with multimodal work
    assert parts["profile_run"]["rest_s"] == pytest.approx(0.25 * run["phases"]["profile_run"])
    text = M.mechanism_md(res)
    assert "| profile_run |" in M.mechanism_table(res) and "| process overhead s |" in text and "| 7 [7, 7] |" in text
