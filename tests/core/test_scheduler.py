"""Scheduler: cross blocks per Whisper request, preemption by recompute, registry calls per
admission under each encoder_len_variant, budgets, abort, max_tokens limit."""
import pytest

from refimpl.errors import EncoderLengthMismatchError, InvalidInputError, SamplingParamsError
from refimpl.request import Request, RequestStatus
from refimpl.sampling_params import SamplingParams, check_max_tokens
from refimpl.testing import (
    QWEN,
    WHISPER,
    WHISPER_PROMPT,
    FakeModelRunner,
    FakeRegistry,
    create_requests,
    create_scheduler,
    fake_token,
    run_to_completion,
)

CROSS = 94  # cdiv(1500, 16)


def usable(s):
    return s.kv_cache_manager.block_pool.num_gpu_blocks - 1


def test_whisper_request_gets_94_cross_blocks_once_and_frees_them():
    s = create_scheduler(num_blocks=1000)
    runner = FakeModelRunner(cross_blocks=CROSS)
    for r in create_requests(3, max_tokens=20):
        s.add_request(r)
    so = s.schedule()  # one audio per step: one admission
    assert [len(n.block_ids[1]) for n in so.scheduled_new_reqs] == [CROSS]
    assert so.scheduled_encoder_inputs == {"req0": [0]}
    assert so.num_scheduled_tokens == {"req0": 4}  # whole decoder prompt at once
    s.update_from_output(so, runner.execute_model(so))
    done = run_to_completion(s, runner)
    assert sorted(done) == ["req0", "req1", "req2"]
    assert all(len(o.output_token_ids) == 20 and o.finish_reason == "length" for o in done.values())
    assert s.kv_cache_manager.get_num_free_blocks() == usable(s)
    assert runner.num_encoder_runs == 3


def _run(num_blocks, n=5, max_tokens=60, model=WHISPER, **kw):
    s = create_scheduler(model, num_blocks=num_blocks, **kw)
    reqs = create_requests(n, model=model, max_tokens=max_tokens)
    for r in reqs:
        s.add_request(r)
    runner = FakeModelRunner(cross_blocks=CROSS if model == WHISPER else 0)
    log = []

    def check(step, so):
        log.append(so)
        assert len(s.running) <= s.max_num_running_reqs
        assert so.total_num_scheduled_tokens <= s.max_num_scheduled_tokens
        assert not so.preempted_req_ids & set(so.num_scheduled_tokens)
    done = run_to_completion(s, runner, on_step=check)
    ecm = s.encoder_cache_manager
    assert s.kv_cache_manager.get_num_free_blocks() == usable(s) and not ecm.cached
    assert ecm.num_free_slots == ecm.cache_size and not s.requests
    return done, log, runner


def test_preemption_under_tiny_kv_keeps_every_token():
    ref, ref_log, _ = _run(10000)
    # 2 requests fit at admission (2 * 95 blocks) but not once they grow to 64 tokens.
    done, log, runner = _run(1 + 2 * CROSS + 4)
    assert sum(len(so.preempted_req_ids) for so in ref_log) == 0
    assert sum(len(so.preempted_req_ids) for so in log) > 0
    assert {k: v.output_token_ids for k, v in done.items()} == \
           {k: v.output_token_ids for k, v in ref.items()}
    assert all(len(o.output_token_ids) == 60 for o in done.values())
    assert sum(o.num_preemptions for o in done.values()) == sum(len(so.preempted_req_ids) for so in log)
    # A preempted request comes back as NEW with prompt + outputs so far, encoded again.
    resumed = [n for so in log for n in so.scheduled_new_reqs if len(n.prompt_token_ids) > 4]
    assert resumed and all(n.prompt_token_ids[:4] == WHISPER_PROMPT for n in resumed)
    assert all(so.scheduled_encoder_inputs.get(n.req_id) == [0] for so in log for n in so.scheduled_new_reqs)
    assert runner.num_encoder_runs == 5 + sum(o.num_preemptions for o in done.values())


def test_more_requests_than_kv_holds_wait_and_none_is_lost():
    done, log, _ = _run(1 + 2 * (CROSS + 1), n=8, max_tokens=10)
    assert sorted(done) == sorted(f"req{i}" for i in range(8))
    assert max(len(so.scheduled_new_reqs) + so.scheduled_cached_reqs.num_reqs for so in log) <= 2


