"""Shared test setup: torch on one thread (2-core shared machine), no hub access."""
import gc
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(scope="module", autouse=True)
def _global_registry_per_file():
    """Each test file on an empty process-wide MULTIMODAL_REGISTRY (a new processing cache, zeroed
    counters; the old ones back after the file): with ``-n 2 --dist loadfile`` the files a worker ran
    before this one depend on scheduling, and an engine start-up on the global registry reads the
    cache's bytes at its reset point (tests/engine/test_engine_startup.py's 0.8.5 row read 1.9 MB another
    file had left there). Module-scoped, so a file's module-scoped engines start on it too."""
    from refimpl.testing import fresh_registry
    with fresh_registry():
        yield


def pytest_sessionfinish(session):
    """Collect garbage once, then freeze what is left, before pytest-xdist reports this worker
    finished: execnet SIGINTs a finished worker that has not exited within 5 s, and pytest's
    two full collections at unconfigure over ~450k objects (torch, transformers) took 3-4 s on
    this machine, more under load. The SIGINT then surfaced as a KeyboardInterrupt traceback
    from hypothesis's gc callback (the first Python code to run after a long collection)."""
    gc.collect()
    gc.freeze()
