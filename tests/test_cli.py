"""The command-line interface and the README's commands, from a clean clone of HEAD."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from refimpl.bench.schema import validate
from refimpl.cli import main

ROOT = Path(__file__).resolve().parents[1]


def test_help_and_unknown_command(capsys):
    assert main(["--help"]) == 0
    assert "bench startup" in capsys.readouterr().out
    assert main(["nope"]) == 2
    assert main(["bench", "nope"]) == 2


def test_unknown_model_is_rejected_by_argparse():
    with pytest.raises(SystemExit):
        main(["bench", "startup", "--model", "llama", "--output-json", "/tmp/x.json"])


def test_unknown_variant_names_the_field(tmp_path, capsys):
    from refimpl.bench.startup import main as startup_main
    from refimpl.errors import UnknownVariantError
    argv = ["--model", "qwen2.5-vl-3b", "--variant", "turbo", "--output-json", str(tmp_path / "x.json")]
    with pytest.raises(UnknownVariantError, match="variant"):  # Python callers get the exception
        startup_main(argv)
    assert main(["bench", "startup", *argv]) == 2  # the CLI prints it and exits 2
    assert capsys.readouterr().err.startswith("refimpl bench startup: error: variant: unknown variant 'turbo'")


def test_budget_bench_in_fresh_processes(tmp_path):
    out = tmp_path / "budget.json"
    rc = main(["bench", "budget", "--model", "qwen2.5-vl-3b", "--variant", "0.8.5,0.9.0",
               "--calls", "2", "--repeats", "1", "--no-warmup", "--max-model-len", "20000",
               "--limit-mm-per-prompt", "video=0", "--output-json", str(out)])
    assert rc == 0
    res = validate(json.loads(out.read_text()))
    assert res["bench"] == "budget" and set(res["variants"]) == {"0.8.5", "0.9.0"}
    assert res["env"]["versions"]["torch"] and res["env"]["hardware"]["name"]
    assert res["params"]["calls"] == 2 and res["params"]["limit_mm_per_prompt"] == {"video": 0}
    nc, cr = (res["variants"][v]["runs"][0] for v in ("0.8.5", "0.9.0"))
    assert nc["passes"] == [1, 1] and cr["passes"] == [1, 0]
    assert len(nc["calls_s"]) == 2 and nc["budgets"] == cr["budgets"]
    # numpy's huge-page madvise is off in the workers by default, and recorded
    assert res["params"]["numpy_hugepage"] == "off" and res["env"]["thp"]["numpy_madvise_hugepage"] is False
    assert nc["thp"]["numpy_madvise_hugepage"] is False
    # measured parts: only the cached path adds text-only HF calls; both split the output per item
    assert cr["parts_s"][0]["hf_text_only_s"] > 0 and nc["parts_s"][0]["hf_text_only_s"] == 0
    assert nc["parts_s"][0]["split_s"] > 0 and cr["parts_s"][0]["split_s"] > 0
    assert res["variants"]["0.8.5"]["summary"]["call_2_s"]["n"] == 1


def test_readme_commands_exist_in_a_clean_clone(tmp_path):
    """README's commands (make test / make report / refimpl ...) resolve in a fresh clone of HEAD."""
    clone = tmp_path / "fresh"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    readme = (clone / "README.md").read_text()
    for cmd in ("make report", "make test"):
        assert cmd in readme
        target = cmd.split()[1]
        dry = subprocess.run(["make", "-n", target], cwd=clone, capture_output=True, text=True)
        assert dry.returncode == 0, dry.stderr
    env = {"PYTHONPATH": str(clone), "PATH": "/usr/bin:/bin"}
    r = subprocess.run([sys.executable, "-m", "refimpl.cli", "bench", "startup", "--help"],
                       cwd=clone, capture_output=True, text=True, env=env)
    assert r.returncode == 0 and "--output-json" in r.stdout
    for nb in (clone / "notebooks").glob("*.ipynb"):
        assert '"outputs": []' in nb.read_text() or '"outputs"' not in nb.read_text()
