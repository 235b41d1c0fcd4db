"""Per-call processor kwargs go through the model-level checks and mapping (issue 46, kind 2;
vLLM PRs #10112, #33110): ``BaseMultiModalProcessor.for_call``.

Property over the kind: any per-call ``mm_processor_kwargs`` (known and unknown keys, values of
every kind, in and out of range) over a model-level ``max_pixels=64*28*28`` is either refused with
an InvalidInputError naming ``mm_processor_kwargs`` (or ``mm_processor_kwargs.<key>``), or gives
exactly what a processor whose model-level settings are the merged values gives (grid, tokens,
pixel values, cache key), never an item above ``max_tokens_per_item()``; the processor and its
cache keep serving.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from refimpl.config import ModelConfig
from refimpl.errors import ConfigError, InvalidInputError
from refimpl.multimodal.registry import MultiModalRegistry

MODEL_LEVEL = {"max_pixels": 64 * 28 * 28}
IMAGES = {(448, 448), (112, 56), (28, 700), (300, 200)}
KEYS = ("min_pixels", "max_pixels", "do_resize", "do_rescale", "do_normalize", "rescale_factor",
        "image_mean", "patch_size", "merge_size", "max_pixel", "size", "image_processor_type")
VALUES = st.one_of(st.integers(-5, 4_000_000), st.floats(allow_nan=True, allow_infinity=True), st.booleans(),
                   st.text(max_size=3), st.lists(st.floats(0, 1), max_size=4), st.none())
VALID = st.fixed_dictionaries({}, optional={"max_pixels": st.integers(784, 2 * 64 * 28 * 28),
                                            "min_pixels": st.integers(784, 12_544),
                                            "do_resize": st.booleans(),
                                            "image_mean": st.lists(st.floats(0.1, 0.9), min_size=3, max_size=3)})


def qwen(kw, cache=True):
    mc = ModelConfig("qwen2.5-vl-3b", max_model_len=4096, device="cpu", mm_processor_kwargs=dict(kw))
    return MultiModalRegistry().create_processor(mc, disable_cache=not cache)


@pytest.fixture(scope="module")
def proc():
    return qwen(MODEL_LEVEL)


def image(w, h):
    return Image.fromarray(np.random.default_rng(w * h).integers(0, 256, (h, w, 3), dtype=np.uint8))


@settings(max_examples=40, deadline=None)
@given(size=st.sampled_from(sorted(IMAGES)),
       kw=st.one_of(VALID, st.dictionaries(st.sampled_from(KEYS), VALUES, min_size=1, max_size=2)))
def test_per_call_kwargs_are_model_level_kwargs_merged_or_refused_by_name(proc, size, kw):
    img = image(*size)
    try:
        out = proc.apply("<|image_pad|>", {"image": img}, kw, return_mm_hashes=True)
    except InvalidInputError as e:
        assert e.field == "mm_processor_kwargs" or e.field.startswith("mm_processor_kwargs."), e
        assert e.field == "mm_processor_kwargs" or e.field.removeprefix("mm_processor_kwargs.") in KEYS, e
        return
    merged = MODEL_LEVEL | kw
    ref = qwen(merged, cache=False).apply("<|image_pad|>", {"image": img}, return_mm_hashes=True)
    a, b = out.mm_kwargs["image"][0], ref.mm_kwargs["image"][0]
    assert a["image_grid_thw"].tolist() == b["image_grid_thw"].tolist()
    assert torch.equal(a["pixel_values"], b["pixel_values"])
    assert out.prompt_token_ids == ref.prompt_token_ids
    assert out.mm_hashes == ref.mm_hashes  # the cache is keyed by the merged values
    assert out.mm_placeholders["image"][0].length <= proc.max_tokens_per_item()["image"]


def test_the_issues_inputs(proc):
    img = image(448, 448)
    assert proc.max_tokens_per_item()["image"] == 113
    base = proc.apply("<|image_pad|>", {"image": img}, return_mm_hashes=True)
    small = proc.apply("<|image_pad|>", {"image": img}, {"max_pixels": 16 * 28 * 28}, return_mm_hashes=True)
    assert (base.mm_placeholders["image"][0].length, small.mm_placeholders["image"][0].length) == (64, 16)
    assert base.mm_hashes != small.mm_hashes
    again = proc.apply("<|image_pad|>", {"image": img}, {"max_pixels": 16 * 28 * 28})
    assert torch.equal(again.mm_kwargs["image"][0]["pixel_values"], small.mm_kwargs["image"][0]["pixel_values"])
    for kw, field, limit in [({"max_pixels": -5}, "mm_processor_kwargs.max_pixels", "> 0 (an int)"),
                             ({"max_pixel": 12544}, "mm_processor_kwargs",
                              "keys of qwen2.5-vl-3b's preprocessor_config.json"),
                             ({"do_resize": False}, "mm_processor_kwargs", "113 tokens per image (max_tokens_per_item)"),
                             ({"do_resize": "no"}, "mm_processor_kwargs.do_resize", "a bool"),
                             ({"patch_size": 7}, "mm_processor_kwargs.patch_size", "14 (the model's own)"),
                             ({"min_pixels": 60000}, "mm_processor_kwargs.min_pixels", "<= max_pixels (50176)")]:
        with pytest.raises(InvalidInputError) as e:
            proc.apply("<|image_pad|>", {"image": img}, kw)
        assert (e.value.field, e.value.limit) == (field, limit), kw
    with pytest.raises(InvalidInputError) as e:
        proc.apply("<|image_pad|>", {"image": img}, [("max_pixels", 1)])
    assert e.value.field == "mm_processor_kwargs"
    after = proc.apply("<|image_pad|>", {"image": img}, return_mm_hashes=True)  # still serving, same key
    assert after.mm_hashes == base.mm_hashes


def test_model_level_settings_get_the_same_rules():
    with pytest.raises(ConfigError) as e:
        ModelConfig("qwen2.5-vl-3b", device="cpu", mm_processor_kwargs={"do_resize": "no"})
    assert e.value.field == "do_resize"
    with pytest.raises(ConfigError) as e:
        ModelConfig("whisper-tiny", device="cpu", mm_processor_kwargs={"feature_size": 128})
    assert (e.value.field, e.value.limit) == ("feature_size", "80 (the model's own)")
