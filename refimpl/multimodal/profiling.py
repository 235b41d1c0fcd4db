"""Dummy inputs for start-up profiling.

Mirrors ``BaseDummyInputsBuilder`` and ``MultiModalProfiler`` of ``vllm/multimodal/profiling.py``
(0.9.0). ``fit_counts`` (ours) sizes a dummy as for other item counts. Left out:
``mm_options`` dummy sizes, the V0 ``DummyData`` path, the warnings on an oversize prompt.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
from PIL import Image

from refimpl.multimodal.inputs import MultiModalInputs, PlaceholderRange, ProcessorInputs


@dataclass
class DummyDecoderData:
    """Decoder-side dummy request: ``prompt_token_ids`` (padded with 0 to seq_len),
    ``multi_modal_data`` (MultiModalInputs.mm_kwargs), ``multi_modal_placeholders``."""
    prompt_token_ids: list[int]
    multi_modal_data: dict[str, list[dict[str, Any]]]
    multi_modal_placeholders: dict[str, list[PlaceholderRange]]


@dataclass
class DummyEncoderData:
    """Encoder-side dummy prompt (Whisper: 1500 placeholder zeros per audio)."""
    prompt_token_ids: list[int]


class BaseDummyInputsBuilder:
    """Builds the worst-case items of each modality for ``seq_len`` tokens (per model)."""

    def __init__(self, info):
        self.info = info

    def get_dummy_text(self, mm_counts: dict[str, int]) -> str:
        """Placeholder text for ``mm_counts`` items (e.g. ``"<|image_pad|>" * n``)."""
        raise NotImplementedError

    def get_dummy_item_specs(self, seq_len: int, mm_counts: dict[str, int],
                             fit_counts: Optional[dict[str, int]] = None) -> dict[str, list[tuple]]:
        """``{modality: [spec] * count}``: each dummy item's kind and size, not built."""
        raise NotImplementedError

    def get_dummy_mm_data(self, seq_len: int, mm_counts: dict[str, int],
                          fit_counts: Optional[dict[str, int]] = None) -> dict[str, list[Any]]:
        """``{modality: [largest item] * count}`` for a ``seq_len``-token context."""
        raise NotImplementedError

    def get_dummy_processed_inputs(self, seq_len: int, mm_counts: dict[str, int],
                                   fit_counts: Optional[dict[str, int]] = None, device=None) -> MultiModalInputs:
        """What processing the dummy inputs returns, from the size functions, no HF pass (shape-only,
        ours): shapes, dtypes, token ids and placeholders as processed, values zeros;
        ``device="meta"``: no memory."""
        raise NotImplementedError

    def get_dummy_processor_inputs(self, seq_len: int, mm_counts: dict[str, int],
                                   fit_counts: Optional[dict[str, int]] = None) -> ProcessorInputs:
        return ProcessorInputs(prompt=self.get_dummy_text(mm_counts),
                               mm_data=self.get_dummy_mm_data(seq_len, mm_counts, fit_counts))

    @staticmethod
    def _get_dummy_images(width: int, height: int, num_images: int) -> list[Image.Image]:
        """White RGB images, one object repeated (vLLM's ``color=255`` is red in PIL; sizes alike)."""
        if num_images == 0:
            return []
        return [Image.new("RGB", (width, height), color=(255, 255, 255))] * num_images

    @staticmethod
    def _get_dummy_videos(width: int, height: int, num_frames: int, num_videos: int,
                          dtype=np.uint8) -> list[np.ndarray]:
        """White (T, H, W, 3) videos of ``dtype`` (vLLM's array is (T, W, H, 3); the same for square sizes)."""
        if num_videos == 0:
            return []
        return [np.full((num_frames, height, width, 3), 255, dtype=dtype)] * num_videos

    @staticmethod
    def _get_dummy_audios(length: int, num_audios: int, dtype=np.float32) -> list[np.ndarray]:
        """Silent audio of ``length`` samples in ``dtype`` (the features are float32 either way)."""
        if num_audios == 0:
            return []
        return [np.zeros(length, dtype=dtype)] * num_audios


class MultiModalProfiler:
    """Runs dummy inputs through a BaseMultiModalProcessor to size the worst case."""

    def __init__(self, processor):
        self.processor = processor

    @property
    def dummy_inputs(self) -> BaseDummyInputsBuilder:
        return self.processor.dummy_inputs

    def get_mm_limits(self) -> dict[str, int]:
        return self.processor.info.get_allowed_mm_limits()

    def _get_dummy_mm_inputs(self, seq_len: int, mm_counts: Optional[dict[str, int]] = None,
                             fit_counts: Optional[dict[str, int]] = None) -> MultiModalInputs:
        if mm_counts is None:
            mm_counts = self.get_mm_limits()
        stats, t0 = self.processor.stats, time.perf_counter()
        if self.processor.info.switches.shape_only:  # ours: no HF-processor pass at all
            out = self.dummy_inputs.get_dummy_processed_inputs(seq_len, mm_counts, fit_counts)
            stats.dummy_s += time.perf_counter() - t0
            return out
        inp = self.dummy_inputs.get_dummy_processor_inputs(seq_len, mm_counts, fit_counts)
        stats.dummy_s += time.perf_counter() - t0
        return self.processor.apply(inp.prompt, inp.mm_data, inp.hf_processor_mm_kwargs)

    def get_mm_max_tokens(self, seq_len: int, mm_counts: Optional[dict[str, int]] = None) -> dict[str, int]:
        """Placeholder tokens per modality after processing the dummy data (``{m: 1}``: per item)."""
        mm_inputs = self._get_dummy_mm_inputs(seq_len, mm_counts)
        return {m: sum(p.length for p in ph) for m, ph in mm_inputs.mm_placeholders.items()}

    def get_decoder_dummy_data(self, seq_len: int, mm_counts: Optional[dict[str, int]] = None,
                               fit_counts: Optional[dict[str, int]] = None) -> DummyDecoderData:
        """Dummy decoder request of ``seq_len`` tokens (padded with 0; a longer prompt kept whole)."""
        mm_inputs = self._get_dummy_mm_inputs(seq_len, mm_counts, fit_counts)
        ids = list(mm_inputs.prompt_token_ids)
        ids.extend([0] * max(0, seq_len - len(ids)))
        return DummyDecoderData(ids, mm_inputs.mm_kwargs, mm_inputs.mm_placeholders)

    def get_encoder_dummy_data(self, seq_len: int, mm_counts: Optional[dict[str, int]] = None) -> DummyEncoderData:
        """Encoder prompt of the dummy request (Whisper: 1500 zeros; may exceed ``seq_len``)."""
        mm_inputs = self._get_dummy_mm_inputs(seq_len, mm_counts)
        return DummyEncoderData(list(mm_inputs.encoder_prompt_token_ids or []))
