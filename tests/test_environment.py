"""Packaging: environment.yml's pip list equals pyproject's dependencies; make targets exist."""
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[1]


def pyproject_deps() -> list[str]:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]["dependencies"]


def environment_yml() -> tuple[list[str], list[str]]:
    """(conda dependencies, pip list) of environment.yml.

    A deliberately tiny reader for the one shape this file has: a ``dependencies:`` block of
    ``- item`` lines and one nested ``- pip:`` block. Raises AssertionError on anything else.
    """
    conda, pip, in_deps, in_pip = [], [], False, False
    for raw in (ROOT / "environment.yml").read_text().splitlines():
        line = raw.split(" #", 1)[0].rstrip()
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        indent = len(line) - len(line.lstrip())
        if indent == 0:
            in_deps, in_pip = line == "dependencies:", False
            continue
        if not in_deps:
            continue
        item = re.fullmatch(r"\s*-\s+(.*)", line)
        assert item, f"unexpected line in environment.yml: {raw!r}"
        value = item.group(1).strip().strip("'\"")
        if value == "pip:":
            in_pip = True
        elif in_pip and indent > 2:
            pip.append(value)
        else:
            in_pip = False
            conda.append(value)
    return conda, pip


def norm(req: str) -> str:
    return re.sub(r"\s+", "", req).lower().replace("_", "-")


def test_environment_yml_matches_pyproject():
    conda, pip = environment_yml()
    assert "-e ." in pip, "environment.yml must install the package itself (-e .)"
    pip_deps = [norm(p) for p in pip if p != "-e ."]
    assert pip_deps == [norm(d) for d in pyproject_deps()]


def test_environment_yml_python():
    conda, _ = environment_yml()
    assert "python=3.11" in conda and "pip" in conda
    name = re.search(r"^name:\s*(\S+)", (ROOT / "environment.yml").read_text(), re.M)
    assert name and name.group(1) == "refimpl"


def test_pins_kept():
    deps = {norm(d).split("==")[0]: norm(d) for d in pyproject_deps()}
    assert deps["torch"] == "torch==2.14.1"
    assert deps["torchvision"] == "torchvision==0.29.1"
    assert deps["transformers"] == "transformers==5.17.0"


@pytest.mark.skipif(shutil.which("make") is None, reason="make not installed")
def test_make_targets_exist():
    targets = [".venv", "lint", "test", "soak", "report", "report-quick", "lab", "clean"]
    # -n: print, do not run; -W pyproject.toml would force a reinstall, so it is not used.
    for t in targets:
        r = subprocess.run(["make", "-n", "-C", str(ROOT), t], capture_output=True, text=True)
        assert r.returncode == 0, f"make -n {t}: {r.stderr}"
    r = subprocess.run(["make", "-n", "-C", str(ROOT), "test"], capture_output=True, text=True)
    assert "-m pytest" in r.stdout
    # lint and type check run before the tests (CI runs make test)
    order = [r.stdout.find(tool) for tool in ("ruff check", "mypy", "-m pytest")]
    assert -1 not in order and order == sorted(order), r.stdout
