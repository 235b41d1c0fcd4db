"""What the core install is: refimpl from site-packages (not a source tree), typed, without
the lab's tools, its `refimpl` command saying what to install, its fixtures opt-in."""
import importlib.util
import subprocess
import sys
from pathlib import Path

import refimpl
import refimpl.testing

BIN = Path(sys.executable).parent


def test_installed_not_editable():
    assert "site-packages" in refimpl.__file__
    assert (Path(refimpl.__file__).parent / "py.typed").is_file()


def test_no_lab_tools():
    for mod in ("jupyterlab", "papermill", "xdist", "mypy", "ruff", "matplotlib", "jiwer", "tyro"):
        assert importlib.util.find_spec(mod) is None, mod


def test_refimpl_command_says_to_install_the_lab_extra():
    r = subprocess.run([str(BIN / "refimpl"), "bench", "startup"], capture_output=True, text=True)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "refimpl[lab]" in r.stderr and "Traceback" not in r.stderr


def test_fixtures_only_when_enabled(tmp_path):
    (tmp_path / "test_x.py").write_text("def test_x(small_qwen_config):\n    pass\n")
    run = lambda *a: subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *a],  # noqa: E731
                                    cwd=tmp_path, capture_output=True, text=True)
    off = run()
    assert off.returncode != 0 and "fixture 'small_qwen_config' not found" in off.stdout
    assert run("-p", "refimpl.testing.plugin").returncode == 0
