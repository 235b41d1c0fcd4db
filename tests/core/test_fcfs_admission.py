"""Strict FCFS admission (issue 29, kind 4; vLLM PR #28911, ``test_schedule_order``).

Property, over random workloads of Whisper (no chunked prefill, several audios per step allowed
by the encoder budgets) and Qwen2.5-VL-style requests (chunked prefill, encoder budget, KV
pressure): on every step the requests admitted from WAITING are a prefix of the waiting queue as
it stood, and the rest keep their order. So no request is admitted before an earlier-arrived
waiting one, whichever rule (token budget, encoder budget or cache, KV blocks, max_num_seqs)
stopped that one.
"""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from refimpl.request import Request
from refimpl.sampling_params import SamplingParams
from refimpl.testing import QWEN, WHISPER, FakeModelRunner, create_requests, create_scheduler
from refimpl.testing.scheduling import ENCODER_LEN, WHISPER_FEATURES, WHISPER_PROMPT

CROSS = -(-ENCODER_LEN // 16)


def _whisper(rid: str, prompt_len: int, max_tokens: int, arrival: float) -> Request:
    return Request(rid, (WHISPER_PROMPT * 200)[:prompt_len], SamplingParams(max_tokens=max_tokens, ignore_eos=True),
                   mm_inputs=[{"input_features": WHISPER_FEATURES}], mm_hashes=[f"h-{rid}"],
                   arrival_time=arrival)


def test_schedule_order_first_misfit_ends_admission():
    """The issue's case: "2" does not fit the step's 448 tokens after "1"; "3" and "4" wait."""
    s = create_scheduler(WHISPER, max_num_batched_tokens=448, max_num_seqs=3,
                         encoder_compute_budget=4 * ENCODER_LEN, encoder_cache_size=4 * ENCODER_LEN)
    for i, n in enumerate([300, 300, 4, 4], 1):
        s.add_request(_whisper(str(i), n, 3, float(i)))
    so = s.schedule()
    assert [r.req_id for r in so.scheduled_new_reqs] == ["1"]
    assert [r.request_id for r in s.waiting] == ["2", "3", "4"]
    so = s.schedule()  # "1" decodes (1 token), "2" now fits
    assert [r.req_id for r in so.scheduled_new_reqs] == ["2", "3"]


@st.composite
def workloads(draw):
    model = draw(st.sampled_from([WHISPER, QWEN]))
    n = draw(st.integers(2, 10))
    arrivals = sorted(draw(st.lists(st.integers(0, 6), min_size=n, max_size=n)))
    max_tokens = draw(st.lists(st.integers(1, 12), min_size=n, max_size=n))
    if model == WHISPER:
        lens = draw(st.lists(st.sampled_from([1, 4, 60, 150, 300, 430]), min_size=n, max_size=n))
        batched = draw(st.sampled_from([448, 600]))  # >= max_model_len: no chunked prefill
        audios = draw(st.integers(1, 4))  # encoder budget and cache in audios per step
        enc = (audios * ENCODER_LEN, draw(st.integers(audios, 4)) * ENCODER_LEN)
        need = CROSS + -(-(max(lens) + max(max_tokens)) // 16)
        num_blocks = 1 + need + draw(st.integers(0, 3 * CROSS))
    else:
        lens = draw(st.lists(st.integers(60, 120), min_size=n, max_size=n))  # items never overlap
        batched = draw(st.sampled_from([32, 64, 256]))
        enc = (draw(st.sampled_from([24, 48, 96])), 48)  # the cache holds two items
        need = -(-(max(lens) + max(max_tokens)) // 16)
        num_blocks = 1 + need + draw(st.integers(0, 20))
    return model, list(zip(arrivals, lens, max_tokens)), batched, enc, num_blocks, draw(st.integers(1, 6))


def check_fcfs(w) -> None:
    model, jobs, batched, (enc_budget, enc_cache), num_blocks, max_num_seqs = w
    s = create_scheduler(model, num_blocks=num_blocks, max_num_seqs=max_num_seqs, max_num_batched_tokens=batched,
                         encoder_compute_budget=enc_budget, encoder_cache_size=enc_cache)
    if model == WHISPER:
        reqs = [_whisper(f"r{i}", n, mt, float(t)) for i, (t, n, mt) in enumerate(jobs)]
    else:
        reqs = [create_requests(1, model=QWEN, prompt_len=n, max_tokens=mt, num_mm_items=1 + i % 2, mm_len=24,
                                prefix=f"r{i}-")[0] for i, (t, n, mt) in enumerate(jobs)]
    runner = FakeModelRunner(cross_blocks=CROSS if model == WHISPER else 0)
    finished: set[str] = set()
    held_back = 0
    for step in range(10_000):
        for r, (t, _, _) in zip(reqs, jobs):
            if t == step:
                s.add_request(r)
        if step > jobs[-1][0] and not s.has_unfinished_requests():
            break
        before = [r.request_id for r in s.waiting]
        so = s.schedule()
        admitted = [r.req_id for r in so.scheduled_new_reqs]
        assert admitted == before[:len(admitted)], (step, before, admitted)
        if not so.preempted_req_ids:
            assert [r.request_id for r in s.waiting] == before[len(admitted):]
        held_back += bool(admitted) and len(admitted) < len(before)
        for out in s.update_from_output(so, runner.execute_model(so)):
            finished.add(out.request_id)
    else:
        raise AssertionError("did not finish")
    assert finished == {r.request_id for r in reqs}
    event(f"{model}: some step admitted part of the queue: {held_back > 0}")


FCFS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FCFS
@given(workloads())
def test_no_request_admitted_before_an_earlier_waiting_one(w):
    check_fcfs(w)


@pytest.mark.soak
@settings(FCFS, max_examples=400)
@given(workloads())
def test_no_request_admitted_before_an_earlier_waiting_one_soak(w):
    check_fcfs(w)
