"""Palette images with the same indices and different palettes get different cache keys (the same-key-same-output properties are in tests/engine/test_cache_key_content.py)."""
from __future__ import annotations

import numpy as np
import torch
from PIL import Image

from refimpl.config import ModelConfig
from refimpl.errors import InvalidInputError
from refimpl.multimodal import MultiModalRegistry
from refimpl.multimodal.inputs import parse_mm_data

_PROC = {}


def _processor():
    if not _PROC:
        mc = ModelConfig("qwen2.5-vl-3b", max_model_len=4096, device="cpu",
                         limit_mm_per_prompt={"image": 1, "video": 1})
        _PROC["p"] = MultiModalRegistry().create_processor(mc, disable_cache=True)
    return _PROC["p"]


def _image(mode: str, idx: np.ndarray, palette: list[int]) -> Image.Image:
    if mode in ("P", "P-RGBA", "PA"):
        im = Image.fromarray(idx, "L").convert("P") if mode != "PA" else Image.fromarray(idx, "L").convert("PA")
        rgba = mode == "P-RGBA"
        im.putpalette(palette[:64] if rgba else palette[:48], rawmode="RGBA" if rgba else "RGB")
        return im
    rgb = Image.fromarray(np.stack([idx, idx[::-1], idx.T[::-1].T], -1).astype(np.uint8), "RGB")
    return rgb.convert(mode)


def _key_and_output(modality, x):
    proc = _processor()
    try:
        item = parse_mm_data({modality: x}, {"image": 1, "video": 1})[modality][0]
        out = proc._apply_hf_processor_mm_only({modality: [item]}, {})[modality][0]
    except InvalidInputError:
        return None
    return proc._hash(modality, item, {}), out


def _equal(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_palette_images_get_different_keys():
    """The issue's input: two "P" images, same indices, different palettes."""
    idx = np.arange(16, dtype=np.uint8).reshape(4, 4)
    a, b = (_image("P", idx, pal) for pal in (list(range(48)), list(range(48))[::-1]))
    (ka, oa), (kb, ob) = _key_and_output("image", a), _key_and_output("image", b)
    assert not _equal(oa, ob) and ka != kb
