"""docs/testing.md's ```python blocks as one namespace (tests/testing/test_testing_docs.py and
tests/testing/test_cache_review_example.py)."""
import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "testing.md"
ENGINE_TESTS = "through_the_engine"  # docs tests that start engines: tests/testing/test_cache_review_example.py


def doc_namespace() -> dict:
    """docs/testing.md's ```python blocks executed in order in one namespace."""
    namespace: dict = {}
    for i, block in enumerate(re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)):
        exec(compile(block, f"{DOC.name} block {i + 1}", "exec"), namespace)  # noqa: S102
    return namespace
