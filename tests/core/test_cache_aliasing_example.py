"""The issue's aliasing example: a caller that halves a cached tensor and pops a key does not change what a later hit returns (the property over any caller is in tests/engine/test_cache_aliasing.py)."""
from __future__ import annotations

import numpy as np
import torch
from PIL import Image

from refimpl.config import ModelConfig
from refimpl.multimodal import MultiModalRegistry

PROMPT = "<|vision_start|><|image_pad|><|vision_end|>"
_S = {}


def _setup():
    if not _S:
        mc = ModelConfig("qwen2.5-vl-3b", max_model_len=4096, device="cpu",
                         limit_mm_per_prompt={"image": 1, "video": 0})
        reg = MultiModalRegistry()
        rng = np.random.default_rng(0)
        _S["images"] = [Image.fromarray(rng.integers(0, 256, (56, 28 * (i + 2), 3), dtype=np.uint8))
                        for i in range(2)]
        fresh = reg.create_processor(mc, disable_cache=True)
        _S["ref"] = [fresh.apply(PROMPT, {"image": im}).mm_kwargs["image"][0] for im in _S["images"]]
        _S["mc"] = mc
    reg = MultiModalRegistry()  # a fresh cache per example
    return reg.create_processor(_S["mc"]), reg.processing_cache


def _equal(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


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
