"""A small-pixel Qwen2.5-VL model config (tests/core/test_dummy_data.py, tests/engine/test_dummy_data_full_size.py)."""
from refimpl.config import ModelConfig

# Cheap videos. The worst-case image is not the 224x224 square (64 tokens) but a 3200 x 16
# strip: smart_resize clamps its short side to 28 and keeps 113 cells on the long side.
SMALL_PIXELS = {"max_pixels": 28 * 28 * 64}


def qwen(max_model_len, small=False, **kw):
    mc = ModelConfig("qwen2.5-vl-3b", max_model_len=max_model_len, device="cpu", **kw)
    if small:
        mc.mm_processor_kwargs = dict(SMALL_PIXELS)  # vLLM's ModelConfig.mm_processor_kwargs
    return mc
