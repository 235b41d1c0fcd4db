"""Docstring lines per code line, per folder of a package (issue 20: at most about 0.2).

Usage: python scripts/docstring_ratio.py [ROOT] [--max RATIO]   (ROOT: refimpl unless named)

A docstring is the first string statement of a module, class or function (its non-blank
lines count); code is every other line that is neither blank nor a comment. Rows: each
folder directly under ROOT, and ``(top)`` for ROOT's own files. ``--max`` exits 1 when the
whole package is above RATIO.
"""
from __future__ import annotations

import ast
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import tyro


def count(source: str) -> tuple[int, int]:
    """(docstring lines, code lines) of one file's source."""
    tree, lines = ast.parse(source), source.splitlines()
    doc: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                doc.update(range(body[0].lineno, body[0].end_lineno + 1))
    blank = {i for i, line in enumerate(lines, 1) if not line.strip()}
    code = sum(1 for i, line in enumerate(lines, 1)
               if i not in doc and i not in blank and not line.strip().startswith("#"))
    return len(doc - blank), code


def by_folder(root: Path) -> dict[str, tuple[int, int]]:
    """{folder: (docstring lines, code lines)} over every .py file under ``root``."""
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        key = rel.parts[0] + "/" if len(rel.parts) > 1 else "(top)"
        d, c = count(path.read_text())
        totals[key][0] += d
        totals[key][1] += c
    return {k: (v[0], v[1]) for k, v in totals.items()}


@dataclass(frozen=True)
class RatioArgs:
    """Docstring lines per code line, per folder of a package."""
    root: tyro.conf.Positional[Path] = Path("refimpl")  # the package
    max: Optional[float] = None  # exit 1 when the whole package's ratio is above this


def main(argv: list[str] | None = None) -> int:
    args = tyro.cli(RatioArgs, prog="scripts/docstring_ratio.py", args=argv)
    rows = by_folder(Path(args.root))
    print(f"{'folder':<14}{'docstring':>10}{'code':>8}{'ratio':>8}")
    for k, (d, c) in sorted(rows.items()):
        print(f"{k:<14}{d:>10}{c:>8}{d / max(c, 1):>8.2f}")
    d, c = sum(v[0] for v in rows.values()), sum(v[1] for v in rows.values())
    print(f"{'total':<14}{d:>10}{c:>8}{d / max(c, 1):>8.2f}")
    return 1 if args.max is not None and d / max(c, 1) > args.max else 0


if __name__ == "__main__":
    sys.exit(main())
