"""Issue 8, kind 2: the processing-cache key covers everything the processed output depends on.

Property (hypothesis): for two items a, b of one modality, ``key(a) == key(b)`` implies equal
processed tensors (equivalently: different output implies different key). Pairs are built
as an item and a mutation of it, so both sides of the property are exercised: mutations that
keep the output (a copy, a non-contiguous view of the same array, EXIF orientation, which
the HF processor does not apply to PIL inputs) and mutations that change it (palette,
palette alpha, one pixel, the mode, the transparency key, dtype of a video). Keys come from
the processor's own ``_hash`` on the parsed item, outputs from its uncached HF path (tiny
images and videos: the real Qwen2.5-VL processors upscale them to 56 x 56).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from tests.multimodal.utils import _equal, _image, _key_and_output

MODES = ["P", "P-RGBA", "PA", "L", "LA", "RGB", "RGBA", "1", "I", "F", "CMYK"]






@st.composite
def image_pairs(draw):
    h, w = draw(st.integers(2, 8)), draw(st.integers(2, 8))
    idx = draw(st.lists(st.integers(0, 15), min_size=h * w, max_size=h * w))
    idx = np.array(idx, dtype=np.uint8).reshape(h, w)
    pal = draw(st.lists(st.integers(0, 255), min_size=16 * 4, max_size=16 * 4))
    op = draw(st.sampled_from(["copy", "palette", "palette", "palette-alpha", "pixel", "mode",
                               "transparency", "exif", "array", "array-view"]))
    mode = draw(st.sampled_from(["P", "P-RGBA"] if op.startswith("palette") else MODES))
    a = _image(mode, idx, pal)
    if op == "copy":
        b = a.copy()
    elif op in ("palette", "palette-alpha"):
        pal2 = list(pal)  # change an entry that a pixel uses
        used = int(idx[draw(st.integers(0, h - 1)), draw(st.integers(0, w - 1))])
        if op == "palette-alpha":
            k = used * 4 + 3
        else:
            k = used * (4 if mode == "P-RGBA" else 3) + draw(st.integers(0, 2))
        pal2[k] = (pal2[k] + draw(st.integers(1, 255))) % 256
        b = _image(mode, idx, pal2)
    elif op == "pixel":
        idx2 = idx.copy()
        idx2[draw(st.integers(0, h - 1)), draw(st.integers(0, w - 1))] ^= draw(st.integers(1, 15))
        b = _image(mode, idx2, pal)
    elif op == "mode":
        b = a.convert(draw(st.sampled_from(["RGB", "RGBA", "L", "P"])))
    elif op == "transparency":
        b = a.copy()
        b.info["transparency"] = draw(st.integers(0, 15)) if mode in ("P", "L") else (0, 0, 0)
    elif op == "exif":
        b = a.copy()
        exif = Image.Exif()
        exif[0x0112] = draw(st.integers(2, 8))  # Orientation
        b.info["exif"] = exif.tobytes()
    else:  # the same pixels as a uint8 array, contiguous or a strided view
        arr = np.asarray(a.convert("RGB"))
        if op == "array-view":
            big = np.zeros((h, 2 * w, 3), dtype=np.uint8)
            big[:, ::2] = arr
            arr = big[:, ::2]
        a, b = np.ascontiguousarray(arr), arr
    return "image", a, b


@st.composite
def video_pairs(draw):
    t, h, w = draw(st.sampled_from([1, 2])), draw(st.integers(4, 6)), draw(st.integers(4, 6))
    a = np.array(draw(st.lists(st.integers(0, 255), min_size=t * h * w * 3, max_size=t * h * w * 3)),
                 dtype=np.uint8).reshape(t, h, w, 3)
    op = draw(st.sampled_from(["copy", "view", "dtype", "pixel"]))
    if op == "copy":
        b = a.copy()
    elif op == "view":
        big = np.zeros((t, h, w, 6), dtype=np.uint8)
        big[..., ::2] = a
        b = big[..., ::2]
    elif op == "dtype":
        b = a.astype(draw(st.sampled_from([np.int64, np.float32, np.uint16])))
    else:
        b = a.copy()
        b[0, 0, 0, 0] ^= draw(st.integers(1, 255))
    return "video", a, b






def check_same_key_same_output(pairs, max_examples: int) -> dict[str, int]:
    seen = {"same_key": 0, "different_output": 0}

    @settings(max_examples=max_examples, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(pairs)
    def run(pair):
        modality, a, b = pair
        ra, rb = _key_and_output(modality, a), _key_and_output(modality, b)
        if ra is None or rb is None:
            return
        (ka, oa), (kb, ob) = ra, rb
        same_out = _equal(oa, ob)
        if ka == kb:
            seen["same_key"] += 1
            assert same_out, "equal keys, different processed output"
        if not same_out:
            seen["different_output"] += 1
            assert ka != kb
    run()
    return seen


@pytest.mark.slow
@pytest.mark.parametrize("pairs, n", [(image_pairs(), 80), (video_pairs(), 25)], ids=["image", "video"])
def test_same_key_implies_same_output(pairs, n):
    seen = check_same_key_same_output(pairs, max_examples=n)
    assert seen["same_key"] > 0 and seen["different_output"] > 0, seen


@pytest.mark.soak
@pytest.mark.parametrize("pairs, n", [(image_pairs(), 1500), (video_pairs(), 500)], ids=["image", "video"])
def test_same_key_implies_same_output_soak(pairs, n):
    seen = check_same_key_same_output(pairs, max_examples=n)
    print(f"cache key property (soak): {seen}")
    assert seen["same_key"] > 0 and seen["different_output"] > 0, seen
