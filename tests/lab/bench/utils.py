"""A fake bench run for the trial loop (tests/lab/bench/test_trial.py, tests/lab/bench/test_trial_processes.py; the
``runs_until`` fixture in tests/conftest.py uses it)."""

from refimpl.lab.bench.specs import ServeSpec

SPEC = ServeSpec(variants=("0.10.2", "0.11.0"), repeats=3, warmup=False)


def fake_run(i: int) -> dict:
    return {"variant": "x", "device": "cpu", "requests_per_s": 1.0 + i, "output_tokens_per_s": 10.0 + i,
            "registry_s_total": 0.01, "wall_s": 1.0, "torch_num_threads": 1, "registry_calls": 3, "steps": 5,
            "step_time_ms_median": 3.0}
