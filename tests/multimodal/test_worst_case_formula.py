"""The worst-case image and video formulas, small cases (the sweep over image sizes is in tests/multimodal/test_worst_case_image.py)."""
from __future__ import annotations

import pytest
from PIL import Image

from refimpl.config import ModelConfig, SchedulerConfig
from refimpl.core.encoder_cache_manager import compute_encoder_budget
from tests.multimodal.utils import F, _info, _sweep


def test_issue_example_768_cells():
    """max_pixels = 768 * 28^2: the square dummy gave 729; a 2000 x 1500 image gives 768."""
    mc, reg, info = _info(3136, 768 * F * F, limit_mm_per_prompt={"image": 12, "video": 0})
    assert info.get_image_size_with_most_features() == (896, 672)
    assert reg.get_max_tokens_per_item_by_modality(mc, use_formula=True) == {"image": 768}
    assert reg.get_max_tokens_per_item_by_modality(mc) == {"image": 768}   # dummy processing
    proc = reg.create_processor(mc)
    real = proc.apply("<|vision_start|><|image_pad|><|vision_end|>",
                      {"image": Image.new("RGB", (2000, 1500))})
    assert real.mm_placeholders["image"][0].length == 768
    # and the engine's encoder budget admits it at max_num_batched_tokens=512 (was 729: refused)
    assert compute_encoder_budget(mc, SchedulerConfig(max_num_batched_tokens=512), reg,
                                  use_formula=True) == (768, 768)


@pytest.mark.parametrize("mn, mx", [(3136, 768 * F * F), (256 * F * F, 256 * F * F)])
def test_video_formula_covers_every_frame_size(mn, mx):
    _, _, info = _info(mn, mx, limit_mm_per_prompt={"image": 0, "video": 1})
    seq_len = 32768
    frames = info.get_num_frames_with_most_features(seq_len, {"video": 1})
    formula = info.get_max_video_tokens(seq_len, {"video": 1})
    worst = max(info.get_num_video_tokens(w, h, frames) for h, w in list(_sweep(mn, mx))[::7])
    assert formula >= worst and formula == info.get_num_video_tokens(
        *info.get_image_size_with_most_features(), frames)


def test_model_config_accepts_mm_processor_kwargs():
    mc = ModelConfig("qwen2.5-vl-3b", device="cpu", mm_processor_kwargs={"max_pixels": 768 * F * F})
    assert mc.mm_processor_kwargs == {"max_pixels": 768 * F * F}
