"""The worst-case formula against a sweep of real processor calls (tests/core/test_worst_case_formula.py, tests/engine/test_worst_case_image.py)."""
from __future__ import annotations

import math

import numpy as np

from refimpl.config import ModelConfig
from refimpl.multimodal import MultiModalRegistry

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
