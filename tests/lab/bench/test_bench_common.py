"""refimpl/lab/bench/common.py and fresh.py: threads, JSON, fresh processes, py-spy (no timing assertions)."""
import json
import os
import shutil
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from refimpl.lab.bench import common
from refimpl.lab.bench.common import profile_with_pyspy, set_single_thread, write_json
from refimpl.lab.bench.fresh import FreshProcessError, run_in_fresh_process
from refimpl.lab.stats import summarize

CHILD = textwrap.dedent("""
    import argparse, json, os, sys, time
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", default="ok")
    ap.add_argument("--output-json", required=True)
    a = ap.parse_args()
    if a.mode == "fail":
        print("boom on stderr", file=sys.stderr); sys.exit(3)
    if a.mode == "nojson":
        sys.exit(0)
    if a.mode == "list":
        json.dump([1, 2], open(a.output_json, "w")); sys.exit(0)
    if a.mode == "sleep":
        time.sleep(30)
    json.dump({"pid": os.getpid(), "mode": a.mode, "t": {"x": 1.5}}, open(a.output_json, "w"))
""")


@pytest.fixture
def child_module(tmp_path):
    (tmp_path / "refimpl_test_child.py").write_text(CHILD)
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    return "refimpl_test_child", env


def test_summarize_values():
    s = summarize([3.0, 1.0, 2.0, 4.0])
    assert s == {"median": 2.5, "min": 1.0, "max": 4.0,
                 "iqr": float(np.percentile([1, 2, 3, 4], 75) - np.percentile([1, 2, 3, 4], 25)),
                 "n": 4}
    assert summarize([7])["iqr"] == 0.0 and summarize([7])["median"] == 7.0
    assert set(summarize(iter([1, 2]))) == {"median", "min", "max", "iqr", "n"}


@pytest.mark.parametrize("bad", [[], [1.0, float("nan")], [float("inf")]])
def test_summarize_rejects(bad):
    with pytest.raises(ValueError):
        summarize(bad)


def test_write_json_roundtrip_and_types(tmp_path):
    p = tmp_path / "a" / "b" / "out.json"
    obj = {"i": np.int64(3), "f": np.float32(0.5), "arr": np.arange(3), "p": Path("/x"),
           "s": {1}}
    assert write_json(p, obj) == p
    assert json.loads(p.read_text()) == {"i": 3, "f": 0.5, "arr": [0, 1, 2], "p": "/x", "s": [1]}
    assert [f.name for f in p.parent.iterdir()] == ["out.json"]  # no temp file left


def test_write_json_puts_a_list_of_scalars_on_one_line(tmp_path):
    obj = {"wall_s": [0.5, 1e-06, None, -2], "kind": ["decode", None, "a, b", 'q"x'], "nested": [[1, 2], {"a": [True]}],
           "empty": [], "inf": [float("inf"), 3]}
    text = write_json(tmp_path / "o.json", obj).read_text()
    assert json.loads(text) == obj
    assert '"wall_s": [0.5, 1e-06, null, -2]' in text and '"inf": [Infinity, 3]' in text
    assert '[1, 2]' in text and '"a": [true]' in text
    assert '"kind": [\n' in text                     # a string with a comma or an escape: one per line


def test_write_json_unserialisable_keeps_old_file(tmp_path):
    p = tmp_path / "out.json"
    write_json(p, {"ok": 1})
    with pytest.raises(TypeError):
        write_json(p, {"bad": object()})
    assert json.loads(p.read_text()) == {"ok": 1}
    assert [f.name for f in tmp_path.iterdir()] == ["out.json"]


def test_set_single_thread(monkeypatch):
    import torch
    before = torch.get_num_threads()
    for k in common.THREAD_ENV_VARS:
        monkeypatch.delenv(k, raising=False)
    try:
        assert set_single_thread() == 1
        assert torch.get_num_threads() == 1
        assert all(os.environ[k] == "1" for k in common.THREAD_ENV_VARS)
    finally:
        torch.set_num_threads(before)


