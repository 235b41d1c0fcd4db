"""Qwen2.5-VL's processing info (placeholder tokens, item sizes, max tokens per item) and dummy inputs.

Mirrors ``Qwen2VLProcessingInfo`` and ``Qwen2VLDummyInputsBuilder`` of
``vllm/model_executor/models/qwen2_vl.py`` (0.9.0) plus ``get_max_tokens_per_item``; later changes
are MultiModalSwitches. Apart from the processor and the HF processor (refimpl/multimodal/qwen2_5_vl.py,
which imports transformers' processors and, through them, torchvision) so that the dry start-up plan
(``MultiModalBudget(dry=True)``) imports no transformers module; both names importable from qwen2_5_vl too.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from refimpl.config import get_preprocessor_dict
from refimpl.multimodal.inputs import MultiModalInputs, PlaceholderRange
from refimpl.multimodal.processing_context import BaseProcessingInfo
from refimpl.multimodal.profiling import BaseDummyInputsBuilder
from refimpl.multimodal.smart_resize import smart_resize
from refimpl.multimodal.worst_case import worst_case_image_size


class Qwen2_5_VLProcessingInfo(BaseProcessingInfo):
    modalities = ("image", "video")
    dry = False  # True: sizes from the configs, no HF processor (MultiModalBudget(dry=True))
    _most_features: Optional[tuple[int, int]] = None

    def get_hf_processor(self):
        from refimpl.multimodal.qwen2_5_vl import build_hf_processor  # the wet path has imported it already

        return build_hf_processor(self.model_id, tuple(sorted(  # lists as tuples: a cache key
            (k, tuple(v) if isinstance(v, list) else v) for k, v in self.mm_processor_kwargs.items())))

    def get_pixel_bounds(self) -> tuple[int, int]:
        """(min_pixels, max_pixels) of the image processor: the HF processor's ``size``, or (dry)
        preprocessor_config.json under ``mm_processor_kwargs``, the values build_hf_processor gives it."""
        if self.dry:
            d = {**get_preprocessor_dict(self.model_id), **self.mm_processor_kwargs}
            return d["min_pixels"], d["max_pixels"]
        size = self.get_hf_processor().image_processor.size
        return size.shortest_edge, size.longest_edge

    def _vision(self) -> tuple[int, int, int]:
        v = self.hf_config["vision_config"]
        return v["patch_size"], v["spatial_merge_size"], v["temporal_patch_size"]

    def get_vision_info(self, image_width: int, image_height: int, num_frames: int = 1) -> tuple[tuple[int, int], int]:
        """((resized width, height) in pixels, placeholder tokens) of an image or a ``num_frames`` video:
        smart_resize by 28 within min/max pixels, frames padded to temporal_patch_size."""
        patch, merge, tps = self._vision()
        lo, hi = self.get_pixel_bounds()
        h, w = smart_resize(image_height, image_width, factor=patch * merge, min_pixels=lo, max_pixels=hi)
        grid_t = max((num_frames + num_frames % tps) // tps, 1)
        return (w, h), grid_t * (h // patch) * (w // patch) // (merge * merge)

    def get_image_size_with_most_features(self) -> tuple[int, int]:
        """(width, height) in pixels of the image (and frame) with the most tokens under the switches'
        worst-case rule (``worst_case_image_size``); 3584 x 3584 at the default max_pixels. Dry: computed
        once per info, around the function's process-wide cache."""
        patch, merge, _ = self._vision()
        if not self.dry:
            return worst_case_image_size(*self.get_pixel_bounds(), patch * merge, rule=self.switches.worst_case_image)
        if self._most_features is None:
            self._most_features = worst_case_image_size.__wrapped__(
                *self.get_pixel_bounds(), patch * merge, rule=self.switches.worst_case_image)
        return self._most_features

    def get_item_tokens(self, spec: tuple) -> int:
        """Placeholder tokens of a dummy item ``("image", w, h)`` or ``("video", frames, w, h)``."""
        return self.get_vision_info(*spec[1:])[1] if spec[0] == "image" else \
            self.get_vision_info(spec[2], spec[3], spec[1])[1]

    def get_processed_item_bytes(self, spec: tuple) -> int:
        """Bytes of that item processed: float32 patch rows and the int64 grid (+ float32 seconds)."""
        patch, merge, tps = self._vision()
        return self.get_item_tokens(spec) * merge * merge * 3 * tps * patch * patch * 4 + 24 + \
            (4 if spec[0] == "video" else 0)

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
        """Frames per dummy video: largest-size frames that fit ``seq_len`` (less the image tokens under
        frame_fit "minus-images"), split over the videos, capped at ``max_frames_per_video``, at least 1;
        frame_share "whole-patches" (ours) rounds a share down to a multiple of temporal_patch_size
        (vLLM's "vllm" keeps the odd share and the HF processor pads past it)."""
        sw, tps = self.switches, self._vision()[2]
        if sw.frame_fit == "minus-images":
            seq_len -= self.get_max_image_tokens() * mm_counts.get("image", 0)
        videos = max(mm_counts.get("video", 0), 1)
        n = self._get_max_video_frames(seq_len) // videos
        if sw.frame_share == "whole-patches" and videos > 1 and n > tps:
            n -= n % tps
        if sw.max_frames_per_video is not None:
            n = min(n, sw.max_frames_per_video)
        return max(n, 1)

    def get_max_video_tokens(self, seq_len: int, mm_counts: dict[str, int]) -> int:
        w, h = self.get_image_size_with_most_features()
        return self.get_num_video_tokens(w, h, self.get_num_frames_with_most_features(seq_len, mm_counts))

    def get_max_tokens_per_item(self, seq_len: int, mm_counts: dict[str, int]) -> dict[str, int]:
        """{"image": tokens, "video": tokens of the max-frames video}, by formula only."""
        out = {"image": self.get_max_image_tokens(),
               "video": self.get_max_video_tokens(seq_len, mm_counts)}
        return {m: n for m, n in out.items() if mm_counts.get(m, 0) > 0}


