"""No import cycle in refimpl/: the modules' imports read with ast (nothing imported). Module-level
imports anywhere in the package; in the lab, imports inside functions too (a deferred import
hides a cycle from Python, not from a reader). Imports under ``if TYPE_CHECKING:`` and
``if __name__ == "__main__":`` are left out: neither runs when the module is imported."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Cycles left, each with why it is not broken here (none: the two the lab had are gone).
KNOWN: dict[frozenset[str], str] = {}


def _skipped(node: ast.AST) -> bool:
    if not isinstance(node, ast.If):
        return False
    test = ast.unparse(node.test)
    return "TYPE_CHECKING" in test or test.replace("'", '"') == '__name__ == "__main__"'


def _imports(tree: ast.Module, module: str, is_package: bool, deferred: bool) -> list[ast.Import | ast.ImportFrom]:
    out: list[ast.Import | ast.ImportFrom] = []
    todo: list[ast.AST] = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.append(node)
        elif not _skipped(node) and (deferred or not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))):
            todo.extend(ast.iter_child_nodes(node))
    return out


def import_graph(root: Path, package: str = "refimpl", deferred_under: str | None = None) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (``from p import m``: p.m where it is a module, else p);
    imports inside functions count for modules under ``deferred_under``."""
    files = {}
    for f in sorted((root / package).rglob("*.py")):
        parts = f.relative_to(root).with_suffix("").parts
        files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    graph: dict[str, set[str]] = {}
    for name, f in files.items():
        is_package = f.name == "__init__.py"
        here = name if is_package else name.rpartition(".")[0]
        deferred = deferred_under is not None and (name + ".").startswith(deferred_under + ".")
        targets = set()
        for node in _imports(ast.parse(f.read_text()), name, is_package, deferred):
            if isinstance(node, ast.Import):
                targets |= {a.name for a in node.names if a.name in files}
                continue
            base = node.module or ""
            if node.level:
                up = here.split(".")[: len(here.split(".")) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            for a in node.names:
                targets |= {f"{base}.{a.name}"} if f"{base}.{a.name}" in files else {base} & files.keys()
        graph[name] = targets - {name}
    return graph


def cycles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: set[frozenset[str]] = set()
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.add(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.add(frozenset(comp))
    return found


def test_no_cycle_of_module_level_imports_in_refimpl():
    assert cycles(import_graph(ROOT)) == set()


def test_no_cycle_in_the_lab_counting_imports_inside_functions():
    lab = {c for c in cycles(import_graph(ROOT, deferred_under="refimpl.lab")) if any(".lab." in m for m in c)}
    assert lab == set(KNOWN), sorted(sorted(c) for c in lab)


def test_the_walk_finds_a_cycle_a_deferred_import_hides(tmp_path):
    pkg = tmp_path / "p"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "a.py").write_text("from p.sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from . import a\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from p import d\n")
    (pkg / "d.py").write_text("import p.c\nif __name__ == '__main__':\n    from p.sub import a\n")
    assert import_graph(tmp_path, "p") == {"p": set(), "p.c": set(), "p.d": {"p.c"}, "p.sub": set(),
                                           "p.sub.a": {"p.sub.b"}, "p.sub.b": set()}
    assert cycles(import_graph(tmp_path, "p")) == set()
    assert cycles(import_graph(tmp_path, "p", deferred_under="p")) == {frozenset({"p.sub.a", "p.sub.b"})}
