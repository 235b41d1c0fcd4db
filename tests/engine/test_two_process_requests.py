"""A request's life in the two-process engine (issue 21, kinds 1, 2 and 4), P1 a child process.

Example-based (each case costs encoder runs in the child); the in-process engine's property
tests are in tests/engine/test_request_lifecycle.py. whisper-tiny, 2 sequences at most, KV for two.

- kind 1: once P1 has nothing unfinished its runner holds no request's state: finished but
  unread by P0, aborted while running or waiting;
- kind 2: a user id reused after abort answers with the new submission's own tokens whatever
  the old one's state was (finished unread: the issue's input, running, waiting, rejected
  unread or read), also for the ids ``generate()`` picks;
- kind 4: a value changed after its check is refused by P1's admission and P1 serves on; a
  request whose runner state cannot be set up finishes with "error" while the others finish.

The engine is the default row's, so its start-up also shows that row's reset of both processes.
"""
from __future__ import annotations

import itertools
import operator
import time

import pytest

from refimpl.audio import make_request_audios
from refimpl.engine.llm_engine import LLMEngine
from refimpl.errors import InvalidInputError, SamplingParamsError
from refimpl.request import Request
from refimpl.sampling_params import SamplingParams
from refimpl.worker.whisper_runner import WhisperRunner

pytestmark = pytest.mark.slow  # two-process engines (a P1 child per test)

VOCAB = 51865


def audio_prompt(audio) -> dict:
    """A Whisper prompt of one 16 kHz audio."""
    return {"multi_modal_data": {"audio": (audio, 16000)}}


def greedy(k: int) -> SamplingParams:
    """``k`` tokens, EOS ignored."""
    return SamplingParams(max_tokens=k, ignore_eos=True)


@pytest.fixture(scope="module")
def audios():
    return make_request_audios(2, seed=5, max_s=3.0)


@pytest.fixture(scope="module")
def engine():
    e = LLMEngine.from_args("whisper-tiny", device="cpu", max_num_seqs=2, num_gpu_blocks=2 * 97 + 1,
                            process_mode="mp")
    yield e
    e.shutdown()
    from refimpl.multimodal import MULTIMODAL_REGISTRY
    MULTIMODAL_REGISTRY.reset_processor_cache()  # P0 is this process: leave its cache empty


@pytest.fixture(scope="module")
def ref(engine, audios):
    """Audio 0's 12 and audio 1's 7 greedy tokens, each served alone by the fresh engine."""
    return [engine.generate([audio_prompt(a)], greedy(k))[0].output_token_ids for a, k in zip(audios, (12, 7))]


def test_default_row_resets_both_processes(engine):
    """LLMEngine's default row (refimpl, as EngineCore's) and its reset scope ("all", vLLM
    0.11.1 on): start-up leaves neither process's processing cache filled."""
    mem = engine.engine_core.startup_memory
    assert mem["p1_cache_bytes_before_reset"] > 0 == mem["p1_cache_bytes_after_reset"]
    assert mem["p0_cache_bytes_after_reset"] == 0


def p1(engine, method: str, *args):
    return engine.engine_core.client.call_utility(method, *args)


def wait_until(cond, timeout_s: float = 300.0) -> None:
    t0 = time.monotonic()
    while not cond():
        assert time.monotonic() - t0 < timeout_s, "the engine core did not get there"
        time.sleep(0.05)


def drain(e: LLMEngine) -> dict:
    outs: dict = {}
    while e.has_unfinished_requests():
        for o in e.step():
            assert o.request_id not in outs, f"{o.request_id} answered twice"
            outs[o.request_id] = o
    return outs


def assert_p1_holds_nothing(engine) -> None:
    assert not engine.has_unfinished_requests()
    assert p1(engine, "runner_state") == {}
    assert not p1(engine, "has_unfinished_requests")


# ----------------------------------------------------------------------------- kind 1
def test_runner_state_freed_in_p1_once_nothing_is_unfinished(engine, audios, ref):
    engine.add_request("a", audio_prompt(audios[0]), SamplingParams(max_tokens=1))
    wait_until(lambda: not p1(engine, "has_unfinished_requests"))
    assert p1(engine, "runner_state") == {}  # finished, output not read by P0 yet
    assert [o.request_id for o in drain(engine).values()] == ["a"]
    for rid in ("b", "c", "w"):  # "w" waits: two sequences at most
        engine.add_request(rid, audio_prompt(audios[1]), greedy(40))
    wait_until(lambda: len(p1(engine, "runner_state")) == 2)
    assert min(p1(engine, "runner_state").values()) >= 19_392_000  # features + dense cross K/V
    engine.abort_request(["w"])
    engine.abort_request(["b", "c"])
    assert_p1_holds_nothing(engine)


