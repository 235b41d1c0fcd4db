"""``refimpl bench sweep`` (refimpl/lab/bench/sweep.py): the committed same-day campaign's dry run,
--resume after a failed run, and a bad sweep file refused in one line naming the field before any run.
Fresh processes are faked (the ``runs_until`` fixture): no benchmark runs here."""
import json
from pathlib import Path

import pytest

from refimpl.lab.bench.schema import Result
from refimpl.lab.cli import main

ROOT = Path(__file__).resolve().parents[3]
SAME_DAY = ROOT / "benchmarks" / "same_day.toml"
ROWS = "--variants 0.8.5 0.9.0 0.9.2 0.10.2 0.11.0 0.11.1 0.13.0 refimpl shape-only --repeats 2"
SERVE = """experiment = "two"
[base]
variants = ["0.10.2", "0.11.0"]
repeats = 1
warmup = false
[[runs]]
name = "short"
max_tokens = 8
[[runs]]
name = "long"
max-tokens = 16
"""


def test_the_same_day_campaign_dry_run_prints_its_runs_and_writes_nothing(tmp_path, capsys):
    assert main(["bench", "sweep", "startup", "--params", str(SAME_DAY), "--output-dir", str(tmp_path),
                 "--experiment-name", "day", "--dry-run"]) == 0
    out, d = capsys.readouterr().out.splitlines(), tmp_path / "day"
    assert out[0] == f"refimpl bench sweep startup: 4 runs of {SAME_DAY} -> {d}"
    assert out[1].split() == ["calibration", "refimpl", "bench", "calibrate", "--output-json", f"{d}/calibration.json"]
    assert out[2].split() == ["warm-up", *"refimpl bench startup --variants 0.9.2 --repeats 1 --no-warmup".split(),
                              "(untimed,", "not", "kept)"]
    assert out[3].split() == ["128k", "refimpl", "bench", "startup", *ROWS.split(), "--no-warmup", "--output-json",
                              f"{d}/128k.json"]
    assert out[4].split() == ["50k", "refimpl", "bench", "startup", *ROWS.split(), "--max-model-len", "50000",
                              "--no-warmup", "--output-json", f"{d}/50k.json"]
    assert out[5].split()[0] == "same_day.md" and out[5].endswith("against 128k 50k")
    assert not d.exists()


def test_resume_runs_only_what_a_failed_sweep_left(runs_until, tmp_path, capsys):
    params = tmp_path / "two.toml"
    params.write_text(SERVE)
    argv = ["bench", "sweep", "serve", "--params", str(params), "--output-dir", str(tmp_path), "--experiment-name", "x"]
    calls = runs_until(3, RuntimeError("boom"))  # run "short": 2 fresh processes; "long" fails at its first
    assert main(argv) == 1
    d = tmp_path / "x"
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"refimpl bench sweep serve: error: run 'long': 0.10.2 repeat 1/1: RuntimeError: boom (kept in "
        f"{d}/long.partial.json; --resume runs it again)")
    assert len(calls) == 3 and (d / "short.json").exists() and not (d / "long.json").exists()
    assert (d / "long.partial.json").exists() and (d / "sweep.toml").read_text() == SERVE
    assert main(argv) == 2 and "experiment_name: " in capsys.readouterr().err  # the folder is there: --resume
    assert main([*argv, "--resume", "--dry-run"]) == 0
    shown = capsys.readouterr().out
    assert "short.json   (done: skipped)" in shown and "long.json\n" in shown
    calls = runs_until(99, RuntimeError("never"))
    assert main([*argv, "--resume"]) == 0
    assert len(calls) == 2 and not (d / "long.partial.json").exists()
    res = {n: Result.load(d / f"{n}.json") for n in ("short", "long")}
    assert res["short"].params["max_tokens"] == 8 and res["long"].params["max_tokens"] == 16
    log = [ln.split(" ", 2)[:2] for ln in (d / "sweep.log").read_text().splitlines()]
    assert [w[0] for w in log] == ["#", "short:", "long:", "#", "long:"] and log[2][1] == "stopped"
    calls = runs_until(99, RuntimeError("never"))
    assert main([*argv, "--resume"]) == 0 and calls == []
    assert f"nothing left to run: every run's Result is in {d}" in capsys.readouterr().out
    params.write_text(SERVE.replace("8", "4"))
    assert main([*argv, "--resume"]) == 2 and "params: " in capsys.readouterr().err  # not the file it was made from


