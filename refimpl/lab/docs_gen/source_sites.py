"""The source lines that read a switch, for the links of docs/mechanisms/: every code line of
the mechanism (docstrings and comments left out) and, per switch, where refimpl/variants.py
declares it and the first ``MAX_SITES`` lines that read it.

Read by refimpl.lab.docs_gen.mechanism_pages; found by searching, so the links follow the code.
"""
from __future__ import annotations

import ast
import io
import re
import tokenize

from refimpl.lab.env import REPO_ROOT as ROOT

SRC = ROOT / "refimpl"
# The mechanism's own folders: where a switch is read (the measuring half and the test helpers
# only pass rows along).
SKIP = ("analysis", "bench", "testing", "lab")
MAX_SITES = 5  # lines linked per switch
# How code asks for a switch when not by its own name.
_READERS = {"formula_models": (r"\.uses_formula\(",), "encoder_budget": (r"\.encoder_budget\b",)}


def _docstring_lines(tree: ast.AST) -> set[int]:
    out: set[int] = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.body:
            b = n.body[0]
            if isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant) and isinstance(b.value.value, str):
                out.update(range(b.lineno, (b.end_lineno or b.lineno) + 1))
    return out


def _sources() -> list[tuple[str, int, str, str]]:
    """(path from the repo root, line number, the line, its code without a comment) of every
    code line of the mechanism (docstrings and comment lines left out)."""
    out = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if path.relative_to(SRC).parts[0] in SKIP or rel == "refimpl/variants.py":
            continue
        text = path.read_text()
        doc = _docstring_lines(ast.parse(text))
        comments = {t.start[0]: t.start[1] for t in tokenize.generate_tokens(io.StringIO(text).readline)
                    if t.type == tokenize.COMMENT}
        for i, line in enumerate(text.splitlines(), 1):
            code = line[:comments.get(i, len(line))].strip()
            if i not in doc and code:
                out.append((rel, i, line.strip(), code))
    return out


def _defined_at(name: str) -> int:
    """The line of refimpl/variants.py that declares the field ``name``."""
    for i, line in enumerate((SRC / "variants.py").read_text().splitlines(), 1):
        if re.match(rf"\s+{name}: ", line):
            return i
    raise LookupError(f"{name} is not a field of refimpl/variants.py")


def _link(rel: str, line: int) -> str:
    return f"[{rel}#L{line}](../../{rel}#L{line})"


def _code(s: str, width: int = 90) -> str:
    s = s if len(s) <= width else s[: width - 3] + "..."
    return "`" + s.replace("`", "'") + "`"


def where(name: str, sources, patterns=None) -> list[str]:
    """Markdown lines: where ``name`` is declared, then the code lines that read it."""
    pats = [re.compile(p) for p in (patterns or _READERS.get(name, (rf"\.{name}\b",)))]
    hits = [(rel, i, s) for rel, i, s, code in sources if any(p.search(code) for p in pats)]
    lines = [f"- `{name}` (declared {_link('refimpl/variants.py', _defined_at(name))})"
             if patterns is None else f"- {name}"]
    lines += [f"  - {_link(rel, i)} {_code(s)}" for rel, i, s in hits[:MAX_SITES]]
    if len(hits) > MAX_SITES:
        lines.append(f"  - and {len(hits) - MAX_SITES} more")
    return lines
