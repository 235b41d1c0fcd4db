"""tests/ by room: every folder is a package with its line in docs/testing.md's "Where the tests are"
table and a make target that runs it; no bare-name helper module at tests/'s top."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"


def _rooms() -> list[str]:
    """Every folder under tests/ that holds a .py file, as ``tests/lab/bench``."""
    return sorted({p.parent.relative_to(ROOT).as_posix() for p in TESTS.rglob("*.py")
                   if "__pycache__" not in p.parts and p.parent != TESTS})


def _table() -> str:
    doc = (ROOT / "docs" / "testing.md").read_text()
    return doc.split("## Where the tests are", 1)[1].split("\n## ", 1)[0]


def _make_rooms() -> dict[str, list[str]]:
    """GATE_ROOMS and LAB_ROOMS as the Makefile writes them."""
    make = (ROOT / "Makefile").read_text()
    return {name: re.search(rf"^{name}\s*:=(.*)$", make, re.M).group(1).split()
            for name in ("GATE_ROOMS", "LAB_ROOMS")}


def test_every_folder_is_a_package():
    missing = [r for r in _rooms() if not (ROOT / r / "__init__.py").is_file()]
    assert not missing and (TESTS / "__init__.py").is_file(), missing


def test_every_room_has_its_line_in_the_table():
    table = _table()
    missing = [r for r in _rooms() if f"`{r}/`" not in table and not r.startswith("tests/lab/")]
    lab = [r.removeprefix("tests/lab/") for r in _rooms() if r.startswith("tests/lab/")]
    missing += [r for r in lab if f"`{r}/`" not in table]
    assert lab and not missing, missing


def test_every_room_is_run_by_a_target():
    rooms = _make_rooms()
    targets = rooms["GATE_ROOMS"] + rooms["LAB_ROOMS"] + ["tests/soak"]
    orphans = [r for r in _rooms() if not any(r == t or r.startswith(t + "/") for t in targets)]
    assert "tests/core" in rooms["GATE_ROOMS"] and "tests/lab" in rooms["LAB_ROOMS"] and not orphans, orphans


def test_the_top_of_tests_holds_no_helper_module():
    """Shared set-ups live in a room's utils.py or conftest.py, not as bare names at tests/'s top."""
    top = sorted(p.name for p in TESTS.glob("*.py"))
    helpers = [n for n in top if n not in ("__init__.py", "conftest.py") and not n.startswith("test_")]
    assert "conftest.py" in top and not helpers, helpers
