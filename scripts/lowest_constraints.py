"""Print a pip constraints file pinning every core dependency to its declared lower bound.

``python3 scripts/lowest_constraints.py > lowest.txt`` then ``pip install -c lowest.txt .``
installs the oldest versions pyproject.toml allows (what ``uv pip compile --resolution
lowest-direct`` resolves for the direct dependencies); ``make user-tests-lowest`` and
``.ci/run`` test that end. A dependency without a ``>=`` floor is an error: its lowest end
could not be tested.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import tomllib


def lowest_constraints(pyproject: Path) -> list[str]:
    deps = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    out = []
    for dep in deps:
        m = re.match(r"\s*([A-Za-z0-9_.\-]+)\s*(?:\[[^\]]*\])?\s*[^;]*?>=\s*([0-9][^,;\s]*)", dep)
        if m is None:
            raise SystemExit(f"lowest_constraints: {dep!r} has no >= lower bound")
        out.append(f"{m.group(1)}=={m.group(2)}")
    return out


if __name__ == "__main__":
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1]
    print("\n".join(lowest_constraints(root / "pyproject.toml")))
