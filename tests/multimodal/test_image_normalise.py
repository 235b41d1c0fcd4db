"""Images are hashed and processed as a viewer shows them (issue 29, kind 1; vLLM PRs #18569 and
the media-IO ``rgba_background_color`` option).

Properties over the eight EXIF orientations and every PIL mode the processors accept, with and
without transparency, given as PIL images and as encoded bytes: the parsed image equals the
displayed one (orientation applied, transparency composited over the configured background),
so an image stored rotated with its EXIF tag and the same image stored upright have one cache
key; an image without transparency or orientation is left as given.
"""
from __future__ import annotations

import io

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from refimpl.config import ModelConfig
from refimpl.errors import ConfigError
from refimpl.multimodal import MultiModalRegistry
from refimpl.multimodal.cache import MultiModalHasher
from refimpl.multimodal.inputs import EXIF_ORIENTATION, has_transparency, parse_image
from refimpl.testing.strategies import IMAGE_MODES, images

T = Image.Transpose
# stored = STORE[o](displayed): the inverse of what ImageOps.exif_transpose applies for tag o
STORE = {1: None, 2: T.FLIP_LEFT_RIGHT, 3: T.ROTATE_180, 4: T.FLIP_TOP_BOTTOM, 5: T.TRANSPOSE,
         6: T.ROTATE_90, 7: T.TRANSVERSE, 8: T.ROTATE_270}
PNG_MODES = ("RGB", "RGBA", "L", "LA", "P", "1", "I;16")
BACKGROUNDS = st.sampled_from([(255, 255, 255), (0, 0, 0), (12, 200, 77)])


def _stored(displayed: Image.Image, orientation: int) -> Image.Image:
    img = displayed if STORE[orientation] is None else displayed.transpose(STORE[orientation])
    img.info.update(displayed.info)
    ex = Image.Exif()
    ex[EXIF_ORIENTATION] = orientation
    img.info["exif"] = ex.tobytes()
    return img


def _png(img: Image.Image) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="PNG", exif=img.info.get("exif", b""))
    return buf.getvalue()


def _viewer(img: Image.Image, bg) -> np.ndarray:
    """What a viewer shows (displayed image given upright): RGB over ``bg`` where transparent."""
    if not has_transparency(img):
        return np.asarray(img.convert("RGB"))
    rgba = np.asarray(img.convert("RGBA")).astype(np.float64)
    a = rgba[..., 3:] / 255
    return rgba[..., :3] * a + np.array(bg) * (1 - a)


def _key(img: Image.Image) -> str:
    return MultiModalHasher.hash_kwargs(model_id="m", image=img)


@settings(max_examples=150, deadline=None)
@given(images(modes=[m for m in IMAGE_MODES], max_side=24), st.sampled_from(sorted(STORE)), BACKGROUNDS,
       st.booleans())
def test_parsed_image_is_what_a_viewer_shows(displayed, orientation, bg, as_bytes):
    if as_bytes and displayed.mode not in PNG_MODES:
        displayed = displayed.convert("RGBA" if has_transparency(displayed) else "RGB")
    stored = _stored(displayed, orientation)
    parsed = parse_image(_png(stored) if as_bytes else stored, bg)
    upright = parse_image(_png(displayed) if as_bytes else displayed, bg)
    assert parsed.size == displayed.size
    got = np.asarray(parsed.convert("RGB")).astype(np.float64)
    np.testing.assert_allclose(got, _viewer(displayed if not as_bytes else Image.open(io.BytesIO(_png(displayed))), bg),
                               atol=1.01)  # PIL's paste rounds the blend
    assert _key(parsed) == _key(upright)  # one cache key for one displayed image
    if not has_transparency(displayed) and orientation == 1 and not as_bytes:
        assert parsed is stored  # nothing to normalise: the caller's image, not a copy


@given(images(modes=["RGBA", "LA", "PA", "P", "L", "RGB"], max_side=16), BACKGROUNDS)
@settings(max_examples=60, deadline=None)
def test_transparent_pixels_take_the_background(img, bg):
    rgba = np.asarray(img.convert("RGBA"))
    out = np.asarray(parse_image(img, bg).convert("RGB"))
    clear = rgba[..., 3] == 0
    assert (out[clear] == np.array(bg, np.uint8)).all()


def test_issue_example_exif_6_jpeg_bytes_processed_as_displayed():
    """Qwen2.5-VL, max_pixels 64*28*28: a JPEG stored sideways with Orientation 6 gives the
    displayed image's grid (before: the sensor's [1, 10, 22])."""
    reg = MultiModalRegistry()
    p = reg.create_processor(ModelConfig("qwen2.5-vl-3b", mm_processor_kwargs={"max_pixels": 64 * 28 * 28}))
    img = Image.fromarray(np.random.default_rng(0).integers(0, 256, (224, 448, 3), dtype=np.uint8))
    ex = Image.Exif()
    ex[EXIF_ORIENTATION] = 6
    buf = io.BytesIO()
    img.save(buf, format="JPEG", exif=ex.tobytes())
    out = p.apply("<|vision_start|><|image_pad|><|vision_end|>", {"image": buf.getvalue()})
    assert out.mm_kwargs["image"][0]["image_grid_thw"].tolist() == [1, 22, 10]


def test_background_is_a_setting_in_the_cache_key():
    la = Image.new("LA", (56, 56), (0, 0))
    keys = set()
    for bg in [(255, 255, 255), (0, 0, 0)]:
        reg = MultiModalRegistry()
        p = reg.create_processor(ModelConfig("qwen2.5-vl-3b", mm_processor_kwargs={"max_pixels": 64 * 28 * 28},
                                             rgba_background_color=bg))
        keys.add(p.apply("<|vision_start|><|image_pad|><|vision_end|>", {"image": la},
                         return_mm_hashes=True).mm_hashes["image"][0])
    assert len(keys) == 2


@pytest.mark.parametrize("bad", [(256, 0, 0), (1, 2), "white", (1.0, 2, 3), (-1, 0, 0)])
def test_background_refused_naming_the_setting(bad):
    with pytest.raises(ConfigError) as e:
        ModelConfig("qwen2.5-vl-3b", rgba_background_color=bad)
    assert e.value.field == "rgba_background_color"
