"""Qwen2.5-VL multimodal processing: processing info, dummy inputs, formula max tokens.

Mirrors the Qwen2-VL processing info, dummy builder and processor of
``vllm/model_executor/models/qwen2_vl.py`` (0.9.0) plus ``get_max_tokens_per_item``; later
changes are MultiModalSwitches. The processing info and the dummy builder live in qwen2_5_vl_info.py
(the dry plan's, no transformers import) and are importable from here. The HF processor is the real ``Qwen2_5_VLProcessor`` from the
shipped preprocessor_config.json (``cap_pixels_per_frame=False``). Left out: video metadata
beyond the HF processor's, embedding inputs, ``mm_options``.
"""
from __future__ import annotations

from functools import lru_cache

from transformers import Qwen2_5_VLProcessor, Qwen2VLImageProcessor, Qwen2VLVideoProcessor

from refimpl.config import get_preprocessor_dict
from refimpl.multimodal.processing import BaseMultiModalProcessor
from refimpl.multimodal.qwen2_5_vl_info import (  # noqa: F401 - here before the split
    Qwen2_5_VLDummyInputsBuilder,
    Qwen2_5_VLProcessingInfo,
)
from refimpl.tokenizer import get_tokenizer

MODEL = "qwen2.5-vl-3b"


@lru_cache(maxsize=8)
def build_hf_processor(model: str, overrides: tuple = ()):
    """The HF ``Qwen2_5_VLProcessor`` of ``model``, cached per model and ``overrides`` (sorted
    (key, value) pairs, e.g. (("max_pixels", 50176),)), as vLLM's ``cached_get_processor``."""
    d = {k: v for k, v in get_preprocessor_dict(model).items()
         if k not in ("image_processor_type", "processor_class")}
    d.update(dict(overrides))
    # A fresh size dict each time: transformers' __init__ mutates the one it is given.
    size = lambda: {"shortest_edge": d["min_pixels"], "longest_edge": d["max_pixels"]}  # noqa: E731
    kw = {k: v for k, v in d.items() if k not in ("min_pixels", "max_pixels")}
    return Qwen2_5_VLProcessor(
        image_processor=Qwen2VLImageProcessor(size=size(), **kw),
        video_processor=Qwen2VLVideoProcessor(size=size(), cap_pixels_per_frame=False, **kw),
        tokenizer=get_tokenizer(model))


class Qwen2_5_VLMultiModalProcessor(BaseMultiModalProcessor):
    hf_applies_updates = True

    def _get_hf_inputs(self, hf, text, items):
        return dict(text=[text], images=items.get("image") or None, videos=items.get("video") or None)

    def _get_mm_fields_config(self):
        return {"pixel_values": ("image", "image_grid_thw"), "image_grid_thw": ("image", None),
                "pixel_values_videos": ("video", "video_grid_thw"), "video_grid_thw": ("video", None),
                "second_per_grid_ts": ("video", None)}

    def _get_prompt_updates(self, mm_kwargs):
        hf = self.info.get_hf_processor()
        merge2 = self._vision_merge() ** 2
        out = {}
        for m, tok, grid in (("image", hf.image_token_id, "image_grid_thw"),
                             ("video", hf.video_token_id, "video_grid_thw")):
            out[m] = ([tok], [[tok] * (int(d[grid].prod()) // merge2) for d in mm_kwargs.get(m, [])])
        return out

    def _vision_merge(self) -> int:
        return self.info.hf_config["vision_config"]["spatial_merge_size"]
