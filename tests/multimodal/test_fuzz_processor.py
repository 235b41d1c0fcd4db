"""Fuzz the processor entry point with hypothesis (issue #4, part 6): ~200 random prompts,
byte strings, arrays, PIL images and mm_data shapes through the Qwen2.5-VL and Whisper
processors; only refimpl exceptions may come out. The 10,000-case run is in tests/soak/test_soak.py."""
import pytest
from hypothesis import HealthCheck, given, settings

from tests.multimodal.fuzz_inputs import Fuzzer, fuzz_cases


@pytest.mark.slow
def test_fuzz_processor_fast():
    fuzzer = Fuzzer()

    @settings(max_examples=200, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(fuzz_cases())
    def run(case):
        fuzzer(case)
    run()
    c = fuzzer.counts
    assert c["cases"] >= 200 and c["accepted"] > 0 and c["refused"] > 0, c
    print(f"fuzz (fast): {c} errors={fuzzer.errors}")
