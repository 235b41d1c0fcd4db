"""``LLMEngine.generate()`` treats its batch as one unit (issue 29, kind 2; vLLM PR #27420).

For every failing position in a batch of three and every way a batch can fail (a prompt P0
refuses, a request the engine core refuses, an exception while the batch runs), in-process and
two-process: the exception is re-raised, none of the batch is left in flight, the next
``generate()`` returns only its own outputs, and a request queued before with ``add_request``
is neither lost nor answered twice.
"""
from __future__ import annotations

import numpy as np
import pytest

from refimpl.engine.llm_engine import LLMEngine
from refimpl.errors import InvalidInputError, SamplingParamsError
from refimpl.sampling_params import SamplingParams

VOCAB = 51865  # whisper-tiny
SP = SamplingParams(max_tokens=2, ignore_eos=True)
BATCH = 3
MODES = ["inproc", pytest.param("mp", marks=pytest.mark.slow)]


def _audio(seed: int) -> dict:
    return {"multi_modal_data": {"audio": np.random.default_rng(seed).normal(0, 0.1, 4000).astype(np.float32)}}


@pytest.fixture(scope="module", params=MODES)
def engine(request):
    e = LLMEngine.from_args("whisper-tiny", device="cpu", max_num_seqs=4,
                            process_mode=request.param)
    yield e
    e.shutdown()
    from refimpl.multimodal import MULTIMODAL_REGISTRY
    MULTIMODAL_REGISTRY.reset_processor_cache()


def _idle(e: LLMEngine) -> None:
    assert not e.has_unfinished_requests()
    assert not e.output_processor.request_states and not e.output_processor.external_req_ids
    if e.process_mode == "inproc":
        assert not e.scheduler.requests and not e.model_runner.whisper_runner.requests
    else:
        assert not e.engine_core._in_flight
        assert e.engine_core.client.call_utility("runner_state") == {}


FAILURES = ["p0-refusal-audio", "p0-refusal-token-id", "engine-core-refusal", "exception-while-running"]


@pytest.mark.slow
@pytest.mark.parametrize("failure", FAILURES)
@pytest.mark.parametrize("position", range(BATCH))
def test_failed_batch_leaves_nothing_behind(engine, failure, position, monkeypatch):
    prompts = [_audio(i) for i in range(BATCH)]
    params = [SP] * BATCH
    if failure == "p0-refusal-audio":
        prompts[position] = {"multi_modal_data": {"audio": np.zeros(0, np.float32)}}
    elif failure == "p0-refusal-token-id":  # the scheduler's rule, checked in P0 before queueing
        prompts[position] = dict(prompts[position], prompt_token_ids=[50258, VOCAB])
    elif failure == "engine-core-refusal":  # the engine core refuses the request being queued
        calls, add = [0], engine.engine_core.add_request

        def refusing_add(req):
            calls[0] += 1
            if calls[0] == position + 2:  # the first call queues "keep"
                raise InvalidInputError("request", "accepted by the engine core", "refused (injected)")
            return add(req)
        monkeypatch.setattr(engine.engine_core, "add_request", refusing_add)
    else:
        calls, step = [0], engine._step_core

        def failing_step():
            calls[0] += 1
            if calls[0] > position:
                raise RuntimeError("injected")
            return step()
        monkeypatch.setattr(engine, "_step_core", failing_step)
    keep = engine.add_request("keep", _audio(9), SP)  # queued by the user before the batch
    expected = RuntimeError if failure == "exception-while-running" else InvalidInputError
    with pytest.raises(expected):
        engine.generate(prompts, params)
    monkeypatch.undo()
    (out,) = engine.generate([_audio(7)], SP)
    assert len(out.output_token_ids) == 2 and out.request_id != keep
    kept = []
    while engine.has_unfinished_requests():
        kept += engine.step()
    assert [o.request_id for o in kept] == ["keep"], "a request queued before the batch was lost"
    assert len(kept[0].output_token_ids) == 2
    _idle(engine)


def test_params_of_another_length_refused_before_anything_runs(engine):
    with pytest.raises(SamplingParamsError) as e:
        engine.generate([_audio(0), _audio(1)], [SP])
    assert e.value.field == "params"
    _idle(engine)
    assert len(engine.generate([_audio(0)], [SP])) == 1
