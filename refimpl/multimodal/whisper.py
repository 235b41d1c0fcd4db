"""Whisper multimodal processing: processing info, dummy audio, encoder prompt.

Mirrors the Whisper processing info, dummy builder and processor of
``vllm/model_executor/models/whisper.py`` (0.9 to 0.10.2) around the real ``WhisperProcessor``.
The processing info and the dummy builder live in whisper_info.py (the dry plan's, no transformers
import) and are importable from here. Left out: resampling (16 kHz required), multi-channel audio, transcription prompt helpers.
"""
from __future__ import annotations

from functools import lru_cache

from transformers import WhisperFeatureExtractor, WhisperProcessor

from refimpl.config import get_preprocessor_dict
from refimpl.multimodal.processing import EncDecMultiModalProcessor
from refimpl.multimodal.whisper_info import WhisperDummyInputsBuilder, WhisperProcessingInfo  # noqa: F401 - here before the split
from refimpl.tokenizer import get_tokenizer


@lru_cache(maxsize=8)
def build_hf_processor(model: str, overrides: tuple = ()):
    """The HF ``WhisperProcessor`` of ``model`` (cached per model and override tuple)."""
    d = {k: v for k, v in get_preprocessor_dict(model).items()
         if k not in ("feature_extractor_type", "processor_class")}
    d.update(dict(overrides))
    return WhisperProcessor(feature_extractor=WhisperFeatureExtractor(**d), tokenizer=get_tokenizer(model))


class WhisperMultiModalProcessor(EncDecMultiModalProcessor):
    hf_applies_updates = False  # WhisperProcessor does not expand placeholders

    def create_encoder_prompt(self, prompt, mm_data) -> list[int]:
        return [0]

    def _get_hf_inputs(self, hf, text, items):
        if "audio" not in items:
            return dict(text=text)
        return dict(text=text, audio=items["audio"], sampling_rate=hf.feature_extractor.sampling_rate)

    def _postprocess_hf_outputs(self, out):
        if "labels" in out:  # text with audio: the tokenized text comes back as labels
            out["input_ids"] = out.pop("labels")
        return out

    def _get_mm_fields_config(self):
        return {"input_features": ("audio", None)}

    def _get_prompt_updates(self, mm_kwargs):
        n = self.info.get_num_audio_tokens()
        return {"audio": ([0], [[0] * n for _ in mm_kwargs.get("audio", [])])}