class Qwen2_5_VLDummyInputsBuilder(BaseDummyInputsBuilder):
    video_dtype = None  # None: from the config's mm_switches.dummy_video_dtype (vLLM 0.9: int64)

    def get_dummy_text(self, mm_counts: dict[str, int]) -> str:
        hf = self.info.get_hf_processor()
        return hf.image_token * mm_counts.get("image", 0) + hf.video_token * mm_counts.get("video", 0)

    def get_dummy_item_specs(self, seq_len: int, mm_counts: dict[str, int],
                             fit_counts: Optional[dict[str, int]] = None) -> dict[str, list[tuple]]:
        """``("image", width, height)`` per image and ``("video", frames, width, height)`` per video,
        frames fitted as for ``fit_counts`` (default ``mm_counts``), not built."""
        w, h = self.info.get_image_size_with_most_features()
        n_img, n_vid = mm_counts.get("image", 0), mm_counts.get("video", 0)
        frames = self.info.get_num_frames_with_most_features(seq_len, fit_counts or mm_counts) if n_vid else 0
        return {"image": [("image", w, h)] * n_img, "video": [("video", frames, w, h)] * n_vid}

    def get_dummy_mm_data(self, seq_len: int, mm_counts: dict[str, int],
                          fit_counts: Optional[dict[str, int]] = None) -> dict[str, list[Any]]:
        """White RGB PIL images and white (T, H, W, 3) videos of ``get_dummy_item_specs``, the videos in
        ``mm_switches.dummy_video_dtype`` (int64: 3.7 GB for 12 frames of 3584 x 3584; uint8: 462 MB)."""
        specs = self.get_dummy_item_specs(seq_len, mm_counts, fit_counts)
        dtype = self.video_dtype or np.dtype(self.info.switches.dummy_video_dtype)
        images = [self._get_dummy_images(w, h, 1)[0] for _, w, h in specs["image"][:1]]
        videos = [self._get_dummy_videos(w, h, t, 1, dtype=dtype)[0] for _, t, w, h in specs["video"][:1]]
        return {"image": images * len(specs["image"]), "video": videos * len(specs["video"])}

    def get_dummy_processed_inputs(self, seq_len: int, mm_counts: dict[str, int],
                                   fit_counts: Optional[dict[str, int]] = None, device=None) -> MultiModalInputs:
        """The processed dummy data without processing: per image ``pixel_values`` (grid_h * grid_w,
        1176) float32 and ``image_grid_thw`` (3,) int64; per video ``pixel_values_videos``,
        ``video_grid_thw`` and ``second_per_grid_ts`` () float32; the prompt the expanded placeholders.
        Values zeros; ``device="meta"``: no memory for the features (grids stay real)."""
        import torch  # here, not at the top: the dry plan (the explorer page) reads this module, no tensor
        from transformers.video_utils import VideoMetadata  # the wet path has imported it (qwen2_5_vl)

        info, hf = self.info, self.info.get_hf_processor()
        patch, merge, tps = info._vision()
        specs = self.get_dummy_item_specs(seq_len, mm_counts, fit_counts)
        row = 3 * tps * patch * patch
        ids: list[int] = []
        mm_kwargs: dict[str, list[dict[str, torch.Tensor]]] = {}
        placeholders: dict[str, list[PlaceholderRange]] = {}
        for m, tok in (("image", hf.image_token_id), ("video", hf.video_token_id)):
            for spec in specs[m]:
                frames, w, h = (1, *spec[1:]) if m == "image" else spec[1:]
                (rw, rh), tokens = info.get_vision_info(w, h, frames)
                grid_t = max((frames + frames % tps) // tps, 1)
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
