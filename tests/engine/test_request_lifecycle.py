"""A request's life in the in-process engine (issue 21, kinds 1, 2 and 4); the two-process
engine's cases are in tests/engine/test_two_process.py.

whisper-tiny, random weights re-drawn at std 0.2 (tokens depend on the audio), block size 8
and 380 KV blocks: two requests fit (188 cross blocks each), a third waits, and two growing
past 8 tokens preempt one. References: each audio served alone by the freshly started engine
(greedy, ignore_eos: the first k tokens of a longer run are the k-token run).

- kind 1: a drain (``while has_unfinished_requests(): step()``) from any state (running,
  waiting, preempted, aborted, finished) leaves the runner no state and the scheduler no
  undelivered finished id; aborting everything frees the runner's state at once;
- kind 2: any interleaving of add / abort / re-add with reused ids gives each submission its
  own tokens, exactly once; a reused id in flight is refused; ``generate()`` picks free ids;
- kind 4: no SamplingParams / prompt that admission accepts fails inside a step; a request
  whose runner state cannot be set up finishes with "error", alone.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from refimpl.audio import make_request_audios
from refimpl.engine.llm_engine import LLMEngine
from refimpl.errors import InvalidInputError, RefimplError, SamplingParamsError
from refimpl.request import RequestStatus
from refimpl.sampling_params import SEED_LIMIT, SEED_MAX, SEED_MIN, SamplingParams
from refimpl.worker.model_loader import initialize_dummy_weights
from refimpl.worker.whisper_runner import WhisperRunner

pytestmark = pytest.mark.slow  # engines stepped through hypothesis interleavings

MAX_K = 8
VOCAB = 51865
IDS = ("X", "Y", "0", "1")
SETTINGS = settings(max_examples=6, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
SOAK = settings(SETTINGS, max_examples=100)


def audio_prompt(audio) -> dict:
    """A Whisper prompt of one 16 kHz audio."""
    return {"multi_modal_data": {"audio": (audio, 16000)}}


def greedy(k: int) -> SamplingParams:
    """``k`` tokens, EOS ignored."""
    return SamplingParams(max_tokens=k, ignore_eos=True)


@pytest.fixture(scope="module")
def audios():
    return make_request_audios(4, seed=3, max_s=4.0)


@pytest.fixture(scope="module")
def engine():
    e = LLMEngine.from_args("whisper-tiny", device="cpu", block_size=8, num_gpu_blocks=380,
                            max_num_seqs=3, process_mode="inproc")
    initialize_dummy_weights(e.model_runner.model, seed=0, std=0.2)
    yield e
    e.reset_mm_cache()


@pytest.fixture(scope="module")
def ref(engine, audios):
    """Each audio's MAX_K greedy tokens, served alone on the fresh engine."""
    out = [engine.generate([audio_prompt(a)], greedy(MAX_K))[0].output_token_ids for a in audios]
    assert len({tuple(t) for t in out}) == len(out), "tokens must depend on the audio"
    return out


def assert_idle_and_empty(e: LLMEngine) -> None:
    """Nothing unfinished, and nothing of any request left: runner state, undelivered
    finished ids, KV blocks, encoder cache, in-flight ids."""
    s, runner = e.scheduler, e.model_runner.whisper_runner
    assert not e.has_unfinished_requests()
    assert runner.state_bytes() == {} and runner.requests == {}
    assert not s.has_finished_requests() and s.requests == {}
    kv = s.kv_cache_manager
    assert kv.get_num_free_blocks() == kv.block_pool.num_gpu_blocks - 1
    assert s.encoder_cache_manager.cached == {}
    assert not e.output_processor.has_unfinished_requests()


def drain(e: LLMEngine) -> list:
    outs = []
    while e.has_unfinished_requests():
        outs += e.step()
    return outs


# ----------------------------------------------------------------------------- kind 1
def test_finished_and_aborted_requests_leave_no_runner_state(engine, audios, ref):
    """The issue's inputs: one request of max_tokens=1 (19,392,000 bytes held after the
    drain before the fix); two started, then aborted (38.8 MB)."""
    runner = engine.model_runner.whisper_runner
    engine.add_request("a", audio_prompt(audios[0]), SamplingParams(max_tokens=1))
    drain(engine)
    assert_idle_and_empty(engine)
    engine.add_request("b", audio_prompt(audios[1]), greedy(MAX_K))
    engine.add_request("c", audio_prompt(audios[2]), greedy(MAX_K))
    engine.step()
    engine.step()
    held = runner.state_bytes()
    assert len(held) == 2 and min(held.values()) >= 19_392_000  # features + 4 layers' dense cross K/V
    engine.abort_request(["b", "c"])
    assert runner.state_bytes() == {}  # at once: no step follows an abort that leaves nothing
    assert_idle_and_empty(engine)