def test_fresh_process_each_call(child_module):
    mod, env = child_module
    a = run_in_fresh_process(mod, ["--mode", "ok"], timeout_s=60, env=env)
    b = run_in_fresh_process(mod, ["--mode", "ok"], timeout_s=60, env=env)
    assert a["mode"] == "ok" and a["t"] == {"x": 1.5}
    assert a["pid"] != b["pid"] != os.getpid()
    assert a["_fresh_process"]["cmd"][:3] == [sys.executable, "-m", mod]
    assert "--output-json" in a["_fresh_process"]["cmd"]
    assert a["_fresh_process"]["wall_s"] > 0


@pytest.mark.parametrize("mode", ["fail", "nojson", "list"])
def test_fresh_process_failures(child_module, mode):
    mod, env = child_module
    with pytest.raises(FreshProcessError) as ei:
        run_in_fresh_process(mod, ["--mode", mode], timeout_s=60, env=env)
    if mode == "fail":
        assert ei.value.returncode == 3 and "boom on stderr" in str(ei.value)


def test_fresh_process_timeout(child_module):
    mod, env = child_module
    with pytest.raises(TimeoutError):
        run_in_fresh_process(mod, ["--mode", "sleep"], timeout_s=1.0, env=env)


def test_pyspy_failure_returns_false(tmp_path, capsys):
    ok = profile_with_pyspy(["/nonexistent/command-xyz"], tmp_path / "f.svg",
                            tmp_path / "f.speedscope.json", timeout_s=60)
    assert ok is False
    assert "warning: py-spy (flamegraph) wrote no profile" in capsys.readouterr().err


def test_pyspy_missing_returns_false(tmp_path, monkeypatch):
    monkeypatch.setattr(common.shutil, "which", lambda name: None)
    monkeypatch.setattr(common.sys, "executable", str(tmp_path / "python"))
    assert profile_with_pyspy([sys.executable, "-c", "pass"], tmp_path / "f.svg", None) is False


@pytest.mark.skipif(shutil.which("py-spy") is None
                    and not Path(sys.executable).with_name("py-spy").exists(),
                    reason="py-spy not installed")
def test_pyspy_profiles_a_short_command(tmp_path):
    svg, ss = tmp_path / "p" / "f.svg", tmp_path / "p" / "f.speedscope.json"
    code = "import time\nt=time.time()\nwhile time.time()-t<0.4: sum(range(1000))"
    ok = profile_with_pyspy([sys.executable, "-c", code], svg, ss, rate=50, timeout_s=120)
    if not ok:
        pytest.skip("py-spy cannot attach here (needs root / CAP_SYS_PTRACE)")
    assert "<svg" in svg.read_text()[:2000]
    assert "speedscope" in json.loads(ss.read_text())["$schema"]


def test_profile_worker_wraps_one_worker_run_with_its_json_beside_the_svg(monkeypatch, tmp_path):
    from refimpl.lab.bench import fresh
    from refimpl.lab.bench.specs import StartupSpec, spec_from_json
    seen = []
    monkeypatch.setattr(fresh, "profile_with_pyspy", lambda cmd, svg, ss, rate: seen.append((cmd, svg, ss, rate)) or True)
    spec = StartupSpec(variants=("0.9.0",))
    assert fresh.profile_worker(spec, "0.9.0", tmp_path / "a.svg", rate=50) is True
    (cmd, svg, ss, rate), = seen
    assert cmd[cmd.index("--output-json") + 1] == str(tmp_path / "a.run.json") and cmd[2] == fresh.WORKER
    assert cmd[cmd.index("--variant") + 1] == "0.9.0" and spec_from_json(cmd[cmd.index("--spec") + 1]) == spec
    assert (svg, ss, rate) == (tmp_path / "a.svg", None, 50)