def test_encoder_budget_one_audio_per_step_and_two_with_3000():
    _, log, _ = _run(10000, n=6, max_tokens=4)
    assert max(len(so.scheduled_encoder_inputs) for so in log) == 1
    assert [len(so.scheduled_new_reqs) for so in log[:6]] == [1] * 6
    _, log2, _ = _run(10000, n=6, max_tokens=4, encoder_compute_budget=3000, encoder_cache_size=3000)
    assert [len(so.scheduled_new_reqs) for so in log2[:3]] == [2, 2, 2]


def test_max_num_seqs_respected():
    done, log, _ = _run(10000, n=7, max_tokens=5, max_num_seqs=3,
                        encoder_compute_budget=15000, encoder_cache_size=15000)
    assert len(done) == 7 and max(len(so.num_scheduled_tokens) for so in log) == 3


def test_token_budget_chunks_decoder_only_prompts():
    ref, _, _ = _run(10000, model=QWEN, n=4, max_tokens=8)
    done, log, _ = _run(10000, model=QWEN, n=4, max_tokens=8, max_num_batched_tokens=20)
    assert max(so.total_num_scheduled_tokens for so in log) == 20
    assert {k: v.output_token_ids for k, v in done.items()} == {k: v.output_token_ids for k, v in ref.items()}
    tiny, tlog, _ = _run(1 + 5, model=QWEN, n=4, max_tokens=40)  # preemption, decoder-only
    assert sum(len(so.preempted_req_ids) for so in tlog) > 0 and len(tiny) == 4


def test_decoder_only_encoder_budget_trims_the_chunk():
    s = create_scheduler(QWEN, encoder_compute_budget=64, encoder_cache_size=64)
    (r,) = create_requests(1, model=QWEN, prompt_len=100, num_mm_items=2, mm_len=40)
    s.add_request(r)  # items at offsets 0 and 50, 40 tokens each: one per step
    so = s.schedule()
    assert so.scheduled_encoder_inputs == {"req0": [0]} and so.num_scheduled_tokens == {"req0": 50}
    s.update_from_output(so, FakeModelRunner().execute_model(so))
    so = s.schedule()
    assert so.scheduled_encoder_inputs == {"req0": [1]} and so.num_scheduled_tokens == {"req0": 50}


@pytest.mark.parametrize("variant,per_attempt", [("0.10.2", True), ("0.10.2+#24866", True),
                                                 ("0.11.0", False)])
def test_registry_calls_per_admission_attempt(variant, per_attempt):
    reg = FakeRegistry()
    s = create_scheduler(num_blocks=1 + CROSS + 3, encoder_len_variant=variant, mm_registry=reg)
    for r in create_requests(2, max_tokens=5):
        s.add_request(r)
    at_start, calls = reg.calls, []  # the config's own lookup at construction, not counted
    run_to_completion(s, FakeModelRunner(cross_blocks=CROSS),
                      on_step=lambda i, so: calls.append(reg.calls - at_start))
    # step 1 admits req0 (req1 stopped by the encoder budget before asking); steps 2-5 try
    # req1 and fail on KV blocks; step 6 admits req1 once req0 finished.
    assert reg.calls - at_start == (6 if per_attempt else 0)
    if per_attempt:
        assert calls[:7] == [1, 2, 3, 4, 5, 6, 6]


def test_encoder_length_guard_catches_the_batching_alias():
    s = create_scheduler()
    s.vllm_config.scheduler_config.max_num_encoder_input_tokens = 8192  # override lost
    s.add_request(create_requests(1)[0])
    with pytest.raises(EncoderLengthMismatchError) as e:
        s.schedule()
    assert e.value.limit == 1500
    s.check_encoder_len = False  # what vLLM 0.13.0 did (PR #29421 dropped the override): 512 blocks
    assert len(s.schedule().scheduled_new_reqs[0].block_ids[1]) == 512


