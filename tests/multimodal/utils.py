"""Shared set-ups of the multimodal room's tests, each used by a small-case test and its real-size
or property twin:

- the processing cache's image pool and its uncached reference outputs (test_cache_properties.py,
  test_cache_machine.py);
- two images, their uncached outputs and a processor with a fresh cache per example
  (test_cache_aliasing_example.py, test_cache_aliasing.py);
- images of every PIL mode (palette ones included) and their cache key and processor output
  (test_cache_key_palette.py, test_cache_key_content.py);
- a small-pixel Qwen2.5-VL model config (test_dummy_data.py, test_dummy_data_full_size.py);
- the worst-case formula against a sweep of real processor calls (test_worst_case_formula.py,
  test_worst_case_image.py);
- two processor outputs compared field by field, tensors by value or by shape (test_multimodal_processing.py,
  test_shape_only.py).
"""
from __future__ import annotations

import math

import numpy as np
import torch
from PIL import Image

from refimpl.config import ModelConfig
from refimpl.errors import InvalidInputError
from refimpl.multimodal import MultiModalRegistry
from refimpl.multimodal.inputs import parse_mm_data

# The processing cache's image pool (cache_pool.py until the move).
QWEN_SMALL = dict(max_model_len=4096, device="cpu", limit_mm_per_prompt={"image": 1, "video": 0})


IMG_SIZES = [(56, 56), (84, 56), (56, 112), (112, 84)]  # 75 kB .. 226 kB of pixel_values each


def _images():
    rng = np.random.default_rng(4)
    return [Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)) for w, h in IMG_SIZES]


_REF: dict = {}


def reference_outputs():
    """Uncached HF outputs of the pool images (computed once per process)."""
    if not _REF:
        mc = ModelConfig("qwen2.5-vl-3b", **QWEN_SMALL)
        proc = MultiModalRegistry().create_processor(mc, disable_cache=True)
        _REF["images"] = _images()
        _REF["outs"] = [proc.apply("<|image_pad|>", {"image": im}) for im in _REF["images"]]
    return _REF["images"], _REF["outs"]


def _same_output(a, b):
    assert a.prompt_token_ids == b.prompt_token_ids
    assert a.mm_placeholders == b.mm_placeholders
    for m in b.mm_kwargs:
        for x, y in zip(a.mm_kwargs[m], b.mm_kwargs[m], strict=True):
            assert x.keys() == y.keys()
            for k in y:
                assert x[k].dtype == y[k].dtype and torch.equal(x[k], y[k]), k


def _val(nbytes: int, tag: int) -> dict:
    """A synthetic item of exactly ``nbytes + 8`` bytes carrying ``tag``."""
    return {"x": torch.full((nbytes,), tag % 251, dtype=torch.uint8), "tag": torch.tensor(tag)}


# Aliasing: two images and a processor with a fresh cache per example (aliasing_setup.py).
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


# Palette images: every PIL mode, its cache key and output (palette_images.py).
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


# A small-pixel Qwen2.5-VL config (qwen_small.py).
# Cheap videos. The worst-case image is not the 224x224 square (64 tokens) but a 3200 x 16
# strip: smart_resize clamps its short side to 28 and keeps 113 cells on the long side.
SMALL_PIXELS = {"max_pixels": 28 * 28 * 64}


def qwen(max_model_len, small=False, **kw):
    mc = ModelConfig("qwen2.5-vl-3b", max_model_len=max_model_len, device="cpu", **kw)
    if small:
        mc.mm_processor_kwargs = dict(SMALL_PIXELS)  # vLLM's ModelConfig.mm_processor_kwargs
    return mc


# The worst-case sweep (worst_case_sweep.py).
F = 28


def _info(min_pixels, max_pixels, **kw):
    mc = ModelConfig("qwen2.5-vl-3b", device="cpu", max_model_len=kw.pop("max_model_len", 32768),
                     mm_processor_kwargs={"min_pixels": min_pixels, "max_pixels": max_pixels}, **kw)
    reg = MultiModalRegistry()
    return mc, reg, reg.create_processor(mc).info


def _sweep(mn, mx):
    """Input (h, w) sizes: every ratio p/q with p, q <= 24 and ratios 1..200 at 24 scales,
    plus thin inputs (h <= 30) at every 13th width; the callers try both orientations."""
    ratios = {p / q for p in range(1, 25) for q in range(1, 25)} | {float(r) for r in range(1, 201)}
    scales = np.geomspace(1, 3 * math.sqrt(max(mx, mn)), 24)
    for r in ratios:
        for s in scales:
            h, w = max(1, round(s)), max(1, round(s * r))
            if max(h, w) <= 200 * min(h, w):
                yield h, w
    for h in range(1, 31):
        for w in range(h, 200 * h + 1, 13):
            yield h, w


def assert_same_inputs(a, b, *, values: bool = True) -> None:
    """Two processor outputs (MultiModalInputs) the same: prompt ids, placeholders, the kwargs' keys and
    items; each tensor equal in value and dtype (``values``), else in shape and dtype with the grids
    (``*grid*``, ``second_per_grid_ts``) equal in value (a shape-only output's pixels are not real). With
    ``values`` the items' hashes too."""
    assert a.prompt_token_ids == b.prompt_token_ids
    assert a.encoder_prompt_token_ids == b.encoder_prompt_token_ids
    assert a.mm_placeholders == b.mm_placeholders
    if values:
        assert a.mm_hashes == b.mm_hashes
    assert a.mm_kwargs.keys() == b.mm_kwargs.keys()
    for m in a.mm_kwargs:
        assert len(a.mm_kwargs[m]) == len(b.mm_kwargs[m])
        for x, y in zip(a.mm_kwargs[m], b.mm_kwargs[m]):
            assert x.keys() == y.keys()
            for k in x:
                assert (tuple(x[k].shape), x[k].dtype) == (tuple(y[k].shape), y[k].dtype), (m, k)
                if values or "grid" in k or k == "second_per_grid_ts":
                    assert torch.equal(x[k], y[k]), (m, k)
