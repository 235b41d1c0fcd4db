"""Shared test setup: torch on one thread (2-core shared machine), no hub access."""
import gc
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402

torch.set_num_threads(1)


def pytest_sessionfinish(session):
    """Collect garbage once, then freeze what is left, before pytest-xdist reports this worker
    finished: execnet SIGINTs a finished worker that has not exited within 5 s, and pytest's
    two full collections at unconfigure over ~450k objects (torch, transformers) took 3-4 s on
    this machine, more under load. The SIGINT then surfaced as a KeyboardInterrupt traceback
    from hypothesis's gc callback (the first Python code to run after a long collection)."""
    gc.collect()
    gc.freeze()
