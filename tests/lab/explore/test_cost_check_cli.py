"""``refimpl cost-check`` (refimpl/lab/explore/cost_check_cli.py): refusals in one line naming the flag
before anything is read, and ``python -m refimpl.lab.explore.cost_check`` still runs the command line
(the tables themselves: tests/lab/explore/test_cost_model.py, tests/lab/bench/test_cost_benchmark.py)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from refimpl.lab.cli import main

ROOT = Path(__file__).resolve().parents[3]
CAL = ROOT / "results/cpu-amd-epyc-2c/same-day-2026-12-04-no-reporting-3/calibration.json"


@pytest.mark.parametrize("argv, line", [
    (["--same-day", str(CAL)], "same_day: got 1 path (limit: a calibration and at least one ladder)"),
    (["--same-day", str(CAL), "nope.json"], "same_day: no file nope.json (limit: start-up Results"),
    (["--carry-from", str(CAL)], f"carry_from: got --carry-from {CAL} (limit: only with --same-day)"),
    (["--calibration", "nope.json"], "calibration: no file nope.json (limit: a calibration Result"),
])
def test_a_refusal_is_one_line_naming_the_flag(argv, line, capsys):
    assert main(["cost-check", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"refimpl cost-check: error: {line}") and err.count("\n") == 1, err


def test_the_module_entry_runs_the_same_command_line():
    r = subprocess.run([sys.executable, "-m", "refimpl.lab.explore.cost_check", "--same-day", str(CAL)],
                       capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT, timeout=300)
    assert r.returncode == 2 and r.stderr.startswith("python -m refimpl.lab.explore.cost_check: error: same_day:")


def test_help_names_every_flag_with_its_default(capsys):
    with pytest.raises(SystemExit) as e:
        main(["cost-check", "--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0 and "(default: off: every committed Result)" in out
    assert all(f in out for f in ("--calibration", "--results", "--quiet-only", "--same-day", "--carry-from"))
