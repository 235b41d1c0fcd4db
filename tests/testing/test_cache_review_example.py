"""docs/testing.md's worked example for a processing-cache reviewer runs as written: the same
request twice through EngineCore / LLMEngine, the hit, the pass counts and the reset's bytes."""
import pytest

from tests.testing.utils import ENGINE_TESTS, doc_namespace

pytestmark = pytest.mark.slow  # two engines start


def test_the_cache_reviewer_s_example_runs_as_written():
    namespace = doc_namespace()
    tests = [f for name, f in namespace.items() if name.startswith("test_") and ENGINE_TESTS in name]
    assert len(tests) == 1
    tests[0]()
