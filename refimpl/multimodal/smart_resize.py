"""Qwen2-VL's ``smart_resize``: the resized (height, width) of an image or frame, in pixels.

A copy of transformers' ``smart_resize`` (transformers/models/qwen2_vl/image_processing_qwen2_vl.py,
also in image_processing_pil_qwen2_vl.py; vLLM's qwen2_vl.py imports it from there), kept here because
both of transformers' modules import torchvision (~5 s on the lab's 2-core VM) and the dry start-up
plan and the explorer page need only this arithmetic. tests/multimodal/test_smart_resize.py checks it
equals transformers' function.
"""
from __future__ import annotations

import math


def smart_resize(height: int, width: int, factor: int = 28, min_pixels: int = 56 * 56,
                 max_pixels: int = 14 * 14 * 4 * 1280) -> tuple[int, int]:
    """(height, width) both multiples of ``factor``, their product within [``min_pixels``,
    ``max_pixels``], the aspect ratio kept as closely as possible. Raises ValueError for an aspect
    ratio over 200 (transformers' message)."""
    if max(height, width) / min(height, width) > 200:
        raise ValueError(
            f"absolute aspect ratio must be smaller than 200, got {max(height, width) / min(height, width)}")
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar
