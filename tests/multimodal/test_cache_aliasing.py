"""Issue 8, kind 3: a processing-cache hit equals fresh processing whatever callers did to
the results they were handed earlier (on a miss or on a hit).

Hypothesis draws a sequence of caller actions on returned items -- in-place tensor ops
(directly, through a view, through ``detach()``), popping, replacing or adding keys,
clearing the item dict -- interleaved with identical requests; every request's output must
equal the uncached HF output. Small images through the real Qwen2.5-VL processor.
"""
from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.multimodal.utils import _S, PROMPT, _equal, _setup

ACTIONS = ["mul_", "view_zero_", "detach_add_", "copy_", "pop", "replace", "add_key", "clear", "none"]


def _act(item: dict, action: str) -> None:
    pv = item.get("pixel_values")
    if action == "mul_" and pv is not None:
        pv.mul_(0.5)
    elif action == "view_zero_" and pv is not None:
        pv[0].zero_()
    elif action == "detach_add_" and pv is not None:
        pv.detach().add_(1.0)
    elif action == "copy_" and "image_grid_thw" in item:
        item["image_grid_thw"].copy_(torch.tensor([1, 2, 2]))
    elif action == "pop":
        item.pop("pixel_values", None)
    elif action == "replace":
        item["image_grid_thw"] = torch.zeros(1, 3, dtype=torch.int64)
    elif action == "add_key":
        item["extra"] = torch.ones(3)
    elif action == "clear":
        item.clear()




@settings(max_examples=15, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@pytest.mark.slow
@given(st.lists(st.tuples(st.integers(0, 1), st.sampled_from(ACTIONS)), min_size=1, max_size=4))
def test_hit_equals_fresh_whatever_callers_did(steps):
    proc, cache = _setup()
    for i, action in steps:
        item = proc.apply(PROMPT, {"image": _S["images"][i]}).mm_kwargs["image"][0]
        assert _equal(item, _S["ref"][i])
        _act(item, action)
    for i in (0, 1):  # and once more after the last action
        assert _equal(proc.apply(PROMPT, {"image": _S["images"][i]}).mm_kwargs["image"][0], _S["ref"][i])
