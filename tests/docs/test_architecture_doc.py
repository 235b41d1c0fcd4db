"""docs/architecture.md draws every room: each package of refimpl/ (the mechanism's and the lab's)
has its line in the rooms table, and the drawing names every lab room."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "architecture.md").read_text()


def _table_rooms() -> set[str]:
    """The backticked names in the first column of the rooms table ("| `core/`, `core/sched/` | ...")."""
    table = DOC.split("## The rooms at a glance", 1)[1].split("\n## ", 1)[0]
    out: set[str] = set()
    for line in table.splitlines():
        if line.startswith("| `"):
            out |= set(re.findall(r"`([^`]+)`", line.split(" | ")[0]))
    return out


def _packages() -> list[str]:
    """Every package under refimpl/ as the table names it: ``core/sched/``, ``lab/bench/``."""
    return sorted(p.parent.relative_to(ROOT / "refimpl").as_posix() + "/"
                  for p in (ROOT / "refimpl").rglob("__init__.py") if p.parent != ROOT / "refimpl")


def test_every_package_has_a_line_in_the_rooms_table():
    rooms = _table_rooms()
    missing = [p for p in _packages() if p not in rooms and p.rstrip("/") + "/" not in rooms
               and p != "lab/"]  # the lab itself is the right half of the drawing
    assert not missing, f"docs/architecture.md's rooms table has no line for {missing}"


def test_the_drawing_names_every_lab_room():
    drawing = DOC.split("## The rooms at a glance", 1)[1].split("```", 2)[1]
    rooms = [p.removeprefix("lab/") for p in _packages() if p.startswith("lab/") and p != "lab/"]
    assert rooms and not [r for r in rooms if r not in drawing], rooms


def test_the_table_parser_reads_the_table():
    """The check above can fail: the table's names come back (a mechanism room and a lab room)."""
    rooms = _table_rooms()
    assert {"config/", "core/sched/", "lab/bench/", "lab/conform/"} <= rooms
