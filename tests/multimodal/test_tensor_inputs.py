"""Torch tensors of any dtype reach every parser through one helper (issue 29, kind 5).

``tensor_to_array`` (refimpl/multimodal/inputs.py): for audio, image and video items drawn as
tensors of bf16, fp8, float16/32/64, complex, bool and integer dtypes, with requires_grad,
non-contiguous or on the meta device, each parser either accepts the item, giving what the same
values as a float32 (audio, float video) or the same array give, or refuses it with an
InvalidInputError naming the modality; no other exception escapes.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from refimpl.errors import InvalidInputError
from refimpl.multimodal.inputs import parse_audio, parse_image, parse_video
from refimpl.testing.strategies import as_tensors, audios, image_arrays, videos

PARSERS = {"audio": (parse_audio, audios(max_seconds=0.1, with_rate=False)),
           "image": (parse_image, image_arrays().filter(lambda a: a.ndim == 2 or a.shape[2] != 1)),
           "video": (parse_video, videos(max_frames=2, max_side=30))}


def _expected(t: torch.Tensor) -> np.ndarray:
    t = t.detach()
    return (t.float() if t.dtype in (torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2) else t).numpy()


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(sorted(PARSERS)), st.data())
def test_tensor_items_accepted_as_arrays_or_refused_by_field(modality, data):
    parse, items = PARSERS[modality]
    t = data.draw(as_tensors(items), label="tensor")
    try:
        out = parse(t)
    except InvalidInputError as e:
        assert e.field == modality, e
        return
    assert t.device.type != "meta" and not t.is_complex()
    if modality == "image":
        # the same as the array itself gives (the parser normalises either: transparency over the background)
        assert t.dtype == torch.uint8 and np.array_equal(np.asarray(out), np.asarray(parse(_expected(t))))
    else:
        np.testing.assert_array_equal(out, _expected(t).astype(out.dtype))
        if modality == "audio":
            assert out.dtype == np.float32 and t.dtype.is_floating_point


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2, torch.float16])
def test_audio_of_a_float_dtype_numpy_lacks_is_taken_as_float16_is(dtype):
    clip = np.random.default_rng(0).normal(0, 0.1, 400).astype(np.float32)
    t = torch.from_numpy(clip).to(dtype).requires_grad_()
    np.testing.assert_array_equal(parse_audio(t), t.detach().float().numpy())


@pytest.mark.parametrize("modality,item", [
    ("audio", torch.zeros(400, dtype=torch.complex64)), ("audio", torch.zeros(400, dtype=torch.bool)),
    ("audio", torch.empty(400, device="meta")), ("audio", torch.zeros(400).to_sparse()),
    ("video", torch.zeros(2, 28, 28, 3, dtype=torch.bool)), ("video", torch.empty(2, 28, 28, 3, device="meta")),
    ("image", torch.zeros(28, 28, 3, dtype=torch.bfloat16)), ("image", torch.empty(28, 28, 3, device="meta"))])
def test_tensors_without_a_meaning_refused_naming_the_field(modality, item):
    with pytest.raises(InvalidInputError) as e:
        {"audio": parse_audio, "video": parse_video, "image": parse_image}[modality](item)
    assert e.value.field == modality
