"""The real Scheduler + KVCacheManager + FakeModelRunner under hypothesis (issue #4, part 2).

Random workloads (arrival step, max_tokens, prompt length, abort step) on a KV cache drawn
small enough to force preemption, for Whisper (cross-attention blocks, whole-prompt
admission, one audio per step) and Qwen2.5-VL-style decoder-only requests with image
placeholders (chunked prefill, encoder budget). Checked on every run:

- every request finishes exactly once, or is aborted and then never reported;
- the tokens of every finished request equal those of the same workload on a KV cache big
  enough that nothing is ever preempted (and FakeModelRunner's own contract checks: no block
  owned twice, cross-attention blocks exactly cdiv(1500, 16) on admission only);
- no leak: once idle, every block is free with ref_cnt 0, the encoder cache is empty, the
  scheduler holds no request.

``run_workload`` and the strategy are in tests/core/utils.py (the soak test runs them too).
"""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, event, given, settings

from tests.core.utils import Job, run_workload, workloads


def check_pressure_equals_unpressured(w):
    """Under KV pressure (preemptions, aborts) every finished request has the tokens of a roomy run."""
    model, jobs, num_blocks, max_num_seqs, batched = w
    done, aborted, stats = run_workload(model, jobs, num_blocks, max_num_seqs=max_num_seqs,
                                        max_num_batched_tokens=batched)
    ref, ref_aborted, ref_stats = run_workload(
        model, [Job(j.arrival, j.max_tokens, j.prompt_len, None) for j in jobs], 100_000,
        max_num_seqs=64, max_num_batched_tokens=8192)
    assert ref_stats["preemptions"] == 0 and not ref_aborted
    event(f"{model}: preempted={stats['preemptions'] > 0}, aborted={bool(aborted)}")
    for rid, toks in done.items():
        assert toks == ref[rid], rid
    for i, j in enumerate(jobs):
        rid = f"j{i}-0"
        if rid in done:
            assert len(done[rid]) == j.max_tokens  # ignore_eos: length-capped at max_tokens


PRESSURE = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.slow
@PRESSURE
@given(workloads())
def test_random_workloads_under_pressure_equal_unpressured_run(w):
    check_pressure_equals_unpressured(w)


@pytest.mark.soak
@settings(PRESSURE, max_examples=150)
@given(workloads())
def test_random_workloads_under_pressure_soak(w):
    check_pressure_equals_unpressured(w)
