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


@pytest.mark.skipif(shutil.which("make") is None, reason="make not installed")
def test_make_explore_passes_the_page_settings_voila_reads(monkeypatch):
    """`make explore` points voila at notebooks/voila.json: the closed tab's shutdown beacon (no
    _xsrf token) is accepted, and kernels idle with no tab open are culled."""
    from voila.app import Voila
    venv = Path(sys.executable).parent.parent
    r = subprocess.run(["make", "-n", "-C", str(ROOT), "-o", f"{venv}/.refimpl-installed",
                        f"VENV={venv}", "explore"], capture_output=True, text=True, check=True)
    flag = next(a for a in r.stdout.split() if a.startswith("--Voila.config_file_paths="))
    monkeypatch.chdir(ROOT)
    app = Voila()
    app.parse_command_line([flag, "notebooks/00_explore.ipynb"])
    app.load_config_file("voila", path=[str(ROOT / p) for p in app.config_file_paths])
    assert app.tornado_settings["disable_check_xsrf"] is True
    kernels = app.config.MappingKernelManager
    assert kernels.cull_idle_timeout > 0 and kernels.cull_connected is False
