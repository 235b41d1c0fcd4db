"""The request dict is checked once, before anything in it is read (issue 46, kind 1; vLLM issue
#40339's family): ``refimpl/engine/prompt.py``'s ``parse_prompt``, called first by
``LLMEngine.add_request`` / ``generate``.

Properties over the kind: every form vLLM takes for Whisper (implicit TextPrompt / TokensPrompt,
explicit encoder / decoder prompt, each decoder prompt as text, ids, a TextPrompt or a
TokensPrompt) and refimpl's own is served with the decoder prompt given; any key replaced by a
value of the wrong kind, and any unknown or unserved key, is refused with an InvalidInputError
naming that key, before anything is processed or queued (nothing in flight, no HF pass).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refimpl.engine.llm_engine import LLMEngine
from refimpl.engine.prompt import NOT_SERVED, parse_prompt
from refimpl.errors import InvalidInputError, RefimplError
from refimpl.sampling_params import SamplingParams

CLIP = np.random.default_rng(0).normal(0, 0.1, 8000).astype(np.float32)
START = 50258
# <|startoftranscript|><|fr|><|translate|><|notimestamps|> and a few others, as text and as ids
TEXTS = {"<|startoftranscript|><|fr|><|translate|><|notimestamps|>": [50258, 50265, 50358, 50363],
         "<|startoftranscript|><|en|><|transcribe|>": [50258, 50259, 50359],
         "<|startoftranscript|>": [50258]}
IDS = [[50258, 50265, 50358, 50363], [50258, 50259, 50359, 50363, 220], [50259, 50359]]
BAD = st.one_of(st.none(), st.integers(), st.floats(), st.booleans(), st.just({"x": 1}), st.just(["a", "b"]),
                st.just([1, True]), st.just([1, -2]), st.just(b"abc"), st.just(np.zeros(3)))


@pytest.fixture(scope="module")
def engine():
    e = LLMEngine.from_args("whisper-tiny", device="cpu", process_mode="inproc")
    yield e
    e.shutdown()


def audio():
    return {"audio": (CLIP, 16000)}


@st.composite
def request_dicts(draw):
    """(a request dict in one of the forms, the decoder ids it asks for)."""
    form = draw(st.sampled_from(["own-text", "own-ids", "own-token-ids", "implicit-text", "implicit-ids",
                                 "explicit", "none"]))
    text = draw(st.sampled_from(sorted(TEXTS)))
    ids = draw(st.sampled_from(IDS))
    if form == "own-text":
        return {"multi_modal_data": audio(), "decoder_prompt": text}, TEXTS[text]
    if form == "own-ids":
        return {"multi_modal_data": audio(), "decoder_prompt": ids}, ids
    if form in ("own-token-ids", "implicit-ids"):
        d = {"multi_modal_data": audio(), "prompt_token_ids": ids}
        if form == "implicit-ids" and draw(st.booleans()):
            d["prompt"] = "the ids' text"  # TokensPrompt's optional text, not read
        return d, ids
    if form == "implicit-text":
        return {"prompt": text, "multi_modal_data": audio()}, TEXTS[text]
    if form == "none":
        return {"multi_modal_data": audio()}, [50258, 50259, 50359, 50363]
    enc = draw(st.sampled_from([{"prompt": ""}, {"prompt_token_ids": [0]}, {}]))
    dec_kind = draw(st.sampled_from(["text", "ids", "TextPrompt", "TokensPrompt", "None"]))
    dec = {"text": text, "ids": ids, "TextPrompt": {"prompt": text}, "TokensPrompt": {"prompt_token_ids": ids},
           "None": None}[dec_kind]
    want = {"text": TEXTS[text], "ids": ids, "TextPrompt": TEXTS[text], "TokensPrompt": ids,
            "None": [50258, 50259, 50359, 50363]}[dec_kind]
    if want[0] != START:
        want = [START, *want]  # vLLM prepends decoder_start_token_id in the explicit form
    return {"encoder_prompt": {**enc, "multi_modal_data": audio()}, "decoder_prompt": dec}, want


def queued_prompt(engine, rid):
    internal = engine.output_processor.external_req_ids[rid]
    return list(engine.scheduler.requests[internal].prompt_token_ids)


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(case=request_dicts())
def test_every_form_is_served_with_the_prompt_given(engine, case):
    d, want = case
    rid = engine.add_request(None, d, SamplingParams(max_tokens=1))
    try:
        assert queued_prompt(engine, rid) == want
    finally:
        engine.abort_request(rid)


def _paths(d, prefix="prompt"):
    """(key path, parent dict, key) of every prompt-valued key of a request dict."""
    for k, v in d.items():
        if k in ("prompt", "prompt_token_ids", "decoder_prompt", "encoder_prompt", "multi_modal_data",
                 "mm_processor_kwargs") and not (k == "encoder_prompt" and isinstance(v, dict)):
            yield f"{prefix}.{k}", d, k
        if k in ("encoder_prompt", "decoder_prompt") and isinstance(v, dict):
            yield from _paths(v, f"{prefix}.{k}")


@settings(max_examples=60, deadline=None)
@given(case=request_dicts(), data=st.data())
def test_a_wrong_value_or_key_is_refused_naming_it_before_anything_runs(engine, case, data):
    d, _ = case
    stats = engine.processor.stats
    passes = stats.hf_processor_calls
    if data.draw(st.booleans(), label="extra key"):
        key = data.draw(st.sampled_from(["promt", "decoder", "audio", "encoder", *NOT_SERVED]), label="key")
        parent, path = d, "prompt"
        if "encoder_prompt" in d and data.draw(st.booleans(), label="in the encoder prompt"):
            parent, path = d["encoder_prompt"], "prompt.encoder_prompt"
        parent[key] = "x"
        want = f"{path}.{key}"
    else:
        paths = [p for p in _paths(d) if not p[0].endswith(".mm_processor_kwargs")]
        path, parent, key = data.draw(st.sampled_from(paths), label="path")
        bad = data.draw(BAD, label="value")
        if key == "decoder_prompt" and bad is None and "encoder_prompt" in d:
            return  # vLLM's explicit form: None is the default decoder prompt
        if key == "prompt" and "prompt_token_ids" in parent and isinstance(bad, str):
            return
        parent[key] = bad
        want = path
    with pytest.raises(InvalidInputError) as e:
        engine.add_request("bad", d, SamplingParams(max_tokens=1))
    assert e.value.field == want or e.value.field.startswith(want + "."), (e.value.field, want)
    assert not engine.has_unfinished_requests() and "bad" not in engine.output_processor.external_req_ids
    assert stats.hf_processor_calls == passes  # refused before any processing


@pytest.mark.slow
def test_the_issues_inputs(engine):
    sp = SamplingParams(max_tokens=2)
    engine.add_request("own", {"multi_modal_data": audio(), "decoder_prompt": [50258, 50265, 50358, 50363]}, sp)
    engine.add_request("implicit", {"prompt": "<|startoftranscript|><|fr|><|translate|><|notimestamps|>",
                                    "multi_modal_data": audio()}, sp)
    engine.add_request("explicit", {"encoder_prompt": {"prompt": "", "multi_modal_data": audio()},
                                    "decoder_prompt": "<|startoftranscript|><|fr|><|translate|><|notimestamps|>"}, sp)
    outs = {}
    while engine.has_unfinished_requests():
        outs.update({o.request_id: o for o in engine.step()})
    assert {k: o.prompt_token_ids for k, o in outs.items()} == {k: [50258, 50265, 50358, 50363] for k in outs}
    assert all(len(o.output_token_ids) == 2 or o.finish_reason == "stop" for o in outs.values())
    for d, field in [({"multi_modal_data": audio(), "decoder_prompt": None}, "prompt.decoder_prompt"),
                     ({"multi_modal_data": audio(), "decoder_prompt": 5}, "prompt.decoder_prompt"),
                     ({"multi_modal_data": audio(), "prompt_token_ids": None}, "prompt.prompt_token_ids"),
                     ({"multi_modal_data": audio(), "cache_salt": "s"}, "prompt.cache_salt"),
                     ({"prompt": "x"}, "prompt.multi_modal_data.audio"),
                     ({"prompt": "x", "decoder_prompt": "y", "multi_modal_data": audio()}, "prompt"),
                     ("a string", "prompt")]:
        with pytest.raises(InvalidInputError) as e:
            engine.add_request("bad", d, sp)
        assert e.value.field == field, d
    with pytest.raises(RefimplError):  # generate refuses the whole batch before queueing any
        engine.generate([{"multi_modal_data": audio()}, {"multi_modal_data": audio(), "decoder_prompt": 5}], sp)
    assert not engine.has_unfinished_requests()


def test_parse_prompt_passes_the_call_kwargs():
    p = parse_prompt({"encoder_prompt": {"prompt": "", "multi_modal_data": audio(),
                                         "mm_processor_kwargs": {"padding_value": 0.5}},
                      "decoder_prompt": {"prompt_token_ids": [50258]}})
    assert (p.decoder, p.field, p.mm_processor_kwargs) == ([50258], "prompt.decoder_prompt.prompt_token_ids",
                                                           {"padding_value": 0.5})
