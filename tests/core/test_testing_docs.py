"""docs/testing.md's examples run as written: every ```python block, in order, in one
namespace (the later ones use names the earlier ones defined)."""
import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "testing.md"


def test_testing_md_examples_run():
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert len(blocks) >= 10
    namespace: dict = {}
    for i, block in enumerate(blocks):
        exec(compile(block, f"{DOC.name} block {i + 1}", "exec"), namespace)  # noqa: S102


def test_readme_example_runs():
    readme = (DOC.parents[1] / "README.md").read_text()
    section = readme.split("## Using refimpl in your tests", 1)[1]
    namespace: dict = {}
    exec(re.search(r"```python\n(.*?)```", section, re.S).group(1), namespace)  # noqa: S102
    tests = [f for name, f in namespace.items() if name.startswith("test_")]
    assert tests
    for test in tests:
        test()
