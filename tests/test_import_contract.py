"""The mechanism never imports the measuring half (the seam users rely on when they import
refimpl in their own tests): every module outside it is checked, imports inside functions too."""
import ast
from pathlib import Path

import refimpl

MEASURING = ("refimpl.bench", "refimpl.analysis", "refimpl.report", "refimpl.report_progress",
             "refimpl.stats", "refimpl.env", "refimpl.cli", "refimpl.memory", "refimpl.lab")
ROOT = Path(refimpl.__file__).parent


def _module(path: Path) -> str:
    return ".".join(("refimpl",) + path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def _in(name: str, prefixes) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def test_mechanism_imports_nothing_of_the_measuring_half():
    bad = []
    for path in ROOT.rglob("*.py"):
        mod = _module(path)
        if _in(mod, MEASURING):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            bad += [f"{mod} imports {n}" for n in names if _in(n, MEASURING)]
    assert not bad, "\n".join(bad)
