"""check_stop's order (issue 46, kind 5): the last token's EOS / stop id before the length caps
(vLLM >= 0.11.1, PR #26317, the default row), the caps first behind ``stop_check="caps-first"``
(the release rows 0.8.5 to 0.11.0, read from their wheels' ``vllm/v1/core/sched/utils.py``).

A hypothesis property over the whole kind: any output sequence, any position of EOS / a stop id
(before, at and after the cap), any ``max_tokens`` and ``max_model_len`` cap, ``ignore_eos`` on
or off, run through the real Scheduler with FakeModelRunner, against a reference of each order.
"""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refimpl.config import SchedulerConfig
from refimpl.errors import ConfigError
from refimpl.testing import FakeModelRunner, create_requests, create_scheduler, run_to_completion
from refimpl.variants import STARTUP_VARIANTS

EOS, STOP, OTHER = 50257, 50256, 1000  # whisper-tiny's EOS; a stop id; a plain token
PROMPT = 4  # create_requests' Whisper decoder prompt


def reference(tokens, max_tokens, max_model_len, ignore_eos, stop_ids, order):
    """(finish_reason, output) of the scripted ``tokens`` under ``order``."""
    out = []
    for tok in tokens:
        out.append(tok)
        capped = len(out) >= max_tokens or PROMPT + len(out) >= max_model_len
        stopped = (not ignore_eos and tok == EOS) or tok in stop_ids
        if order == "caps-first" and capped:
            return "length", out
        if stopped:
            return "stop", out
        if capped:
            return "length", out
    raise AssertionError("script too short")


def run(tokens, max_tokens, max_model_len, ignore_eos, stop_ids, order):
    sched = create_scheduler(max_model_len=max_model_len)
    sched.vllm_config.scheduler_config.stop_check = order
    (req,) = create_requests(1, max_tokens=max_tokens, ignore_eos=ignore_eos, stop_token_ids=stop_ids)
    sched.add_request(req)
    out = run_to_completion(sched, FakeModelRunner(cross_blocks=94, token_fn=lambda rid, n: tokens[n - PROMPT]))
    return out["req0"].finish_reason, out["req0"].output_token_ids


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(tokens=st.lists(st.sampled_from([EOS, STOP, OTHER]), min_size=12, max_size=12),
       max_tokens=st.integers(1, 10), cap_by_len=st.booleans(), ignore_eos=st.booleans(),
       use_stop=st.booleans(), order=st.sampled_from(["stop-first", "caps-first"]))
def test_any_stop_at_any_position_against_the_order(tokens, max_tokens, cap_by_len, ignore_eos, use_stop, order):
    # admission keeps prompt + max_tokens <= max_model_len, so max_model_len binds where max_tokens does
    max_model_len = PROMPT + max_tokens if cap_by_len else 448
    stop_ids = [STOP] if use_stop else []
    want = reference(tokens, max_tokens, max_model_len, ignore_eos, stop_ids, order)
    assert run(tokens, max_tokens, max_model_len, ignore_eos, stop_ids, order) == (want[0], want[1])


@pytest.mark.parametrize("order, reason", [("stop-first", "stop"), ("caps-first", "length")])
def test_the_issues_input_eos_as_the_last_allowed_token(order, reason):
    # EOS as the 3rd output of max_tokens=3; as the 2nd it is "stop" under both orders
    assert run([OTHER, OTHER, EOS] + [OTHER] * 9, 3, 448, False, [], order) == (reason, [OTHER, OTHER, EOS])
    assert run([OTHER, EOS] + [OTHER] * 10, 3, 448, False, [], order) == ("stop", [OTHER, EOS])


def test_default_is_stop_first_and_release_rows_keep_their_order():
    assert SchedulerConfig().stop_check == "stop-first"
    assert create_scheduler().vllm_config.scheduler_config.stop_check == "stop-first"
    caps_first = {"0.8.5", "0.9.0", "0.9.2", "0.10.2", "0.11.0"}
    for name, row in STARTUP_VARIANTS.items():
        if row.release:
            assert row.stop_check == ("caps-first" if row.release in caps_first else "stop-first"), name
    assert STARTUP_VARIANTS["refimpl"].stop_check == "stop-first"
    with pytest.raises(ConfigError) as e:
        SchedulerConfig(stop_check="length-first")
    assert e.value.field == "stop_check"