def test_drain_from_preempted_state(engine, audios, ref):
    """Two requests growing past one self-attention block preempt the later one; the runner
    keeps a preempted request's state (its generator), so an abort must still free it."""
    for rid, a in (("pp", 0), ("qq", 1)):
        engine.add_request(rid, audio_prompt(audios[a]), greedy(MAX_K))
    s = engine.scheduler
    while not any(r.status == RequestStatus.PREEMPTED for r in s.waiting):
        engine.step()
    (pre,) = [r for r in s.waiting if r.status == RequestStatus.PREEMPTED]
    assert pre.request_id in engine.model_runner.whisper_runner.requests  # kept while preempted
    engine.abort_request(pre.external_req_id)  # one id, not an iterable of ids
    other = {"pp": "qq", "qq": "pp"}[pre.external_req_id]
    assert [(o.request_id, o.output_token_ids) for o in drain(engine)] == [(other, ref[{"pp": 0, "qq": 1}[other]])]
    assert_idle_and_empty(engine)


# ----------------------------------------------------------------------------- kind 2 (+1)
OPS = st.lists(st.one_of(
    st.tuples(st.just("add"), st.sampled_from(IDS), st.integers(0, 3), st.integers(1, MAX_K)),
    st.tuples(st.just("abort"), st.sampled_from(IDS)),
    st.tuples(st.just("step"), st.integers(1, 4))), min_size=1, max_size=10)


def check_interleaving(engine, audios, ref, ops) -> None:
    """Model: the submission each user id stands for while in flight. Every output must be
    that submission's (audio, k) reference, exactly once; an abort silences it; a reused id
    in flight is refused. Then a drain from wherever the ops left off leaves nothing."""
    live: dict[str, tuple[int, int]] = {}
    answered = 0

    def check(outs):
        nonlocal answered
        for o in outs:
            a, k = live.pop(o.request_id)  # KeyError: an answer for no live submission
            assert (o.output_token_ids, o.finish_reason) == (ref[a][:k], "length"), o.request_id
            event(f"preempted {min(o.num_preemptions, 1)}")
            answered += 1

    for op in ops:
        if op[0] == "add":
            _, rid, a, k = op
            if rid in live:
                with pytest.raises(InvalidInputError, match="in flight"):
                    engine.add_request(rid, audio_prompt(audios[a]), greedy(k))
                continue
            engine.add_request(rid, audio_prompt(audios[a]), greedy(k))
            live[rid] = (a, k)
        elif op[0] == "abort":
            engine.abort_request([op[1]])
            live.pop(op[1], None)
        else:
            for _ in range(op[1]):
                check(engine.step())
        event(f"waiting {min(len(engine.scheduler.waiting), 1)}")
    check(drain(engine))
    assert live == {}
    assert_idle_and_empty(engine)


@SETTINGS
@given(ops=OPS)
def test_any_interleaving_with_reused_ids_gives_each_submission_its_own_tokens(engine, audios, ref, ops):
    check_interleaving(engine, audios, ref, ops)


@pytest.mark.soak
@SOAK
@given(ops=OPS)
def test_any_interleaving_soak(engine, audios, ref, ops):
    check_interleaving(engine, audios, ref, ops)


def test_generate_picks_ids_not_in_flight(engine, audios, ref):
    engine.add_request("0", audio_prompt(audios[0]), greedy(3))  # the id generate() would pick next
    out = engine.generate([audio_prompt(audios[1])], greedy(4))
    assert out[0].request_id != "0" and out[0].output_token_ids == ref[1][:4]
    drain(engine)
    assert_idle_and_empty(engine)


@pytest.mark.parametrize("rid", [7, "", b"X"])
def test_request_id_must_be_a_non_empty_str(engine, audios, rid):
    with pytest.raises(InvalidInputError) as e:
        engine.add_request(rid, audio_prompt(audios[0]), greedy(1))
    assert (e.value.field, e.value.limit) == ("request_id", "a non-empty str")
    assert_idle_and_empty(engine)


# ----------------------------------------------------------------------------- kind 4
def test_seed_beyond_int64_refused_others_unaffected(engine, audios, ref):
    """The issue's input: seed=2**64 overflowed torch.Generator.manual_seed inside the step,
    leaving the request RUNNING with its KV blocks and the good request unfinished."""
    with pytest.raises(SamplingParamsError) as e:
        SamplingParams(max_tokens=2, temperature=1.0, seed=2**64)
    assert (e.value.field, e.value.limit) == ("seed", SEED_LIMIT)
    bad = SamplingParams(max_tokens=2, temperature=1.0, seed=2**63 - 1)
    bad.seed = 2**64  # changed after it was checked: admission checks again
    engine.add_request("good", audio_prompt(audios[0]), greedy(2))
    with pytest.raises(SamplingParamsError, match="seed"):
        engine.add_request("bad", audio_prompt(audios[1]), bad)
    assert [(o.request_id, o.output_token_ids) for o in drain(engine)] == [("good", ref[0][:2])]
    assert_idle_and_empty(engine)


