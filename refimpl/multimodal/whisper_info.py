"""Whisper's processing info (feature sizes, encoder positions) and dummy audio.

Mirrors the Whisper processing info and dummy builder of ``vllm/model_executor/models/whisper.py``
(0.9 to 0.10.2). Apart from the processor and the HF ``WhisperProcessor`` (refimpl/multimodal/whisper.py,
which imports transformers) so that the dry start-up plan (``MultiModalBudget(dry=True)``) imports no
transformers module; both names importable from whisper too.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from refimpl.config import get_preprocessor_dict
from refimpl.multimodal.inputs import MultiModalInputs, PlaceholderRange
from refimpl.multimodal.processing_context import BaseProcessingInfo
from refimpl.multimodal.profiling import BaseDummyInputsBuilder


class WhisperProcessingInfo(BaseProcessingInfo):
    modalities = ("audio",)
    dry = False  # True: sizes from the configs, no HF processor (MultiModalBudget(dry=True))

    def get_hf_processor(self):
        from refimpl.multimodal.whisper import build_hf_processor  # the wet path has imported it already

        return build_hf_processor(self.model_id, tuple(sorted(  # lists as tuples: a cache key
            (k, tuple(v) if isinstance(v, list) else v) for k, v in self.mm_processor_kwargs.items())))

    def get_feature_extractor(self):
        return self.get_hf_processor().feature_extractor

    def get_feature_dims(self) -> tuple[int, int, int, int]:
        """(feature_size mel bins, chunk_length s, sampling_rate Hz, hop_length samples) of the feature
        extractor: the HF one's, or (dry) preprocessor_config.json under ``mm_processor_kwargs`` with
        WhisperFeatureExtractor's defaults (80, 30, 16000, 160)."""
        if self.dry:
            d = {"feature_size": 80, "chunk_length": 30, "sampling_rate": 16000, "hop_length": 160,
                 **get_preprocessor_dict(self.model_id), **self.mm_processor_kwargs}
        else:
            fe = self.get_feature_extractor()
            d = {k: getattr(fe, k) for k in ("feature_size", "chunk_length", "sampling_rate", "hop_length")}
        return d["feature_size"], d["chunk_length"], d["sampling_rate"], d["hop_length"]

    def get_num_audio_tokens(self) -> int:
        """Encoder positions per audio: ``max_source_positions`` (1500)."""
        return self.hf_config["max_source_positions"]

    def get_item_tokens(self, spec: tuple) -> int:
        """Encoder positions of a dummy item ``("audio", samples)``: 1500 for any length."""
        return self.get_num_audio_tokens()

    def get_processed_item_bytes(self, spec: tuple) -> int:
        """Bytes of its float32 ``input_features``: mel bins x 3000 frames x 4."""
        mels, chunk, rate, hop = self.get_feature_dims()
        return mels * (chunk * rate // hop) * 4

    def get_max_tokens_per_item(self, seq_len: int, mm_counts: dict[str, int]) -> dict[str, int]:
        return {"audio": self.get_num_audio_tokens()} if mm_counts.get("audio", 0) > 0 else {}


class WhisperDummyInputsBuilder(BaseDummyInputsBuilder):
    def get_dummy_text(self, mm_counts: dict[str, int]) -> str:
        return "<|startoftranscript|>" * mm_counts.get("audio", 0)

    def get_dummy_item_specs(self, seq_len: int, mm_counts: dict[str, int],
                             fit_counts: Optional[dict[str, int]] = None) -> dict[str, list[tuple]]:
        """``{"audio": [("audio", 480000)] * n}``: 30 s at 16 kHz, independent of seq_len."""
        _, chunk, rate, _ = self.info.get_feature_dims()
        return {"audio": [("audio", chunk * rate)] * mm_counts.get("audio", 0)}

    def get_dummy_mm_data(self, seq_len: int, mm_counts: dict[str, int],
                          fit_counts: Optional[dict[str, int]] = None) -> dict[str, list[Any]]:
        """``{"audio": [zeros(480000)] * n}`` in ``mm_switches.dummy_audio_dtype``, whatever ``seq_len``."""
        specs = self.get_dummy_item_specs(seq_len, mm_counts)["audio"]
        dtype = np.dtype(self.info.switches.dummy_audio_dtype)
        return {"audio": self._get_dummy_audios(specs[0][1], len(specs), dtype) if specs else []}

    def get_dummy_processed_inputs(self, seq_len: int, mm_counts: dict[str, int],
                                   fit_counts: Optional[dict[str, int]] = None, device=None) -> MultiModalInputs:
        """The processed dummy audio without processing: ``input_features`` (mel bins, 3000) float32
        zeros per audio, 1500 encoder zeros, the tokenized dummy text; ``device="meta"``: no memory."""
        import torch  # here, not at the top: the dry plan (the explorer page) reads this module, no tensor

        fe, n = self.info.get_feature_extractor(), mm_counts.get("audio", 0)
        frames = fe.chunk_length * fe.sampling_rate // fe.hop_length
        tokens = self.info.get_num_audio_tokens()
        dec = self.info.get_tokenizer().encode(self.get_dummy_text(mm_counts), add_special_tokens=False)
        return MultiModalInputs(
            prompt_token_ids=dec, mm_hashes={},
            mm_kwargs={"audio": [{"input_features": torch.zeros(fe.feature_size, frames, device=device)}
                                 for _ in range(n)]} if n else {},
            mm_placeholders={"audio": [PlaceholderRange(i * tokens, tokens) for i in range(n)]} if n else {},
            encoder_prompt_token_ids=[0] * (tokens * n))
