"""Issue 43: the explorer reads by default the newest calibration that a committed same-day check
validated (refimpl/lab/explore/calibrations.py), shows its date and condition, and says which it
reads when there is none; the fresh table's campaign file plans every release row at both settings."""
import html
import json
import shutil
from pathlib import Path

from refimpl.lab.bench.schema import Result
from refimpl.lab.cli import main
from refimpl.lab.env import REPO_ROOT
from refimpl.lab.explore import calibrations as C
from refimpl.lab.explore.cost_model import Calibration
from refimpl.lab.explore.same_day import same_day_table
from refimpl.variants import RELEASE_ROWS

REF = REPO_ROOT / "results" / "cpu-amd-epyc-2c"
CAMPAIGN = REPO_ROOT / "benchmarks" / "predicted_vs_measured.toml"


def _check(folder: Path, cal: Path, ladder: Path, table: bool = True) -> None:
    folder.mkdir(parents=True)
    shutil.copy(cal, folder / "calibration.json")
    shutil.copy(ladder, folder / ladder.name)
    if table:
        (folder / "same_day.md").write_text("the table\n")


def test_the_reference_machine_s_newest_check_is_the_default():
    checks = C.same_day_checks(REF)
    assert len(checks) >= 3 and all(c.check and (REF / c.check / "calibration.json").exists() for c in checks)
    cal, why = C.default_calibration("cpu-amd-epyc-2c", "cpu-amd-epyc-2c", REPO_ROOT / "results")
    newest = max(checks, key=lambda c: (c.date, c.time))
    assert cal is not None and cal.check == newest.check and cal.path == newest.path
    assert why.startswith("this machine's newest calibration a committed same-day check validated") and cal.check in why
    assert cal.date in cal.described and cal.time in cal.described and "free page reporting" in cal.described
    assert "validated by the committed same-day check " + cal.check in cal.described


def test_without_a_check_the_page_says_which_calibration_it_reads(tmp_path):
    day = REF / "same-day-2026-12-04"
    ladder = next(day.glob("startup_*50k*.json"))
    res = tmp_path / "results"
    _check(res / "cpu-other-2c" / "no-table", day / "calibration.json", ladder, table=False)
    other_day = json.loads(ladder.read_text())
    other_day["env"]["date"] = "2026-11-30T00:00:00+00:00"
    _check(res / "cpu-other-2c" / "other-day", day / "calibration.json", ladder)
    (res / "cpu-other-2c" / "other-day" / ladder.name).write_text(json.dumps(other_day))
    assert C.same_day_checks(res / "cpu-other-2c") == []  # no table; runs of another day
    shutil.copy(day / "calibration.json", res / "cpu-other-2c" / "calibration.json")
    cal, why = C.default_calibration("cpu-other-2c", "cpu-ref-2c", res)
    assert cal is not None and cal.check == "" and "no committed same-day check validated it" in cal.described
    assert why == ("this machine's results/cpu-other-2c/calibration.json: no committed same-day check validated "
                   "a calibration of it")
    _check(res / "cpu-ref-2c" / "day", day / "calibration.json", ladder)
    cal, why = C.default_calibration("cpu-new-2c", "cpu-ref-2c", res)  # a user's machine: the reference's
    assert cal is not None and cal.check == "day"
    assert why.startswith("the reference machine's (cpu-ref-2c) newest") and why.endswith("none is committed for cpu-new-2c")
    assert C.default_calibration("cpu-new-2c", "cpu-none-2c", res) == (
        None, "no calibration for this machine (results/cpu-new-2c/calibration.json)")


def test_the_explorer_page_shows_the_calibration_s_date_and_condition(tmp_path):
    from refimpl.lab.explore import explorer_panels as EP
    study = EP.ExploreStudy("stored", out_dir=tmp_path)
    assert study.calibration is not None and study.values["calibration_from"]
    panel = study.explorer()
    assert html.escape(study.calibration.described) in panel.about.value
    assert html.escape(study.values["calibration_from"]) in panel.about.value
    assert study.calibration.date in panel.html.value and "load" in panel.html.value


def test_the_campaign_plans_every_release_row_at_both_settings(tmp_path, capsys):
    assert main(["bench", "sweep", "startup", "--params", str(CAMPAIGN), "--output-dir", str(tmp_path),
                 "--experiment-name", "t", "--dry-run"]) == 0
    out, d = capsys.readouterr().out.splitlines(), tmp_path / "t"
    assert out[0] == f"refimpl bench sweep startup: 4 runs of {CAMPAIGN} -> {d}"
    assert out[1].split()[:4] == ["calibration", "refimpl", "bench", "calibrate"]
    assert "(untimed, not kept)" in out[2]
    rows = ["--variants", *RELEASE_ROWS, "--repeats", "2"]
    first, second = out[3].split(), out[4].split()
    assert first[0] == "32k-maxpix" and second[0] == "64k"
    for line, n in ((first, "32768"), (second, "65536")):
        assert line[line.index("--variants"):line.index("--variants") + len(rows)] == rows
        assert line[line.index("--max-model-len") + 1] == n and "--no-warmup" in line
    assert "--limit-mm-per-prompt image 2 video 1" in out[3] and "--limit-mm-per-prompt" not in out[4]
    assert "--mm-processor-kwargs max_pixels 1003520" in out[3] and "max_pixels" not in out[4]
    assert out[5].split()[0] == "same_day.md" and out[5].endswith("against 32k-maxpix 64k")
    assert not d.exists()


def test_the_same_day_table_names_the_setting_and_the_0_9_0_ratio():
    day = REF / "same-day-2026-12-04"
    ladder = next(day.glob("startup_*fresh-64k-maxpix*.json"))
    table = same_day_table(Calibration.load(day / "calibration.json"), [ladder])
    res = Result.load(ladder)
    runs = {v: sorted(r["total_s"] for r in res.runs(v)) for v in ("0.8.5", "0.9.0")}
    measured = (sum(runs["0.9.0"]) / 2) / (sum(runs["0.8.5"]) / 2)  # medians of two runs
    assert "max_pixels" in table and "0.9.0 / 0.8.5: predicted " in table
    assert f"measured {measured:.2f}x" in table.split("0.9.0 / 0.8.5: predicted ")[1].split("\n")[0]


def test_a_sweep_campaign_s_runs_validate_its_calibration(tmp_path):
    """`refimpl bench sweep startup` names its Results after the runs (128k.json), not startup_*.json: a
    campaign of benchmarks/same_day.toml is a same-day check too; a calibration or a sweep's plan is not a run."""
    day = REF / "same-day-2026-12-04"
    ladder = next(day.glob("startup_*50k*.json"))
    folder = tmp_path / "hw" / "same-day-campaign"
    _check(folder, day / "calibration.json", ladder)
    (folder / ladder.name).rename(folder / "50k.json")
    (folder / "plan.json").write_text('{"not": "a result"}')
    checks = C.same_day_checks(tmp_path / "hw")
    assert [c.check for c in checks] == ["same-day-campaign"]
    (folder / "50k.json").unlink()
    assert C.same_day_checks(tmp_path / "hw") == []   # the calibration alone validates nothing