VALID = {
    "max_tokens": st.integers(1, 3),
    "temperature": st.one_of(st.just(0.0), st.floats(1e-9, 1e300), st.integers(1, 2**70)),
    "seed": st.one_of(st.none(), st.integers(SEED_MIN, SEED_MAX), st.sampled_from([-1, SEED_MIN, SEED_MAX])),
    "stop_token_ids": st.lists(st.integers(0, VOCAB - 1), max_size=2),
    "prompt_token_ids": st.one_of(st.none(), st.lists(st.integers(0, VOCAB - 1), min_size=1, max_size=3)),
}
OUT_OF_RANGE = {
    "max_tokens": st.one_of(st.integers(-(2**70), 0), st.integers(445, 2**70), st.sampled_from([2.0, True])),
    "temperature": st.one_of(st.floats(max_value=-1e-300), st.sampled_from([float("nan"), float("inf"), True]),
                             st.integers(2**1024, 2**1100)),
    "seed": st.one_of(st.integers(SEED_MAX + 1, 2**70), st.integers(-(2**70), SEED_MIN - 1), st.just(1.5)),
    "stop_token_ids": st.lists(st.one_of(st.integers(VOCAB, 2**70), st.integers(-5, -1)), min_size=1, max_size=2),
    "prompt_token_ids": st.lists(st.integers(VOCAB, 2**70), min_size=1, max_size=2),
}


@st.composite
def request_values(draw):
    """(the field drawn out of range or None, every field's value)."""
    bad = draw(st.sampled_from([None, *OUT_OF_RANGE]))
    return bad, {k: draw(OUT_OF_RANGE[k] if k == bad else VALID[k]) for k in VALID}


@SETTINGS
@given(case=request_values())
def test_no_admitted_value_fails_inside_a_step(engine, audios, case):
    """A value out of what the step's consumers take (embedding, generator, sampler, scheduler)
    is refused with a RefimplError naming its field; a request of values in range is served
    to the end."""
    bad, v = case
    prompt = audio_prompt(audios[0])
    if v["prompt_token_ids"] is not None:
        prompt["prompt_token_ids"] = v["prompt_token_ids"]
    try:
        sp = SamplingParams(**{k: v[k] for k in ("max_tokens", "temperature", "seed", "stop_token_ids")})
        engine.add_request("v", prompt, sp)
    except RefimplError as e:
        assert bad is not None and bad in e.field, (bad, e)
        event(f"refused: {e.field}")
        assert_idle_and_empty(engine)
        return
    assert bad is None, f"{bad}={v[bad]!r} accepted"
    (out,) = drain(engine)
    assert out.request_id == "v" and out.finish_reason in ("stop", "length")
    assert_idle_and_empty(engine)


def test_a_request_whose_runner_state_fails_finishes_with_error_alone(engine, audios, ref, monkeypatch):
    """Runner state set-up (generator, features on the device, cross K/V copies) failing for
    one request: that request finishes with "error" and frees its blocks; the request running
    beside it and the requests after it are served as if nothing happened."""
    orig = WhisperRunner._new_request_state

    def fail_for_bad(self, nr, old):
        if nr.req_id.startswith("bad-"):
            raise MemoryError("injected: no memory for the cross K/V copy")
        return orig(self, nr, old)

    monkeypatch.setattr(WhisperRunner, "_new_request_state", fail_for_bad)
    engine.add_request("ok", audio_prompt(audios[0]), greedy(MAX_K))
    engine.step()
    engine.add_request("bad", audio_prompt(audios[1]), greedy(MAX_K))
    outs = {o.request_id: o for o in drain(engine)}
    assert outs["bad"].finish_reason == "error" and "MemoryError: injected" in outs["bad"].error
    assert outs["bad"].output_token_ids == [] and outs["ok"].output_token_ids == ref[0]
    assert_idle_and_empty(engine)
    monkeypatch.undo()
    assert engine.generate([audio_prompt(audios[1])], greedy(3))[0].output_token_ids == ref[1][:3]
    assert_idle_and_empty(engine)


def test_features_refused_at_admission(engine, audios):
    """Features the encoder cannot take (wrong frames, NaN), queued straight on the engine core."""
    from refimpl.request import Request
    good = engine.processor.apply("", {"audio": [(audios[0], 16000)]}).mm_kwargs["audio"][0]["input_features"]
    for feats, msg in ((good[:, :100], r"\(80, 3000\)"), (good * np.nan, "NaN")):
        with pytest.raises(InvalidInputError, match=msg) as e:
            engine.engine_core.add_request(Request("f", [50258], mm_inputs=[{"input_features": feats}]))
        assert e.value.field == "mm_inputs"
    assert_idle_and_empty(engine)
