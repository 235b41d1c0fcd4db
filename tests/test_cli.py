"""The command line and the README's commands, from a clean clone of HEAD."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from refimpl.bench import trial
from refimpl.bench.schema import Result, validate
from refimpl.bench.specs import StartupSpec
from refimpl.cli import SHOWN, main
from refimpl.errors import UnknownVariantError

ROOT = Path(__file__).resolve().parents[1]


def test_help_and_unknown_command(capsys):
    assert main(["--help"]) == 0
    assert "bench startup" in capsys.readouterr().out
    assert main([]) == 2 and main(["nope"]) == 2


def test_unknown_variant_names_the_field_the_bench_and_the_choices(tmp_path, capsys):
    with pytest.raises(UnknownVariantError, match="variants: unknown variant 'turbo' of refimpl bench startup"):
        trial.run(StartupSpec(variants=("turbo",)))  # Python callers get the exception
    assert main(["bench", "startup", "--variants", "turbo", "--output-json", str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("refimpl bench startup: error: variants: unknown variant 'turbo' of refimpl bench startup")
    assert "'0.8.5', '0.9.0'" in err and not (tmp_path / "x.json").exists()


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
    r = subprocess.run([sys.executable, "-m", "refimpl.cli", "bench", "startup", "--help"],
                       cwd=clone, capture_output=True, text=True, env=env)
    assert r.returncode == 0 and "--output-json" in r.stdout and "--calls" in r.stdout
    for nb in (clone / "notebooks").glob("*.ipynb"):
        assert '"outputs": []' in nb.read_text() or '"outputs"' not in nb.read_text()


SHOWN_RESULTS = [p for p in sorted((ROOT / "results").glob("*/*.json")) if Result.load(p).bench in SHOWN]


@pytest.mark.parametrize("path", SHOWN_RESULTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_bench_shows_its_result_whole_or_without_runs(path):
    """What `refimpl bench` prints at its end (the notebooks' tables), for each committed Result and
    for the same Result interrupted before its first run."""
    res = Result.load(path)
    assert SHOWN[res.bench](res).strip()
    none = Result(res.bench, res.env, {**res.params, "interrupted": True},
                  {v: {"runs": [], "summary": {}} for v in res.variants}, missing=["runs"])
    assert SHOWN[res.bench](none).strip()