# ----------------------------------------------------------------------------- kind 2
def _old_submission(engine, audios, state: str) -> None:
    """Leave a submission "X" in ``state`` (its output, if any, unread)."""
    if state == "finished-unread":  # the input
        engine.add_request("X", audio_prompt(audios[0]), SamplingParams(max_tokens=1))
        wait_until(lambda: not p1(engine, "has_unfinished_requests"))
    elif state == "running":
        engine.add_request("X", audio_prompt(audios[0]), greedy(40))
        wait_until(lambda: any(r.startswith("X-") for r in p1(engine, "runner_state")))
    elif state == "waiting":
        engine.add_request("f1", audio_prompt(audios[0]), greedy(12))
        engine.add_request("f2", audio_prompt(audios[0]), greedy(12))
        engine.add_request("X", audio_prompt(audios[0]), greedy(3))
        wait_until(lambda: len(p1(engine, "runner_state")) == 2)  # f1, f2 run; X waits
    else:  # rejected by P1, read or not: a token id beyond the vocabulary set after P0's check (P0
        # refuses it when given: issue 29, kind 2)
        req = engine._process_request("X", audio_prompt(audios[0]), greedy(1), None)
        req.prompt_token_ids[-1] = VOCAB
        engine._queue(req)
        if state == "rejected-read":
            with pytest.raises(InvalidInputError) as e:
                engine.step()
            assert (e.value.request_id, e.value.field) == ("X", "prompt_token_ids")


@pytest.mark.parametrize("state", ["finished-unread", "running", "waiting", "rejected", "rejected-read"])
def test_reused_id_answers_with_its_own_tokens(engine, audios, ref, state):
    """Before: the new "X" (7 tokens asked) got the old one's single token (finished-unread)."""
    _old_submission(engine, audios, state)
    engine.abort_request(["X"])
    engine.add_request("X", audio_prompt(audios[1]), greedy(7))
    outs = drain(engine)
    assert outs["X"].output_token_ids == ref[1] and len(ref[1]) == 7
    assert set(outs) <= {"X", "f1", "f2"} and all(outs[f].output_token_ids == ref[0] for f in set(outs) - {"X"})
    assert_p1_holds_nothing(engine)


def test_ids_generate_picks_are_fresh_submissions(engine, audios, ref):
    """generate() numbers its requests from "0": an aborted "0" whose output is unread must
    not answer generate()'s own "0"."""
    engine._ids = itertools.count()  # generate()'s next id is "0"
    engine.add_request("0", audio_prompt(audios[0]), SamplingParams(max_tokens=1))
    wait_until(lambda: not p1(engine, "has_unfinished_requests"))
    engine.abort_request(["0"])
    (out,) = engine.generate([audio_prompt(audios[1])], greedy(7))
    assert (out.request_id, out.output_token_ids) == ("0", ref[1])
    assert_p1_holds_nothing(engine)


# ----------------------------------------------------------------------------- kind 4
def test_value_changed_after_its_check_is_refused_by_p1(engine, audios, ref):
    """SamplingParams(seed=2**64) is refused when built; one changed afterwards and sent past
    the front end's copy reaches P1's admission, which refuses it (before: an overflow in
    the step, fatal to the engine core)."""
    sp = SamplingParams(max_tokens=2, temperature=1.0)
    sp.seed = 2**64
    mm = engine.processor.apply("", {"audio": [(audios[0], 16000)]}, return_mm_hashes=True)
    engine.engine_core.add_request(Request("bad-seed", [50258, 50259, 50359, 50363], sp,
                                           mm_inputs=mm.mm_kwargs["audio"], mm_hashes=mm.mm_hashes["audio"]))
    with pytest.raises(SamplingParamsError) as e:
        drain(engine)
    assert e.value.field == "seed" and e.value.request_id is None  # not one of LLMEngine's ids
    assert engine.generate([audio_prompt(audios[1])], greedy(7))[0].output_token_ids == ref[1]
    assert_p1_holds_nothing(engine)


class _InP1:
    """Unpickled in the engine-core process, calls ``func(*args)`` there: fault injection
    through a utility call's arguments (our own child, behind the engine's secret)."""

    def __init__(self, func, *args):
        self.call = (func, args)

    def __reduce__(self):
        return self.call


def test_runner_state_failure_fails_that_request_only(engine, audios, ref):
    engine.add_request("ok", audio_prompt(audios[0]), greedy(12))
    wait_until(lambda: any(r.startswith("ok-") for r in p1(engine, "runner_state")))
    # every new request's state set-up now raises (TypeError): "ok" is set up already
    p1(engine, "__setattr__", "_fault", _InP1(setattr, WhisperRunner, "_orig", WhisperRunner._new_request_state))
    p1(engine, "__setattr__", "_fault", _InP1(setattr, WhisperRunner, "_new_request_state", operator.truediv))
    try:
        engine.add_request("bad", audio_prompt(audios[1]), greedy(7))
        outs = drain(engine)
    finally:
        p1(engine, "__setattr__", "_fault", _InP1(setattr, WhisperRunner, "_new_request_state",
                                                  _InP1(getattr, WhisperRunner, "_orig")))
    assert outs["ok"].output_token_ids == ref[0] and outs["ok"].finish_reason == "length"
    assert outs["bad"].finish_reason == "error" and outs["bad"].error.startswith("TypeError")
    assert engine.generate([audio_prompt(audios[1])], greedy(7))[0].output_token_ids == ref[1]
    assert_p1_holds_nothing(engine)
