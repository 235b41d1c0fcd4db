"""One item or several, decided per modality in one place (issue 46, kind 3; vLLM's
``_parse_video_data``): ``refimpl.multimodal.inputs.split_items``.

Property over the kind: T frames of H x W given as a list of PIL images, a list / tuple of
(H, W, 3) arrays or tensors, or one (T, H, W, 3) array or tensor are ONE video, with the same
grid, placeholder tokens, pixel values and cache key; N images given as a list or as an
(N, H, W, 3) array / tensor are N images, with the same outputs; N videos as a list of 4-D arrays
or a 5-D array are N videos. Counts above ``limit_mm_per_prompt`` are refused by the same rule.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from refimpl.config import ModelConfig
from refimpl.errors import InvalidInputError, TooManyItemsError
from refimpl.multimodal.inputs import split_items
from refimpl.multimodal.registry import MultiModalRegistry

VIDEO_FORMS = ("pil-list", "array-list", "tensor-list", "array-tuple", "array", "tensor")
IMAGE_FORMS = ("pil-list", "array-list", "array", "tensor")


@pytest.fixture(scope="module")
def proc():
    mc = ModelConfig("qwen2.5-vl-3b", max_model_len=4096, device="cpu",
                     limit_mm_per_prompt={"image": 3, "video": 2})
    mc.mm_processor_kwargs = {"max_pixels": 64 * 28 * 28}
    return MultiModalRegistry().create_processor(mc, disable_cache=True)


def as_form(stack: np.ndarray, form: str):
    """The (T, H, W, 3) uint8 ``stack`` in one of the listed or stacked forms."""
    if form == "pil-list":
        return [Image.fromarray(f) for f in stack]
    if form == "array-list":
        return [f.copy() for f in stack]
    if form == "tensor-list":
        return [torch.from_numpy(f.copy()) for f in stack]
    if form == "array-tuple":
        return tuple(f.copy() for f in stack)
    return torch.from_numpy(stack.copy()) if form == "tensor" else stack.copy()


def summary(out, modality):
    grid = "video_grid_thw" if modality == "video" else "image_grid_thw"
    pix = "pixel_values_videos" if modality == "video" else "pixel_values"
    return ([d[grid].tolist() for d in out.mm_kwargs[modality]], [p.length for p in out.mm_placeholders[modality]],
            [d[pix] for d in out.mm_kwargs[modality]], out.mm_hashes[modality], out.prompt_token_ids)


def frames(draw, t):
    h, w = draw(st.sampled_from([28, 56, 84])), draw(st.sampled_from([28, 56]))
    seed = draw(st.integers(0, 2**16))
    return np.random.default_rng(seed).integers(0, 256, (t, h, w, 3), dtype=np.uint8)


@settings(max_examples=25, deadline=None)
@given(st.data())
def test_a_list_of_frames_is_one_video_as_the_stacked_array(proc, data):
    stack = frames(data.draw, data.draw(st.integers(1, 5), label="frames"))
    forms = data.draw(st.lists(st.sampled_from(VIDEO_FORMS), min_size=2, max_size=3, unique=True), label="forms")
    outs = [summary(proc.apply("<|video_pad|>", {"video": as_form(stack, f)}, return_mm_hashes=True), "video")
            for f in forms]
    for f, o in zip(forms[1:], outs[1:]):
        assert o[0] == outs[0][0] and o[1] == outs[0][1] and o[3] == outs[0][3] and o[4] == outs[0][4], f
        assert all(torch.equal(a, b) for a, b in zip(o[2], outs[0][2])), f
    assert len(outs[0][0]) == 1  # one video


@settings(max_examples=20, deadline=None)
@given(st.data())
def test_a_4d_array_is_several_images_as_the_list(proc, data):
    n = data.draw(st.integers(1, 3), label="images")
    stack = frames(data.draw, n)
    forms = data.draw(st.lists(st.sampled_from(IMAGE_FORMS), min_size=2, max_size=3, unique=True), label="forms")
    outs = [summary(proc.apply("<|image_pad|>" * n, {"image": as_form(stack, f)}, return_mm_hashes=True), "image")
            for f in forms]
    for f, o in zip(forms[1:], outs[1:]):
        assert o[0] == outs[0][0] and o[1] == outs[0][1] and o[3] == outs[0][3] and o[4] == outs[0][4], f
        assert all(torch.equal(a, b) for a, b in zip(o[2], outs[0][2])), f
    assert len(outs[0][0]) == n


def test_several_videos_as_a_list_of_stacks_or_a_5d_array(proc):
    a = np.random.default_rng(1).integers(0, 256, (2, 2, 56, 56, 3), dtype=np.uint8)
    listed = proc.apply("<|video_pad|>" * 2, {"video": [a[0], [Image.fromarray(f) for f in a[1]]]})
    stacked = proc.apply("<|video_pad|>" * 2, {"video": a})
    assert [d["video_grid_thw"].tolist() for d in listed.mm_kwargs["video"]] == \
        [d["video_grid_thw"].tolist() for d in stacked.mm_kwargs["video"]] == [[1, 4, 4]] * 2


def test_the_issues_input_and_the_limits(proc):
    # the issue: 4 frames of 56 x 56 as a list of PIL images / arrays was "4 video items (limit: 1)"
    stack = np.zeros((4, 56, 56, 3), np.uint8)
    for form in VIDEO_FORMS:
        out = proc.apply("<|video_pad|>", {"video": as_form(stack, form)})
        assert out.mm_kwargs["video"][0]["video_grid_thw"].tolist() == [2, 4, 4], form
    with pytest.raises(TooManyItemsError) as e:  # 3 videos, limit 2
        proc.apply("<|video_pad|>" * 3, {"video": np.zeros((3, 2, 56, 56, 3), np.uint8)})
    assert (e.value.field, e.value.limit) == ("mm_data[video]", 2)
    with pytest.raises(TooManyItemsError) as e:  # 4 images as one 4-D array, limit 3
        proc.apply("<|image_pad|>" * 4, {"image": np.zeros((4, 56, 56, 3), np.uint8)})
    assert (e.value.field, e.value.limit) == ("mm_data[image]", 3)
    with pytest.raises(InvalidInputError) as e:  # frames of two sizes
        proc.apply("<|video_pad|>", {"video": [np.zeros((56, 56, 3), np.uint8), np.zeros((28, 56, 3), np.uint8)]})
    assert (e.value.field, e.value.limit) == ("video", "frames of one size")


@pytest.mark.parametrize("modality, data, n", [
    ("image", np.zeros((2, 4, 4, 3), np.uint8), 2), ("image", np.zeros((4, 4, 3), np.uint8), 1),
    ("image", [b"x", b"y"], 2), ("image", b"x", 1),
    ("video", np.zeros((2, 4, 4, 3)), 1), ("video", np.zeros((3, 2, 4, 4, 3)), 3),
    ("video", [np.zeros((4, 4, 3))] * 5, 1), ("video", [np.zeros((2, 4, 4, 3))] * 2, 2), ("video", [], 0),
    ("audio", np.zeros(10, np.float32), 1), ("audio", (np.zeros(10, np.float32), 16000), 1),
    ("audio", [np.zeros(10, np.float32)] * 2, 2), ("audio", [0.0, 1.0], 1), ("audio", np.zeros((2, 10)), 1),
])
def test_split_items_rule_per_modality(modality, data, n):
    assert len(split_items(modality, data)) == n
