"""The processing cache tests' image pool and its uncached reference outputs (tests/core/test_cache_properties.py, tests/engine/test_cache_machine.py)."""
from __future__ import annotations

import numpy as np
import torch
from PIL import Image

from refimpl.config import ModelConfig
from refimpl.multimodal import MultiModalRegistry

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
