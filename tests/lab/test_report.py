"""refimpl report: what it may delete, failing loudly, and its terminal progress lines."""
import io
import logging

import nbformat
import pytest

from refimpl.lab import report
from refimpl.lab.report import clock, terminal_progress


def test_out_dir_outside_reports_is_never_deleted(tmp_path, capsys):
    keep = tmp_path / "mine" / "notes.txt"
    keep.parent.mkdir()
    keep.write_text("precious")
    assert report.main(["--out-dir", str(keep.parent), "--notebooks", "01_startup_dummy_data_cache.ipynb"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("refimpl report: error: out_dir:") and "refusing to delete" in err and err.count("\n") == 1
    assert keep.read_text() == "precious"
    with pytest.raises(ValueError):  # a file, not a folder
        report.prepare_out_dir(keep, tmp_path / "reports")


def test_out_dir_rules(tmp_path):
    reports = tmp_path / "reports"
    old = reports / "latest" / "old.json"
    old.parent.mkdir(parents=True)
    old.write_text("{}")
    assert report.prepare_out_dir(old.parent, reports) == old.parent.resolve()
    assert list(old.parent.iterdir()) == []                  # under reports/: emptied
    (reports / "other.txt").write_text("x")
    with pytest.raises(ValueError):                          # reports/ itself: refused
        report.prepare_out_dir(reports, reports)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f").write_text("x")
    (reports / "link").symlink_to(outside)
    with pytest.raises(ValueError):                          # a link out of reports/: refused
        report.prepare_out_dir(reports / "link", reports)
    assert (outside / "f").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    assert report.prepare_out_dir(empty, reports) == empty   # empty folder elsewhere: used
    assert report.prepare_out_dir(tmp_path / "new" / "dir", reports).is_dir()


def test_progress_lines_from_papermill_log(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# title"),
        nbformat.v4.new_code_cell("QUICK = False", metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell("\nres = run(study)\nshow(res)"),
    ])
    path = tmp_path / "01_x.ipynb"
    nbformat.write(nb, path)
    out = io.StringIO()
    log = logging.getLogger("papermill")
    with terminal_progress(path, t0=0.0, stream=out):
        for i in range(1, 5):        # papermill numbers every cell, its injected one included
            log.info(f"Executing Cell {i}{'-' * 30}")
        log.info("<Figure size 640x480 with 1 Axes>")  # displayed value: not shown
        log.warning("\rstartup:  33%| 1/3 [00:22<00:44, running b repeat 1/1]"
                    "\rstartup:  33%| 1/3 [00:22<00:44, running b repeat 1/1]\n")
    lines = out.getvalue().splitlines()
    assert [ln.split("] ", 1)[1] for ln in lines[:3]] == [
        "01_x.ipynb cell 1/3: QUICK = False", "01_x.ipynb cell 2/3: (injected parameters)",
        "01_x.ipynb cell 3/3: res = run(study)"]
    assert lines[3:] == ["  startup:  33%| 1/3 [00:22<00:44, running b repeat 1/1]"]
    assert not log.handlers and log.propagate  # the logger is left as it was


def test_bench_progress_names_the_run_in_progress(capsys, monkeypatch):
    from refimpl.lab.bench import guard, serve, trial
    from refimpl.lab.bench.specs import ServeSpec
    monkeypatch.setattr(guard, "check_memory", lambda *a, **k: None)
    monkeypatch.setattr(serve, "run_once", lambda spec, v: {"requests_per_s": 1.0, "output_tokens_per_s": 1.0,
                                                            "registry_s_total": 0.0, "wall_s": 1.0})
    trial.run(ServeSpec(variants=("0.10.2", "0.11.0"), repeats=2), in_process=True)
    err = capsys.readouterr().err
    for text in ("running 0.10.2 warm-up", "running 0.10.2 repeat 1/2", "running 0.11.0 repeat 2/2", "6/6"):
        assert text in err


def test_clock():
    assert clock(0) == "0:00:00" and clock(3725.4) == "1:02:05"


def test_one_failing_notebook_does_not_stop_the_others(tmp_path, monkeypatch, capsys):
    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    for name in ("01_fails.ipynb", "02_runs.ipynb"):
        nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")]),
                       nbs / name)
    ran = []
    broken = False

    def fake_execute(nb, out_dir, params, timeout_s=None, progress=False):
        ran.append(nb.name)
        (out_dir / nb.name).write_text("partial")   # papermill keeps the partial notebook
        if nb.name.startswith("01") and broken:
            (out_dir / "startup_broken.json").write_text("{")
        if nb.name.startswith("01"):
            raise RuntimeError("cell 3 exploded\nTraceback ...")
        return out_dir / nb.name

    monkeypatch.setattr(report, "NOTEBOOKS_DIR", nbs)
    monkeypatch.setattr(report, "execute", fake_execute)
    out = tmp_path / "out"
    assert report.main(["--out-dir", str(out), "--device", "cpu"]) == 1
    assert ran == ["01_fails.ipynb", "02_runs.ipynb"]
    text = (out / "summary.md").read_text()
    row_01 = next(ln for ln in text.splitlines() if ln.startswith("| 01_fails"))
    row_02 = next(ln for ln in text.splitlines() if ln.startswith("| 02_runs"))
    assert "FAILED: RuntimeError: cell 3 exploded" in row_01 and str(out / "01_fails.ipynb") in row_01
    assert "finished" in row_02 and "FAILED" not in row_02
    io_ = capsys.readouterr()
    assert "FAILED in 01_fails.ipynb" in io_.err and "1 of 2 notebook(s) FAILED" in io_.out
    ran.clear()
    broken = True  # now 01 dies mid-write: a partial JSON the summary cannot read
    assert report.main(["--out-dir", str(tmp_path / "out3"), "--device", "cpu"]) == 1
    text = (tmp_path / "out3" / "summary.md").read_text()
    assert "| 02_runs.ipynb | finished" in text and "| summary.md | FAILED: " in text
    ran.clear()
    assert report.main(["--out-dir", str(tmp_path / "out2"), "--device", "cpu",
                        "--notebooks", "02_runs.ipynb"]) == 0 and ran == ["02_runs.ipynb"]


def test_summary_shows_two_process_memory(tmp_path):
    import shutil

    from refimpl.lab.env import REPO_ROOT
    src = REPO_ROOT / "results/cpu-amd-epyc-2c-shared/twoproc_startup_qwen2.5-vl-3b_v0.9.0.json"
    shutil.copy(src, tmp_path / src.name)
    text = report.summary(tmp_path, "cpu", "full")
    row = next(ln for ln in text.splitlines() if ln.startswith(f"| v0.9.0 ({src.name})"))
    assert "| 588 -> 588 |" in row  # P1 keeps its profiling entries under v0.9.0 (MiB)


@pytest.mark.parametrize("folder, split", [("cpu-intel-xeon-2c", False), ("cpu-amd-epyc-2c", True)])
def test_startup_summary_reads_every_committed_layout(folder, split):
    """Runs from before the per-part timings get a sentence saying so, not a KeyError."""
    from refimpl.lab.bench.schema import Result
    from refimpl.lab.env import REPO_ROOT
    from refimpl.lab.studies.startup import summary_md
    res, budget = (Result.load(REPO_ROOT / f"results/{folder}/{b}_qwen2.5-vl-3b.json") for b in ("startup", "budget"))
    text = summary_md(res, budget)
    assert ("predate the per-part timings" in text) is not split
    assert ("more hashing" in text) is split and "Call 1, 0.9.0 / 0.8.5" in text


def test_unknown_notebook_is_refused_before_anything_runs(tmp_path, monkeypatch, capsys):
    import refimpl.lab.report as R
    from refimpl.errors import ConfigError
    monkeypatch.setattr(R, "execute", lambda *a, **k: pytest.fail("ran despite an unknown notebook"))
    out = tmp_path / "out"
    assert R.main(["--notebooks", "nope.ipynb", "--out-dir", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("refimpl report: error: notebooks:") and "nope.ipynb" in err
    assert "01_startup_dummy_data_cache.ipynb" in err and not out.exists()  # nothing written
    with pytest.raises(ConfigError):
        R.select_notebooks(["01_startup_dummy_data_cache.ipynb", "nope.ipynb"])
    assert [n.name for n in R.select_notebooks(["02_encoder_len_throughput.ipynb"])] == [
        "02_encoder_len_throughput.ipynb"]


def test_ratio_table_never_resolved_below_min_pairs():
    """The unpaired ratio tables follow the paired gains' rule: fewer than MIN_PAIRS runs a
    side is "not resolved" even when the ranges are wholly apart."""
    from refimpl.lab.bench.schema import Result
    from refimpl.lab.stats import MIN_PAIRS
    from refimpl.lab.studies import compare_pairs, ratio_md

    def res(n: int) -> Result:
        runs = {"slow": [2.0 + 0.01 * i for i in range(n)], "fast": [1.0 + 0.01 * i for i in range(n)]}
        return Result("throughput", {}, {}, {v: {"runs": [{"x": x} for x in xs], "summary": {}}
                                             for v, xs in runs.items()})
    rows = {n: ratio_md(compare_pairs(res(n), "x", [("slow", "fast")]), "x").splitlines()[-1]
            for n in (1, 2, MIN_PAIRS)}
    assert rows[1].endswith("| - | not resolved (1 run a side) |")
    assert rows[2].endswith(f"| not resolved (< {MIN_PAIRS} runs a side) |")
    assert rows[MIN_PAIRS].endswith("| resolved |")
def test_notebook_parameters_go_to_the_notebooks_that_declare_them(tmp_path, monkeypatch, capsys):
    from refimpl.errors import ConfigError
    monkeypatch.setattr(report, "NOTEBOOKS_DIR", tmp_path / "nbs")
    (tmp_path / "nbs").mkdir()
    for name, source in (("01_a.ipynb", "REPEATS = 3\nLIMITS = []"), ("02_b.ipynb", "REPEATS = 3")):
        nbformat.write(nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
                                                cells=[nbformat.v4.new_code_cell(source, metadata={"tags": ["parameters"]})]),
                       tmp_path / "nbs" / name)
    nbs = report.select_notebooks(None)
    params = report.notebook_params(nbs, ["REPEATS=2", "LIMITS=['video=0']"])
    assert params[nbs[0]] == {"REPEATS": 2, "LIMITS": ["video=0"]} and params[nbs[1]] == {"REPEATS": 2}
    for bad in ("NOPE=1", "REPEATS"):
        with pytest.raises(ConfigError) as e:
            report.notebook_params(nbs, [bad])
        assert e.value.field == "parameters" and "REPEATS" in e.value.limit
    ran = []
    monkeypatch.setattr(report, "execute", lambda nb, out, params, **kw: ran.append(params))
    assert report.main(["--out-dir", str(tmp_path / "o"), "--device", "cpu", "-p", "REPEATS=2",
                        "--notebooks", "02_b.ipynb"]) == 0
    assert ran[0]["REPEATS"] == 2 and ran[0]["MODE"] == "full"
    assert report.main(["--out-dir", str(tmp_path / "q"), "--device", "cpu", "--quick", "--notebooks", "02_b.ipynb"]) == 0
    text = (tmp_path / "q" / "summary.md").read_text()
    assert ran[1]["MODE"] == "quick" and "(quick mode" in text and "states its own size" in text
    assert "one process" in text and "inside the notebook" not in text
    assert report.main(["-p", "NOPE=1", "--out-dir", str(tmp_path / "never")]) == 2
    assert "error: parameters:" in capsys.readouterr().err and not (tmp_path / "never").exists()


def test_the_report_records_the_explorer_page_whole(tmp_path, monkeypatch):
    """Issue 44: notebook 00 computes only what its page shows unless RECORD is passed; the report
    passes RECORD=True to a notebook that declares it (the whole comparison, the response times,
    every row) and to no other."""
    monkeypatch.setattr(report, "NOTEBOOKS_DIR", tmp_path / "nbs")
    (tmp_path / "nbs").mkdir()
    for name, source in (("00_a.ipynb", "MODE = 'stored'\nRECORD = False"), ("01_b.ipynb", "MODE = 'stored'")):
        nbformat.write(nbformat.v4.new_notebook(
            metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
            cells=[nbformat.v4.new_code_cell(source, metadata={"tags": ["parameters"]})]), tmp_path / "nbs" / name)
    ran = {}
    monkeypatch.setattr(report, "execute", lambda nb, out, params, **kw: ran.setdefault(nb.name, params))
    assert report.main(["--out-dir", str(tmp_path / "o"), "--device", "cpu"]) == 0
    assert ran["00_a.ipynb"]["RECORD"] is True and "RECORD" not in ran["01_b.ipynb"]
    declared = report.pm.inspect_notebook(str(report.REPO_ROOT / "notebooks" / "00_explore.ipynb"))
    assert declared["RECORD"]["default"] == "False"  # the page (voila) runs the defaults
