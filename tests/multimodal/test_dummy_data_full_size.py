"""Dummy data at full size through the real processor (the small-size tests are in tests/multimodal/test_dummy_data.py)."""
import numpy as np
import pytest
import torch
from PIL import Image

from refimpl.config import ModelConfig, SchedulerConfig
from refimpl.core.encoder_cache_manager import compute_encoder_budget
from refimpl.multimodal import MultiModalRegistry
from tests.multimodal.utils import qwen


@pytest.mark.slow
def test_largest_image_and_full_size_formula_equals_processing():
    reg = MultiModalRegistry()
    mc = qwen(20000)  # 20000 - 16384 leaves room for no frame pair: the dummy video gets 2 frames
    proc = reg.create_processor(mc)
    assert proc.info.get_image_size_with_most_features() == (3584, 3584)
    data = proc.dummy_inputs.get_dummy_mm_data(20000, {"image": 1, "video": 1})
    img, vid = data["image"][0], data["video"][0]
    assert isinstance(img, Image.Image) and img.mode == "RGB" and img.size == (3584, 3584)
    assert img.getextrema() == ((255, 255),) * 3
    assert vid.dtype == np.uint8 and vid.shape == (2, 3584, 3584, 3)
    assert proc.dummy_inputs.get_dummy_text({"image": 1, "video": 1}) == "<|image_pad|><|video_pad|>"
    formula = reg.get_max_tokens_per_item_by_modality(mc, use_formula=True)
    assert reg.stats.hf_processor_calls == 0
    processed = reg.get_max_tokens_per_item_by_modality(mc)
    assert formula == processed == {"image": 16384, "video": 16384}
    assert reg.stats.hf_mm_passes == 1


@pytest.mark.slow
@pytest.mark.parametrize("model", ["qwen2.5-vl-3b", "whisper-tiny"])
def test_identical_dummy_passes_run_hf_once_with_cache(model):
    mc = qwen(2048, small=True) if model.startswith("qwen") else ModelConfig(model, device="cpu")
    reg = MultiModalRegistry()
    for _ in range(3):
        first = reg.get_max_tokens_per_item_by_modality(mc)
        dec = reg.get_decoder_dummy_data(mc, 2048 if model.startswith("qwen") else 448)
    assert reg.stats.hf_mm_passes == 1 and reg.cache_bytes() > 0
    assert first == reg.get_max_tokens_per_item_by_modality(mc, use_formula=True)
    # padded to seq_len; the image and the video fitted to all of it are kept whole (vLLM 0.10.2 on)
    assert len(dec.prompt_token_ids) >= (2048 if model.startswith("qwen") else 448)
    off = MultiModalRegistry()
    for _ in range(3):
        assert off.get_max_tokens_per_item_by_modality(mc, disable_cache=True) == first
    assert off.stats.hf_mm_passes == 3 and off.cache_bytes() == 0
    assert compute_encoder_budget(mc, SchedulerConfig(), reg) == compute_encoder_budget(
        mc, SchedulerConfig(), reg, use_formula=True)


@pytest.mark.slow
def test_int64_dummy_video_like_vllm_0_9():
    reg = MultiModalRegistry()
    proc = reg.create_processor(qwen(2048, small=True))
    proc.dummy_inputs.video_dtype = np.int64
    vid = proc.dummy_inputs.get_dummy_mm_data(2048, {"video": 1})["video"][0]
    assert vid.dtype == np.int64 and vid.nbytes == 8 * vid.size
    out = proc.apply("<|video_pad|>", {"video": vid})
    assert out.mm_kwargs["video"][0]["pixel_values_videos"].dtype == torch.float32
