"""The issue's aliasing example: a caller that halves a cached tensor and pops a key does not change what a later hit returns (the property over any caller is in tests/multimodal/test_cache_aliasing.py)."""
from __future__ import annotations

from tests.multimodal.utils import _S, PROMPT, _equal, _setup


def test_issue_example_halved_tensor_and_popped_key():
    """The issue's inputs: ``mul_(0.5)`` on a returned item, then popping a key."""
    proc, cache = _setup()
    im = _S["images"][0]
    proc.apply(PROMPT, {"image": im}).mm_kwargs["image"][0]["pixel_values"].mul_(0.5)
    hit = proc.apply(PROMPT, {"image": im}).mm_kwargs["image"][0]
    assert _equal(hit, _S["ref"][0]) and cache.invalidated == 1
    hit.pop("pixel_values")
    again = proc.apply(PROMPT, {"image": im}).mm_kwargs["image"][0]
    assert _equal(again, _S["ref"][0])
    assert cache.hits >= 1, "untouched entries are still served from the cache"
