"""The CLI run for real: budget in a fresh process and in process, and the README's commands in a clean clone (the parsing tests are in tests/lab/cli/test_cli.py)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from refimpl.lab.bench.schema import validate
from refimpl.lab.cli import main

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.slow
def test_budget_calls_in_a_fresh_process_and_in_process(tmp_path):
    """The budget experiment from the command line: 0.9.0 in a fresh worker process, 0.8.5 in this
    one (the same record either way; one worker keeps the fast suite short)."""
    flags = ["--calls", "2", "--repeats", "1", "--no-warmup", "--max-model-len", "4096", "--limit-mm-per-prompt",
             "video", "0", "--mm-processor-kwargs", "max_pixels", str(28 * 28 * 1024)]
    for variant, where in (("0.9.0", []), ("0.8.5", ["--in-process"])):
        out = tmp_path / f"{variant}.json"
        assert main(["bench", "startup", "--variants", variant, *flags, *where, "--output-json", str(out)]) == 0
    cached, plain = (validate(json.loads((tmp_path / f"{v}.json").read_text())) for v in ("0.9.0", "0.8.5"))
    for res, in_process in ((cached, False), (plain, True)):
        assert res["bench"] == "budget" and res["params"]["calls"] == 2
        assert res["params"]["limit_mm_per_prompt"] == {"video": 0} and res["env"]["in_process"] is in_process
        assert res["env"]["versions"]["torch"] and res["env"]["hardware"]["name"]
        # numpy's huge-page madvise is off in the measured process by default, and recorded
        assert res["params"]["numpy_hugepage"] == "off" and res["env"]["thp"]["numpy_madvise_hugepage"] is False
    nc, cr = plain["variants"]["0.8.5"]["runs"][0], cached["variants"]["0.9.0"]["runs"][0]
    assert nc["passes"] == [1, 1] and cr["passes"] == [1, 0]
    assert len(nc["calls_s"]) == 2 and nc["budgets"] == cr["budgets"]
    # measured parts: only the cached path adds text-only HF calls; both split the output per item
    assert cr["parts_s"][0]["hf_text_only_s"] > 0 and nc["parts_s"][0]["hf_text_only_s"] == 0
    assert nc["parts_s"][0]["split_s"] > 0 and cr["parts_s"][0]["split_s"] > 0
    assert cached["variants"]["0.9.0"]["summary"]["call_2_s"]["n"] == 1
    assert "_fresh_process" in cr and "_fresh_process" not in nc


@pytest.mark.slow
def test_readme_commands_exist_in_a_clean_clone(tmp_path):
    """README's commands (make test / make test-fast / make report / refimpl ...) resolve in a
    fresh clone of HEAD."""
    clone = tmp_path / "fresh"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    readme = (clone / "README.md").read_text()
    for cmd in ("make report", "make test", "make test-fast"):
        assert cmd in readme
        dry = subprocess.run(["make", "-n", cmd.split()[1]], cwd=clone, capture_output=True, text=True)
        assert dry.returncode == 0, dry.stderr
    env = {"PYTHONPATH": str(clone), "PATH": "/usr/bin:/bin"}
    r = subprocess.run([sys.executable, "-m", "refimpl.lab.cli", "bench", "startup", "--help"],
                       cwd=clone, capture_output=True, text=True, env=env)
    assert r.returncode == 0 and "--output-json" in r.stdout and "--calls" in r.stdout
    for nb in (clone / "notebooks").glob("*.ipynb"):
        assert '"outputs": []' in nb.read_text() or '"outputs"' not in nb.read_text()
