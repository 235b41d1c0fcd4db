"""Qwen2.5-VL multimodal processing: processing info, dummy inputs, formula max tokens.

Mirrors ``Qwen2VLProcessingInfo`` / ``Qwen2VLDummyInputsBuilder`` /
``Qwen2VLMultiModalProcessor`` in ``vllm/model_executor/models/qwen2_vl.py`` (used by
``qwen2_5_vl.py``) at vLLM 0.9.0, plus ``get_max_tokens_per_item`` from PR #19756 (max
tokens by formula, no dummy processing).

The HF processor is the real ``Qwen2_5_VLProcessor`` with the torchvision
``Qwen2VLImageProcessor`` and ``Qwen2VLVideoProcessor`` built from
``refimpl/data/qwen2.5-vl-3b/preprocessor_config.json`` (the video processor gets the same
min/max pixels, as transformers 4.5x loaded it from that file) and
``cap_pixels_per_frame=False``: the uncapped frame size of the vLLM 0.9 era, which also
silences transformers 5's warning.

Left out: the ``fps`` / ``second_per_grid_ts`` handling of video metadata beyond what the
HF processor does, image/video embeddings as inputs, later vLLM's cap on frames per video.
"""
from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np
import torch

from refimpl.multimodal.inputs import MultiModalInputs, PlaceholderRange
from refimpl.multimodal.processing import BaseMultiModalProcessor, BaseProcessingInfo
from refimpl.multimodal.profiling import BaseDummyInputsBuilder

MODEL = "qwen2.5-vl-3b"


@lru_cache(maxsize=8)
def build_hf_processor(model: str, overrides: tuple = ()):
    """The HF ``Qwen2_5_VLProcessor`` of ``model`` (cached per model and override tuple,
    like vLLM's ``cached_get_processor``). ``overrides``: sorted (key, value) pairs, e.g.
    (("max_pixels", 50176),). Built offline in ~0.3 s."""
    from transformers import Qwen2_5_VLProcessor, Qwen2VLImageProcessor, Qwen2VLVideoProcessor

    from refimpl.config import get_preprocessor_dict
    from refimpl.tokenizer import get_tokenizer
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


@lru_cache(maxsize=64)
def worst_case_image_size(min_pixels: int, max_pixels: int, factor: int = 28,
                          max_ratio: int = 200) -> tuple[int, int]:
    """(width, height) in pixels of an input image (or video frame) whose ``smart_resize``
    (transformers' Qwen2-VL resize: sides rounded to ``factor`` = patch * merge = 28 pixels,
    area brought into [min_pixels, max_pixels], aspect ratio <= ``max_ratio``) has the most
    ``factor`` x ``factor`` cells, i.e. the most placeholder tokens per image (per frame pair
    for video). Issue 8, kind 4: a huge square is not always the worst case.

    Candidates, each evaluated with the real ``smart_resize``:
      * an image that is not resized: ``factor * a`` x ``factor * b`` for the largest
        a * b <= max_pixels // factor^2 whose closest factor pair an input of ratio <=
        max_ratio can reach (vLLM's later Qwen2-VL ``get_image_size_with_most_features``
        factorises the same way, checking the ratio on the grid instead);
        768 * 28^2 gives 896 x 672 (768 tokens), not the 756 x 756 square (729 tokens);
      * the flattest image that is scaled down (ratio ``max_ratio``): when max_pixels //
        factor^2 is small, ``smart_resize`` clamps the short side to ``factor`` and the long
        side's floor can give more cells than max_pixels allows;
      * every image thinner than ``factor / 2`` pixels (up to ratio ``max_ratio``): they are
        scaled up to min_pixels with both sides rounded up, which can give more cells than
        max_pixels allows when min_pixels is close to it (e.g. min = max = 256 * 28^2:
        1 x 200 pixels -> 454 tokens).
    Cached per argument tuple; ~20,000 ``smart_resize`` calls (tens of ms) the first time.
    """
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize

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


