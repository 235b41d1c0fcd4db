"""Fuzz the processor entry point with hypothesis (issue #4, part 6): ~200 random prompts,
byte strings, arrays, PIL images and mm_data shapes through the Qwen2.5-VL and Whisper
processors; only refimpl exceptions may come out. The 10,000-case run is in tests/test_soak.py."""
from hypothesis import HealthCheck, given, settings

from fuzz_inputs import Fuzzer, fuzz_cases

FUZZER = None


def _fuzzer():
    global FUZZER
    if FUZZER is None:
        FUZZER = Fuzzer()
    return FUZZER


@settings(max_examples=200, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(fuzz_cases())
def test_fuzz_processor_fast(case):
    _fuzzer()(case)


def test_fuzz_processor_fast_ran():
    f = _fuzzer()
    assert f.counts["cases"] >= 200 and f.counts["accepted"] > 0 and f.counts["refused"] > 0, f.counts
    print(f"fuzz (fast): {f.counts} errors={f.errors}")
