"""refimpl's bad-input table as data, run against a validator of one's own."""
import sys
from typing import Optional

from refimpl.testing import BAD_INPUT_CASES, is_refusal


def my_sampling_params(max_tokens: int = 16, temperature: float = 1.0, seed: Optional[int] = None) -> dict:
    """vLLM-style: plain ValueError, no field or limit attributes."""
    if type(max_tokens) is not int or max_tokens < 1:
        raise ValueError(f"max_tokens must be an int >= 1, got {max_tokens!r}")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if not abs(temperature) <= sys.float_info.max:  # inf, nan, an int beyond float range
        raise ValueError("temperature must be finite")
    if seed is not None and not -(2**63) <= seed < 2**63:
        raise ValueError(f"seed must fit in int64, got {seed}")
    return dict(max_tokens=max_tokens, temperature=temperature, seed=None if seed == -1 else seed)


def test_my_validator_refuses_what_refimpl_refuses():
    cases = [c for c in BAD_INPUT_CASES if c.input.entry == "sampling"]
    assert cases
    for case in cases:
        try:
            my_sampling_params(**case.input.kwargs)
            exc = None
        except Exception as e:  # judged by the case
            exc = e
        assert case.mismatches(exc) == [], case.id
        assert exc is None or is_refusal(exc)
