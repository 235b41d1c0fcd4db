"""make lab adds --allow-root only as root (the lab served for real is in tests/lab/test_lab.py)."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("make") is None, reason="make not installed")
def test_make_lab_allow_root_only_as_root():
    venv = Path(sys.executable).parent.parent
    r = subprocess.run(["make", "-n", "-C", str(ROOT), "-o", f"{venv}/.refimpl-installed",
                        f"VENV={venv}", "lab"], capture_output=True, text=True, check=True)
    assert "jupyter lab" in r.stdout
    assert ("--allow-root" in r.stdout) == (os.geteuid() == 0)
