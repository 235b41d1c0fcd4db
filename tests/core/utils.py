"""Random scheduler workloads (Job, the workloads strategy) and run_workload: the real Scheduler,
KVCacheManager and FakeModelRunner to completion, asserting exactly-once finishing and no leak
(tests/core/test_scheduler_properties.py, tests/core/test_workload_strategy.py, tests/soak/test_soak.py)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from hypothesis import strategies as st

from refimpl.core.kv_cache_manager import cdiv
from refimpl.request import RequestStatus
from refimpl.testing import QWEN, WHISPER, FakeModelRunner, create_requests, create_scheduler

CROSS = cdiv(1500, 16)


@dataclass
class Job:
    arrival: int            # step at which it is added
    max_tokens: int
    prompt_len: int         # decoder-only only
    abort_at: Optional[int]  # step at which it is aborted (None: never)


def make_requests(model: str, jobs: list[Job]):
    reqs = []
    for i, j in enumerate(jobs):
        if model == WHISPER:
            (r,) = create_requests(1, model=WHISPER, max_tokens=j.max_tokens, prefix=f"j{i}-")
        else:
            (r,) = create_requests(1, model=QWEN, max_tokens=j.max_tokens, prompt_len=j.prompt_len,
                                   num_mm_items=1 + (i % 2), mm_len=24, prefix=f"j{i}-")
        reqs.append(r)
    return reqs


def run_workload(model: str, jobs: list[Job], num_blocks: int, *, max_num_seqs: int = 8,
                 max_num_batched_tokens: int = 8192, max_steps: int = 1_000_000):
    """Run ``jobs`` to completion; returns (outputs {req_id: tokens}, aborted ids, stats).

    Asserts exactly-once finishing, no report after an abort and no leak when idle.
    """
    s = create_scheduler(model, num_blocks=num_blocks, max_num_seqs=max_num_seqs,
                         max_num_batched_tokens=max_num_batched_tokens)
    runner = FakeModelRunner(cross_blocks=CROSS if model == WHISPER else 0)
    reqs = make_requests(model, jobs)
    by_step: dict[int, list[int]] = {}
    for i, j in enumerate(jobs):
        by_step.setdefault(j.arrival, []).append(i)
    aborts: dict[int, list[int]] = {}
    for i, j in enumerate(jobs):
        if j.abort_at is not None:
            aborts.setdefault(j.abort_at, []).append(i)
    done: dict[str, list[int]] = {}
    aborted: set[str] = set()
    preemptions = steps = 0
    last_event = max([j.arrival for j in jobs] + [j.abort_at or 0 for j in jobs])
    for step in range(max_steps):
        for i in by_step.get(step, []):
            s.add_request(reqs[i])
        for i in aborts.get(step, []):
            rid = reqs[i].request_id
            if rid not in done and rid in s.requests:
                s.finish_requests(rid, RequestStatus.FINISHED_ABORTED)
                assert reqs[i].status == RequestStatus.FINISHED_ABORTED
                aborted.add(rid)
        if step > last_event and not s.has_unfinished_requests():
            break
        so = s.schedule()
        preemptions += len(so.preempted_req_ids)
        steps += 1
        for out in s.update_from_output(so, runner.execute_model(so)):
            assert out.request_id not in done, f"{out.request_id} finished twice"
            assert out.request_id not in aborted, f"{out.request_id} reported after abort"
            done[out.request_id] = list(out.output_token_ids)
    else:
        raise AssertionError("workload did not finish")
    # every request accounted for exactly once
    assert set(done) | aborted == {r.request_id for r in reqs} and not set(done) & aborted
    # no leak once idle
    kv = s.kv_cache_manager
    assert kv.get_num_free_blocks() == kv.block_pool.num_gpu_blocks - 1 and kv.num_blocks_held() == 0
    assert all(b.ref_cnt == 0 for b in kv.block_pool.blocks[1:])
    ecm = s.encoder_cache_manager
    assert ecm.num_free_slots == ecm.cache_size and not ecm.cached
    assert not s.requests and not s.running and not s.waiting
    return done, aborted, dict(steps=steps, preemptions=preemptions, requests=len(reqs))


@st.composite
def workloads(draw):
    model = draw(st.sampled_from([WHISPER, QWEN]))
    n = draw(st.integers(1, 10))
    jobs = [Job(arrival=draw(st.integers(0, 30)),
                max_tokens=draw(st.integers(1, 48)),
                prompt_len=draw(st.integers(30, 120)),
                abort_at=draw(st.one_of(st.none(), st.none(), st.integers(0, 80))))
            for _ in range(n)]
    if model == WHISPER:
        # the largest request alone fits (else add_request refuses it); a second one may not
        need = CROSS + cdiv(4 + max(j.max_tokens for j in jobs), 16)
        num_blocks = 1 + need + draw(st.sampled_from([CROSS + 1, CROSS + 3]) | st.integers(0, 2 * CROSS))
        batched = 8192
    else:
        need = cdiv(max(j.prompt_len + j.max_tokens for j in jobs), 16)
        num_blocks = 1 + need + draw(st.sampled_from([0, 1, 3]) | st.integers(0, 20))
        batched = draw(st.sampled_from([48, 64, 256]))  # chunked prefill with images
    return model, jobs, num_blocks, draw(st.integers(1, 8)), batched
