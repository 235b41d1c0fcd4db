"""Issue 8, kind 4: the profiled max tokens per image / video frame is the true maximum.

For several min_pixels / max_pixels settings, the formula's max tokens per image
(``get_max_image_tokens``, from ``worst_case_image_size``) must be >= the tokens of every
input size in a sweep of sizes and aspect ratios, counted with transformers' own
``smart_resize`` (no HF processing: cheap), and equal to the tokens of the dummy image.
Real HF processing runs only on the issue's setting (a 896 x 672 dummy, a 2000 x 1500 image).
"""
from __future__ import annotations

import pytest
from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize

from tests.multimodal.utils import F, _info, _sweep

# (min_pixels, max_pixels): default, the issue's, vLLM's usual 1280 cells, a prime cell count,
# fixed size (min == max), tiny maxima where smart_resize's clamp and ceil overshoot.
SETTINGS = [(3136, 12845056), (3136, 768 * F * F), (3136, 1280 * F * F), (3136, 997 * F * F),
            (256 * F * F, 256 * F * F), (3136, 8 * F * F), (100 * F * F, 120 * F * F), (3136, 50 * F * F),
            (3136, 211 * F * F)]  # 211: prime, yet 1 x 211 cells are reachable (41 x 5895 pixels)




def _tokens(h, w, mn, mx):
    rh, rw = smart_resize(h, w, factor=F, min_pixels=mn, max_pixels=mx)
    return (rh // F) * (rw // F)




@pytest.mark.slow
@pytest.mark.parametrize("mn, mx", SETTINGS)
def test_formula_is_the_max_over_image_sizes(mn, mx):
    _, _, info = _info(mn, mx)
    formula = info.get_max_image_tokens()
    w, h = info.get_image_size_with_most_features()
    assert _tokens(h, w, mn, mx) == formula
    worst = max(max(_tokens(h, w, mn, mx), _tokens(w, h, mn, mx)) for h, w in _sweep(mn, mx))
    assert formula >= worst
    if mn < mx // 4:  # no rounding-up overshoot: the max is the largest allowed factorable count
        assert formula == worst


@pytest.mark.soak
@pytest.mark.parametrize("mn, mx", SETTINGS + [(3136, c * F * F) for c in (2, 101, 199, 4099)])
def test_formula_is_the_max_over_all_small_inputs_soak(mn, mx):
    """Every input up to 400 x 80,000 pixels (ratio <= 200) with the real smart_resize."""
    _, _, info = _info(mn, mx)
    formula = info.get_max_image_tokens()
    worst = max(_tokens(h, w, mn, mx) for h in range(1, 401) for w in range(h, 200 * h + 1, max(1, h // 8)))
    print(f"min {mn} max {mx}: formula {formula}, swept max {worst}")
    assert formula >= worst