def test_a_bare_json_list_is_its_runs_named_by_their_overrides(runs_until, tmp_path, capsys):
    params = tmp_path / "p.json"
    params.write_text(json.dumps([{"variants": ["0.10.2"], "repeats": 1, "warmup": False, "max_tokens": m}
                                  for m in (4, 6)]))
    assert main(["bench", "sweep", "serve", "--params", str(params), "--output-dir", str(tmp_path), "--dry-run"]) == 0
    names = [ln.split()[0] for ln in capsys.readouterr().out.splitlines()[1:]]
    assert names == ["variants=_0.10.2_-repeats=1-warmup=False-max_tokens=4",
                     "variants=_0.10.2_-repeats=1-warmup=False-max_tokens=6"]


@pytest.mark.parametrize("text, field", [
    ('[[runs]]\nmax_model_lenn = 4096\n', "max_model_lenn: {p} runs[0] has 'max_model_lenn' (limit: a field of refimpl bench startup: model, "),
    ('[[runs]]\nmax_model_len = "4096"\n', "max_model_len: {p} runs[0] has '4096' (limit: an integer (or null))"),
    ('[[runs]]\nvariants = "0.8.5"\n', "variants: {p} runs[0] has '0.8.5' (limit: a list of strings)"),
    ('[[runs]]\nmm_processor_kwargs = { max_pixels = 1.5 }\n', "mm_processor_kwargs: {p} runs[0] has"),
    ('[[runs]]\nrepeats = 0\n', "repeats: run 'repeats=0' of {p}: got 0 (limit: >= 1)"),
    ('[base]\nvariants = ["turbo"]\n[[runs]]\nname = "a"\n', "variants: run 'a' of {p}: unknown variant 'turbo'"),
    ('[[runs]]\nname = "a"\n[[runs]]\nname = "a"\n', "name: {p} runs[1] repeats 'a'"),
    ('[[runs]]\nname = "../a"\n', "name: {p} runs[0] has '../a'"),
    ('[[runs]]\nname = "calibration"\n', "name: {p} runs[0] has 'calibration'"),
    ('ladders = 2\n[[runs]]\n', "ladders: {p} has 'ladders' (limit: a key of a sweep file: experiment, base,"),
    ('runs = []\n', "runs: {p} has [] (limit: a non-empty list of tables)"),
    ('[[runs]\n', "params: {p}: "),
    ('[calibrate]\nsize_mib = 8\n[[runs]]\n', "size_mib: run 'calibration' of {p}: got 8 (limit: >= 16)"),
])
def test_a_bad_sweep_file_is_refused_in_one_line_naming_the_field(tmp_path, capsys, text, field):
    params = tmp_path / "bad.toml"
    params.write_text(text)
    assert main(["bench", "sweep", "startup", "--params", str(params), "--output-dir", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"refimpl bench sweep startup: error: {field.format(p=params)}"), err
    assert err.count("\n") == 1 and not (tmp_path / "o").exists()


def test_a_calibration_only_in_a_startup_sweep(tmp_path, capsys):
    assert main(["bench", "sweep", "serve", "--params", str(SAME_DAY), "--output-dir", str(tmp_path), "--dry-run"]) == 2
    assert capsys.readouterr().err == (f"refimpl bench sweep serve: error: calibrate: {SAME_DAY} is run as a serve "
                                       "sweep (limit: only in a startup sweep)\n")


def test_the_gpu_session_previews_on_a_machine_without_cuda(tmp_path, capsys, monkeypatch):
    """benchmarks/gpu_session_*.toml ask for --device cuda: on a machine without CUDA the dry run
    checks each run with the CPU and says so on its line; a real run is refused naming the device."""
    from refimpl.errors import ConfigError
    from refimpl.lab.bench import guard

    def no_cuda(device):
        if device == "cuda":
            raise ConfigError("device", "the devices available here: auto, cpu", "CUDA is not available here")
        return "cpu"
    monkeypatch.setattr(guard, "resolve_device", no_cuda)
    session = ROOT / "benchmarks" / "gpu_session_serve.toml"
    argv = ["bench", "sweep", "serve", "--params", str(session), "--output-dir", str(tmp_path)]
    assert main([*argv, "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()[1:]
    assert len(lines) == 3 and all(ln.endswith("(--device cuda: not here; checked with cpu)") for ln in lines)
    assert main(argv) == 2 and not any(tmp_path.iterdir())
    err = capsys.readouterr().err
    assert err.startswith("refimpl bench sweep serve: error: device: run 'paired_whisper-large-v3'")
