"""The worst case per start-up row without processing: the largest image (``worst_case_image_size``)
and, as reads of a dry MultiModalBudget (refimpl/multimodal/encoder_budget.py), max tokens per item,
the lookups' dummy items and the profile dummy.

No HF pass, no dummy array: the size functions the dummy builders use (tests/engine/test_release_rows.py
checks them against real start-ups). Mirrors the worst-case image of ``vllm/multimodal/profiling.py``
and the Qwen2-VL processing info. Left out: tensor-parallel workers (each repeats the runner's steps).
"""
from __future__ import annotations

import math
from dataclasses import replace
from functools import lru_cache
from typing import TYPE_CHECKING, Optional

from refimpl.multimodal.smart_resize import smart_resize
from refimpl.variants import StartupVariant, WorstCaseImage, get_startup_variant

if TYPE_CHECKING:
    from refimpl.multimodal.encoder_budget import MultiModalBudget, ProfileDummy


def _row(variant: str | StartupVariant, worst_case: Optional[WorstCaseImage] = None) -> StartupVariant:
    v = get_startup_variant(variant) if isinstance(variant, str) else variant
    return v if worst_case is None else replace(v, mm=replace(v.mm, worst_case_image=worst_case))


def _budget(model_config, variant, worst_case=None, scheduler_config=None) -> MultiModalBudget:
    from refimpl.config import SchedulerConfig
    from refimpl.multimodal.encoder_budget import MultiModalBudget
    return MultiModalBudget(model_config, scheduler_config or SchedulerConfig(), None, _row(variant, worst_case),
                            dry=True)


def max_tokens_per_item(model_config, variant: str | StartupVariant = "refimpl", *,
                        worst_case: Optional[WorstCaseImage] = None, mm_registry=None) -> dict[str, int]:
    """Max placeholder tokens of one item per enabled modality under ``variant`` (``worst_case``
    overrides its image rule): a dry MultiModalBudget's ``mm_max_toks_per_item``; {} without
    multimodal inputs. ``mm_registry`` is not read (kept for callers)."""
    return dict(_budget(model_config, variant, worst_case).mm_max_toks_per_item)


def profile_dummy(model_config, scheduler_config, variant: str | StartupVariant = "refimpl", *,
                  worst_case: Optional[WorstCaseImage] = None, mm_registry=None) -> Optional[ProfileDummy]:
    """The dummy item ``variant``'s profile run encodes (None: no enabled modality): a dry
    MultiModalBudget's ``profile_item``."""
    return _budget(model_config, variant, worst_case, scheduler_config).profile_item


def lookup_specs(model_config, variant: str | StartupVariant = "refimpl", mm_registry=None) -> list[tuple]:
    """The dummy items one max-token lookup builds when it processes (one per enabled modality)."""
    return _budget(model_config, variant).lookup_specs()


_MOVED = {"ProfileDummy", "max_items_per_batch", "profile_seq_len"}


def __getattr__(name: str):
    """Names moved to refimpl.multimodal.encoder_budget after 0.2.0: still importable from here, with a
    DeprecationWarning."""
    if name in _MOVED:
        import warnings

        from refimpl.multimodal import encoder_budget
        warnings.warn(f"refimpl.multimodal.worst_case.{name} moved to refimpl.multimodal.encoder_budget.{name} (the old path goes in 0.4.0)",
                      DeprecationWarning, stacklevel=2)
        return getattr(encoder_budget, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@lru_cache(maxsize=64)
def worst_case_image_size(min_pixels: int, max_pixels: int, factor: int = 28,
                          max_ratio: int = 200, rule: str = "true-max") -> tuple[int, int]:
    """(width, height) in pixels of the input image (or frame) whose ``smart_resize`` (sides rounded
    to ``factor``, area into [min_pixels, max_pixels], ratio <= ``max_ratio``) has the most cells
    (placeholder tokens) under ``rule``: ``square`` smart_resize of 9999999 x 9999999;
    ``factor-pair`` ``factor`` x the closest factor pair of the largest cell count within
    max_ratio; ``true-max`` the best of that pair unresized, the flattest image scaled down (its
    long side's floor can exceed max_pixels) and every image thinner than factor / 2 (scaled up,
    sides rounded up). Cached (~20,000 smart_resize calls the first time). Raises ValueError for
    another rule."""
    if rule == "square":
        h, w = smart_resize(9999999, 9999999, factor=factor, min_pixels=min_pixels, max_pixels=max_pixels)
        return w, h
    if rule == "factor-pair":
        for n in range(max_pixels // factor ** 2, 0, -1):
            a = next(d for d in range(math.isqrt(n), 0, -1) if n % d == 0)
            if n // a <= max_ratio * a:
                return factor * (n // a), factor * a
        return factor, factor
    if rule != "true-max":
        raise ValueError(f"unknown worst-case rule {rule!r}")

    def cells(wh: tuple[int, int]) -> int:
        h, w = smart_resize(wh[1], wh[0], factor=factor, min_pixels=min_pixels, max_pixels=max_pixels)
        return (h // factor) * (w // factor)

    cands: list[tuple[int, int]] = []
    for n in range(max_pixels // factor ** 2, 0, -1):
        a = next(d for d in range(math.isqrt(n), 0, -1) if n % d == 0)
        b, near = n // a, factor // 2 - 1  # sides that still round to b and a cells
        # the ratio limit applies to the input, not the grid: a short side of 28a + 13 and
        # a long side of 28b - 13 pixels round to the same grid (1 x 211 cells from 41 x 5895)
        wh = (factor * b, factor * a) if b <= max_ratio * a else (factor * b - near, factor * a + near)
        if max(wh) <= max_ratio * min(wh) and cells(wh) == n:
            cands.append(wh)
            break
    s = 1
    while round(s / factor) * round(max_ratio * s / factor) * factor ** 2 <= max_pixels:
        s *= 2
    cands.append((max_ratio * s, s))
    cands += [(w, h) for h in range(1, factor // 2 + 1) for w in range(h, max_ratio * h + 1)]
    return max(cands, key=cells)  # the first (not resized) wins ties
