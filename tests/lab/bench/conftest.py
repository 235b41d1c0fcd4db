"""Fixtures of the lab bench room's tests (the trial loop's fakes are in utils.py)."""
import pytest


@pytest.fixture
def runs_until(monkeypatch):
    """``runs_until(n, exc)``: fresh-process runs 1..n-1 succeed, run n raises ``exc`` (tests/lab/bench/utils.py)."""
    from refimpl.lab.bench import guard, trial
    from tests.lab.bench.utils import fake_run
    monkeypatch.setattr(guard, "check_memory", lambda *a, **k: None)

    def setup(n: int, exc: BaseException):
        calls = []

        def fake(module, args, timeout_s=None, *, env=None):
            calls.append(args)
            if len(calls) == n:
                raise exc
            return fake_run(len(calls))
        monkeypatch.setattr(trial, "run_in_fresh_process", fake)
        return calls
    return setup