class Qwen2_5_VLProcessingInfo(BaseProcessingInfo):
    modalities = ("image", "video")

    def get_hf_processor(self):
        return build_hf_processor(self.model_id, tuple(sorted(self.mm_processor_kwargs.items())))

    def _vision(self) -> tuple[int, int, int]:
        v = self.hf_config["vision_config"]
        return v["patch_size"], v["spatial_merge_size"], v["temporal_patch_size"]

    def get_vision_info(self, image_width: int, image_height: int, num_frames: int = 1) -> tuple[tuple[int, int], int]:
        """((resized width, height) in pixels, placeholder tokens) of an image or video.

        smart_resize with factor patch*merge = 28 under the image processor's min/max pixels;
        frames padded to a multiple of temporal_patch_size; tokens = grid_t*grid_h*grid_w/merge^2.
        """
        from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize
        patch, merge, tps = self._vision()
        size = self.get_hf_processor().image_processor.size
        h, w = smart_resize(image_height, image_width, factor=patch * merge,
                            min_pixels=size.shortest_edge, max_pixels=size.longest_edge)
        grid_t = max((num_frames + num_frames % tps) // tps, 1)
        return (w, h), grid_t * (h // patch) * (w // patch) // (merge * merge)

    def get_image_size_with_most_features(self) -> tuple[int, int]:
        """(width, height) in pixels of the image (and video frame) with the most tokens
        under the processor's min/max pixels (``worst_case_image_size``): 3584 x 3584 under
        the default max_pixels 12,845,056; 896 x 672 under 768 * 28^2."""
        patch, merge, _ = self._vision()
        size = self.get_hf_processor().image_processor.size
        return worst_case_image_size(size.shortest_edge, size.longest_edge, patch * merge)

    def get_max_image_tokens(self) -> int:
        w, h = self.get_image_size_with_most_features()
        return self.get_vision_info(w, h)[1]

    def get_num_video_tokens(self, image_width: int, image_height: int, num_frames: int) -> int:
        return self.get_vision_info(image_width, image_height, num_frames)[1]

    def _get_max_video_frames(self, max_tokens: int) -> int:
        w, h = self.get_image_size_with_most_features()
        n = 0
        while self.get_num_video_tokens(w, h, n + 1) <= max_tokens:
            n += 1
        return n

    def get_num_frames_with_most_features(self, seq_len: int, mm_counts: dict[str, int]) -> int:
        """Frames of the dummy video: as many largest-size frames as fit in ``seq_len`` minus
        the image tokens, split over the videos, rounded down to a multiple of
        temporal_patch_size (2) and at least 2. (vLLM 0.9 returned ``max(n, 1)``; one frame is
        padded to two, so the token count is the same.) Qwen2.5-VL-3B, 128000, one image: 12."""
        tps = self._vision()[2]
        image_tokens = self.get_max_image_tokens() * mm_counts.get("image", 0)
        n = self._get_max_video_frames(seq_len - image_tokens) // max(mm_counts.get("video", 0), 1)
        return max(n - n % tps, tps)

    def get_max_video_tokens(self, seq_len: int, mm_counts: dict[str, int]) -> int:
        w, h = self.get_image_size_with_most_features()
        return self.get_num_video_tokens(w, h, self.get_num_frames_with_most_features(seq_len, mm_counts))

    def get_max_tokens_per_item(self, seq_len: int, mm_counts: dict[str, int]) -> dict[str, int]:
        """{"image": 16384, "video": tokens of the max-frames video} (tokens), by formula only."""
        out = {"image": self.get_max_image_tokens(),
               "video": self.get_max_video_tokens(seq_len, mm_counts)}
        return {m: n for m, n in out.items() if mm_counts.get(m, 0) > 0}


class Qwen2_5_VLDummyInputsBuilder(BaseDummyInputsBuilder):
    video_dtype = None  # None: from the config's mm_switches.dummy_video_dtype (vLLM 0.9: int64)

    def get_dummy_text(self, mm_counts: dict[str, int]) -> str:
        hf = self.info.get_hf_processor()
        return hf.image_token * mm_counts.get("image", 0) + hf.video_token * mm_counts.get("video", 0)

    def get_dummy_mm_data(self, seq_len: int, mm_counts: dict[str, int]) -> dict[str, list[Any]]:
        """White 3584x3584 RGB PIL images and white (T, 3584, 3584, 3) videos, T from
        get_num_frames_with_most_features. Video arrays are ``mm_switches.dummy_video_dtype``:
        int64 reproduces vLLM <= 0.11.0's ``np.full(shape, 255)`` (3.7 GB for 12 frames of
        3584x3584), uint8 vLLM 0.11.1 and later (462 MB)."""
        w, h = self.info.get_image_size_with_most_features()
        n_img, n_vid = mm_counts.get("image", 0), mm_counts.get("video", 0)
        frames = self.info.get_num_frames_with_most_features(seq_len, mm_counts) if n_vid else 0
        return {"image": self._get_dummy_images(w, h, n_img),
                "video": self._get_dummy_videos(w, h, frames, n_vid, dtype=self.video_dtype or
                                                np.dtype(self.info.switches.dummy_video_dtype))}


    def get_dummy_processed_inputs(self, seq_len: int, mm_counts: dict[str, int],
                                   device=None) -> MultiModalInputs:
        """The processed dummy data without processing (shape-only start-up): per image
        ``pixel_values`` (grid_h * grid_w, 3 * tps * patch^2) float32 and ``image_grid_thw``
        (3,) int64 = [1, grid_h, grid_w]; per video ``pixel_values_videos`` (grid_t * grid_h *
        grid_w, 1176) float32, ``video_grid_thw`` and ``second_per_grid_ts`` () float32 =
        tps / fps (transformers' VideoMetadata default fps); grids from smart_resize of the
        largest image size, grid_t = frames padded to tps, / tps. The prompt is the expanded
        placeholder tokens (the profiler pads it). Values are zeros; ``device="meta"``: the
        feature tensors hold no memory (shapes only; grids stay real)."""
        from transformers.video_utils import VideoMetadata
        info, hf = self.info, self.info.get_hf_processor()
        patch, merge, tps = info._vision()
        w, h = info.get_image_size_with_most_features()
        n_img, n_vid = mm_counts.get("image", 0), mm_counts.get("video", 0)
        frames = info.get_num_frames_with_most_features(seq_len, mm_counts) if n_vid else 0
        row = 3 * tps * patch * patch
        ids: list[int] = []
        mm_kwargs: dict[str, list[dict[str, torch.Tensor]]] = {}
        placeholders: dict[str, list[PlaceholderRange]] = {}
        for m, n, tok in (("image", n_img, hf.image_token_id), ("video", n_vid, hf.video_token_id)):
            for _ in range(n):
                (rw, rh), tokens = info.get_vision_info(w, h, frames if m == "video" else 1)
                grid_t = max((frames + frames % tps) // tps, 1) if m == "video" else 1
                grid = torch.tensor([grid_t, rh // patch, rw // patch], dtype=torch.int64)
                feats = torch.zeros(int(grid.prod()), row, dtype=torch.float32, device=device)
                item = ({"pixel_values": feats, "image_grid_thw": grid} if m == "image" else
                        {"pixel_values_videos": feats, "video_grid_thw": grid, "second_per_grid_ts":
                         torch.tensor(tps / VideoMetadata(total_num_frames=frames).sampled_fps)})
                mm_kwargs.setdefault(m, []).append(item)
                placeholders.setdefault(m, []).append(PlaceholderRange(len(ids), tokens))
                ids.extend([tok] * tokens)
        return MultiModalInputs(prompt_token_ids=ids, mm_kwargs=mm_kwargs, mm_hashes={},
                                mm_placeholders=placeholders)


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
