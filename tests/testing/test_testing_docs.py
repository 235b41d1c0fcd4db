"""docs/testing.md's examples run as written: every ```python block, in order, in one
namespace (the later ones use names the earlier ones defined); a test function a block
defines runs too, with the plugin's fixtures. Likewise README's test section. The import
paths docs/testing.md calls public import."""
import importlib
import inspect
import re
from pathlib import Path

import pytest

import refimpl.testing.plugin as plugin
from tests.testing.utils import ENGINE_TESTS

DOC = Path(__file__).resolve().parents[2] / "docs" / "testing.md"


def _fixture(name: str, made: dict):
    """The plugin's fixture ``name`` and those it needs, one instance each per test (``made``)."""
    if name not in made:
        fixture = getattr(plugin, name).__wrapped__
        made[name] = fixture(*(_fixture(a, made) for a in inspect.signature(fixture).parameters))
    return made[name]


def _run_tests_defined(namespace: dict) -> int:
    """Call each test_* function in ``namespace`` (but the engine ones) with the plugin's fixtures it names."""
    ran = 0
    for name, f in list(namespace.items()):
        if name.startswith("test_") and callable(f) and ENGINE_TESTS not in name:
            made: dict = {}
            f(**{arg: _fixture(arg, made) for arg in inspect.signature(f).parameters})
            ran += 1
    return ran


@pytest.mark.slow
def test_testing_md_examples_run():
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert len(blocks) >= 12
    namespace: dict = {}
    for i, block in enumerate(blocks):
        exec(compile(block, f"{DOC.name} block {i + 1}", "exec"), namespace)  # noqa: S102
    assert _run_tests_defined(namespace) == 1  # the plugin example
    assert any(ENGINE_TESTS in name for name in namespace)  # run by tests/testing/test_cache_review_example.py


def test_public_import_paths_import():
    section = DOC.read_text().split("## What is public", 1)[1].split("\n## ", 1)[0]
    pairs = re.findall(r"`(refimpl[\w.]*)` \(([^)]*)\)", section)
    assert len(pairs) >= 10
    for module, names in pairs:
        mod = importlib.import_module(module)
        for name in re.findall(r"`(\w+)`", names):
            if name != "the":
                assert hasattr(mod, name), f"{module}.{name}"


def test_readme_example_runs():
    readme = (DOC.parents[1] / "README.md").read_text()
    section = readme.split("## Using refimpl in your tests", 1)[1].split("\n## ", 1)[0]
    namespace: dict = {}
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert blocks
    for i, block in enumerate(blocks):
        exec(compile(block, f"README.md test section block {i + 1}", "exec"), namespace)  # noqa: S102
    tests = [f for name, f in namespace.items() if name.startswith("test_")]
    assert tests
    for test in tests:
        test()
