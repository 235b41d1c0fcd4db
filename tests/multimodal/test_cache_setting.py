"""Issue 8, kind 5: the user's cache settings hold on every path that builds a processor.

``model_config.disable_mm_preprocessor_cache`` is read by ``create_processor`` itself (as
vLLM 0.9.0's), so any caller -- the engine, a notebook, the two-process front end -- gets
no caching; a processing cache smaller than one dummy item logs a warning naming
``mm_processor_cache_gb`` and the size needed.
"""
from __future__ import annotations

import logging

import numpy as np
from PIL import Image

from refimpl.config import ModelConfig
from refimpl.multimodal import MultiModalRegistry

PROMPT = "<|vision_start|><|image_pad|><|vision_end|>"
SMALL = {"max_pixels": 28 * 28 * 16}


def _qwen(**kw):
    return ModelConfig("qwen2.5-vl-3b", device="cpu", max_model_len=4096, mm_processor_kwargs=dict(SMALL),
                       limit_mm_per_prompt={"image": 1, "video": 0}, **kw)


def test_create_processor_honours_disable_mm_preprocessor_cache():
    """The issue's input: 3 identical images gave 2 hits with the cache 'off'."""
    image = Image.fromarray(np.full((56, 56, 3), 7, dtype=np.uint8))
    for off, hits in ((True, 0), (False, 2)):
        reg = MultiModalRegistry()
        proc = reg.create_processor(_qwen(disable_mm_preprocessor_cache=off))
        assert (proc.cache is None) == off
        for _ in range(3):
            proc.apply(PROMPT, {"image": image})
        assert reg.stats.cache_hits == hits


def test_explicit_disable_cache_still_wins():
    reg = MultiModalRegistry()
    assert reg.create_processor(_qwen(disable_mm_preprocessor_cache=True), disable_cache=False).cache is not None
    assert reg.create_processor(_qwen(), disable_cache=True).cache is None


def test_cache_smaller_than_dummy_item_warns_with_setting_and_size(caplog):
    mc = _qwen(mm_processor_cache_gb=1e-6)  # 1073 bytes; the dummy image's item is ~75 kB
    reg = MultiModalRegistry()
    with caplog.at_level(logging.WARNING, logger="refimpl.multimodal.cache"):
        for _ in range(2):
            reg.get_max_tokens_per_item_by_modality(mc)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings  # once per capacity, not once per pass
    assert reg.stats.hf_mm_passes == 2 and reg.processing_cache.rejected == 2  # no saving
    proc = MultiModalRegistry().create_processor(mc, disable_cache=True)  # the item's real size
    out = proc.apply(PROMPT, proc.dummy_inputs.get_dummy_mm_data(4096, {"image": 1}))
    nbytes = sum(t.nbytes for t in out.mm_kwargs["image"][0].values())
    assert "mm_processor_cache_gb" in warnings[0] and f"({nbytes} bytes" in warnings[0]


def test_no_warning_when_the_item_fits(caplog):
    reg = MultiModalRegistry()
    with caplog.at_level(logging.WARNING, logger="refimpl.multimodal.cache"):
        reg.get_max_tokens_per_item_by_modality(_qwen())
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]
