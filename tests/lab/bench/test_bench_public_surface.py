"""The benches' public surface: each refimpl/lab/bench module declares ``__all__``; the studies, the
explorer, the report and the CLI use only those names (read from the source with ast, nothing
imported); the generic trial loop imports no bench."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

LAB = Path(__file__).resolve().parents[3] / "refimpl" / "lab"
BENCH = LAB / "bench"
USERS = sorted([*(LAB / "studies").rglob("*.py"), *(LAB / "explore").rglob("*.py"), LAB / "report.py",
                LAB / "cli.py"])
BENCHES = ("startup", "serve", "wer", "calibrate")  # the four benches; trial.py runs any of them


def public_names(module: str) -> set[str]:
    tree = ast.parse((BENCH / f"{module}.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return set(ast.literal_eval(node.value))
    raise AssertionError(f"refimpl/lab/bench/{module}.py declares no __all__")


def bench_names_used(path: Path) -> list[tuple[str, str, int]]:
    """(bench module, name, line) for every name ``path`` takes from refimpl.lab.bench.<module>:
    ``from refimpl.lab.bench.m import name`` and ``m.name`` after ``from refimpl.lab.bench import m``."""
    tree = ast.parse(path.read_text())
    used, aliases = [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("refimpl.lab.bench."):
            used += [(node.module.rsplit(".", 1)[1], a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module == "refimpl.lab.bench":
            aliases |= {a.asname or a.name: a.name for a in node.names}
        elif isinstance(node, ast.Import):
            aliases |= {a.asname: a.name.rsplit(".", 1)[1] for a in node.names
                        if a.name.startswith("refimpl.lab.bench.") and a.asname}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            used.append((aliases[node.value.id], node.attr, node.lineno))
    return used


@pytest.mark.parametrize("module", sorted(p.stem for p in BENCH.glob("*.py") if p.stem != "__init__"))
def test_every_bench_module_declares_its_public_names(module):
    names = public_names(module)
    tree = ast.parse((BENCH / f"{module}.py").read_text())
    defined = {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    defined |= {n.target.id for n in tree.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    defined |= {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    defined |= {a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names}
    assert names and names <= defined, sorted(names - defined)
    assert not any(n.startswith("_") for n in names)


@pytest.mark.parametrize("path", USERS, ids=lambda p: str(p.relative_to(LAB)))
def test_studies_explorer_report_and_cli_use_only_public_bench_names(path):
    private = [f"line {line}: {module}.{name}" for module, name, line in bench_names_used(path)
               if name not in public_names(module)]
    assert not private, f"{path.relative_to(LAB)} uses bench names outside __all__: {private}"


def test_the_check_reads_both_import_forms(tmp_path):
    src = tmp_path / "user.py"
    src.write_text("from refimpl.lab.bench.startup import _startup, result\n"
                   "from refimpl.lab.bench import trial\nimport refimpl.lab.bench.fresh as fr\n"
                   "trial.run(); trial._private(); fr.main()\n")
    used = {(m, n) for m, n, _ in bench_names_used(src)}
    assert used == {("startup", "_startup"), ("startup", "result"), ("trial", "run"), ("trial", "_private"),
                    ("fresh", "main")}
    assert {n for m, n in used if n not in public_names(m)} == {"_startup", "_private", "main"}


def test_the_trial_loop_imports_no_bench():
    tree = ast.parse((BENCH / "trial.py").read_text())
    modules = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    modules |= {f"refimpl.lab.bench.{a.name}" for n in ast.walk(tree)
                if isinstance(n, ast.ImportFrom) and n.module == "refimpl.lab.bench" for a in n.names}
    modules |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not {f"refimpl.lab.bench.{b}" for b in BENCHES} & modules


def test_the_machine_names_live_in_env_and_stay_importable_from_calibrate():
    from refimpl.lab import env
    from refimpl.lab.bench import calibrate
    assert calibrate.hardware_folder is env.hardware_folder and calibrate.this_machine is env.this_machine
    assert env.hardware_folder({"gpu": None, "cpu": {"model": "AMD EPYC", "logical_cores": 2}}) == "cpu-amd-epyc-2c"