def test_abort_frees_blocks_running_and_waiting():
    s = create_scheduler(num_blocks=1 + 2 * (CROSS + 1))
    runner = FakeModelRunner(cross_blocks=CROSS)
    for r in create_requests(3, max_tokens=50):
        s.add_request(r)
    for _ in range(3):
        so = s.schedule()
        s.update_from_output(so, runner.execute_model(so))
    assert [r.request_id for r in s.running] == ["req0", "req1"] and len(s.waiting) == 1
    s.finish_requests(["req0", "req2", "nope"], RequestStatus.FINISHED_ABORTED)
    assert s.get_num_unfinished_requests() == 1
    assert s.kv_cache_manager.get_num_free_blocks() == usable(s) - (CROSS + 1)
    so = s.schedule()
    assert so.finished_req_ids == {"req0", "req2"}
    s.finish_requests("req1", RequestStatus.FINISHED_ABORTED)
    assert s.update_from_output(so, runner.execute_model(so)) == []  # aborted in between
    assert s.kv_cache_manager.get_num_free_blocks() == usable(s) and not s.has_unfinished_requests()
    with pytest.raises(InvalidInputError):
        s.finish_requests("req1", RequestStatus.RUNNING)


def test_eos_and_stop_tokens():
    eos = 50257

    def tok(rid, pos):
        return eos if pos == 7 else (42 if rid == "req2" and pos == 6 else fake_token(rid, pos))
    s = create_scheduler(encoder_compute_budget=4500, encoder_cache_size=4500)
    r0, r1, r2 = create_requests(3, max_tokens=10, ignore_eos=False)
    r1.sampling_params.ignore_eos = True
    r2.sampling_params.stop_token_ids = [42]
    for r in (r0, r1, r2):
        s.add_request(r)
    done = run_to_completion(s, FakeModelRunner(CROSS, token_fn=tok))
    assert (done["req0"].finish_reason, len(done["req0"].output_token_ids)) == ("stop", 4)
    assert done["req0"].output_token_ids[-1] == eos
    assert (done["req1"].finish_reason, len(done["req1"].output_token_ids)) == ("length", 10)
    assert (done["req2"].finish_reason, done["req2"].output_token_ids[-1]) == ("stop", 42)


def test_max_tokens_limit_448_minus_prompt():
    s = create_scheduler()
    ok = Request("ok", WHISPER_PROMPT, SamplingParams(max_tokens=444))
    s.add_request(ok)
    with pytest.raises(SamplingParamsError) as e:
        s.add_request(Request("big", WHISPER_PROMPT, SamplingParams(max_tokens=445)))
    assert (e.value.field, e.value.limit) == ("max_tokens", 444)
    with pytest.raises(InvalidInputError, match="request_id"):
        s.add_request(Request("ok", WHISPER_PROMPT))
    with pytest.raises(InvalidInputError, match="prompt_token_ids"):
        s.add_request(Request("long", list(range(448))))
    check_max_tokens(SamplingParams(max_tokens=100), 28, 128)


@pytest.mark.parametrize("kw,field", [({"max_tokens": 0}, "max_tokens"), ({"max_tokens": -1}, "max_tokens"),
                                      ({"temperature": -0.5}, "temperature"),
                                      ({"stop_token_ids": [-1]}, "stop_token_ids")])
def test_sampling_params_validation(kw, field):
    with pytest.raises(SamplingParamsError) as e:
        SamplingParams(**kw)
    assert e.value.field == field


def test_request_derives_whisper_encoder_len_and_validates():
    import torch
    r = Request("a", WHISPER_PROMPT, mm_inputs=[{"input_features": torch.zeros(80, 3000)}])
    assert r.get_num_encoder_tokens(0) == 1500 and r.has_encoder_inputs
    with pytest.raises(InvalidInputError, match="prompt_token_ids"):
        Request("b", [])


def test_request_that_can_never_fit_the_kv_cache_is_refused():
    s = create_scheduler(num_blocks=1 + CROSS + 1)  # one self-attention block left: 16 tokens
    import torch
    audio = [{"input_features": torch.zeros(80, 3000)}]
    s.add_request(Request("fits", WHISPER_PROMPT, SamplingParams(max_tokens=12), mm_inputs=audio))
    with pytest.raises(SamplingParamsError) as e:
        s.add_request(Request("never", WHISPER_PROMPT, SamplingParams(max_tokens=13), mm_inputs=audio))
    assert (e.value.field, e.value.limit) == ("max_tokens", 12)
