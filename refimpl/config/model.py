"""ModelConfig and the shipped model data: which model, at which scale, on which device.

Mirrors ``ModelConfig`` of ``vllm/config/model.py`` (``config/__init__.py`` before 0.11.0),
reduced to what the studies need; configs ship under ``refimpl/data/<model>/`` (no hub);
``scale="small"`` shrinks the transformer and keeps the real processor.
"""
from __future__ import annotations

import copy
import json
import numbers
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any, Literal, Optional

from refimpl.config.checks import check_count, check_mm_processor_kwargs, check_model_dir, check_size
from refimpl.errors import ConfigError, UnknownModelError
from refimpl.variants import MultiModalSwitches

SUPPORTED_MODELS = ("qwen2.5-vl-3b", "whisper-tiny", "whisper-tiny.en", "whisper-large-v3")
LOAD_FORMATS = ("auto", "dummy", "ct2", "hf")
# Models with real weights shipped in a pinned package (load_format "auto" -> "ct2").
REAL_WEIGHT_MODELS = ("whisper-tiny.en",)
SCALES = ("auto", "full", "small")

# Model-scale switch for CPU runs: the real processor (so dummy data keeps its real size)
# with a shrunken transformer. Only the fields below change; ids, vocab, patch sizes and
# encoder lengths stay those of the real model.
_SMALL_SCALE: dict[str, dict[str, Any]] = {
    "qwen2.5-vl-3b": {
        "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2,
        # mrope_section must sum to head_dim / 2: 256 / 4 heads / 2 = 32 (full model: 64)
        "rope_scaling": {"type": "mrope", "mrope_section": [8, 12, 12]},
        "vision_config": {"depth": 2, "hidden_size": 128, "intermediate_size": 256,
                          "num_heads": 2, "out_hidden_size": 256,
                          "fullatt_block_indexes": []},
    },
    "whisper-tiny": {},
    "whisper-tiny.en": {},
    "whisper-large-v3": {
        "d_model": 384, "encoder_layers": 4, "decoder_layers": 4, "num_hidden_layers": 4,
        "encoder_attention_heads": 6, "decoder_attention_heads": 6,
        "encoder_ffn_dim": 1536, "decoder_ffn_dim": 1536,
    },
}


def _deep_update(base: dict, upd: dict) -> dict:
    for k, v in upd.items():
        if isinstance(v, dict) and isinstance(base.get(k), dict):
            _deep_update(base[k], v)
        else:
            base[k] = v
    return base


@lru_cache(maxsize=None)
def _load_json(model: str, name: str) -> str:
    return resources.files("refimpl").joinpath("data", model, name).read_text()


def check_model(model: str) -> str:
    """Return ``model`` if it is supported. Raises UnknownModelError naming the choices."""
    if model not in SUPPORTED_MODELS:
        raise UnknownModelError("model", SUPPORTED_MODELS, f"unknown model {model!r}")
    return model


def get_config_dict(model: str, scale: str = "full") -> dict[str, Any]:
    """The model's ``config.json`` (dict), shrunk by the ``small`` scale. Raises UnknownModelError."""
    d = json.loads(_load_json(check_model(model), "config.json"))
    return _deep_update(d, copy.deepcopy(_SMALL_SCALE[model])) if scale == "small" else d


def get_preprocessor_dict(model: str) -> dict[str, Any]:
    """The model's ``preprocessor_config.json`` (dict). Raises UnknownModelError."""
    return json.loads(_load_json(check_model(model), "preprocessor_config.json"))


def resolve_device(device: str = "auto") -> str:
    """'auto' -> 'cuda' when torch sees a GPU, else 'cpu'. Raises ConfigError("device") for another
    name, or for 'cuda' where torch sees no GPU (refused before anything runs)."""
    if device not in ("auto", "cpu", "cuda"):
        raise ConfigError("device", ("auto", "cpu", "cuda"), f"unknown device {device!r}")
    if device == "cpu":
        return device
    import torch  # here, not at the top: the CLI's --help and refusals import this module

    if torch.cuda.is_available():
        return "cuda"
    if device == "cuda":
        raise ConfigError("device", "the devices available here: auto, cpu",
                          "CUDA is not available here (torch.cuda.is_available() is False)")
    return "cpu"


@dataclass
class ModelConfig:
    """Which model, at which scale, with which multimodal limits.

    ``max_model_len`` (tokens): default ``max_position_embeddings`` (Qwen2.5-VL-3B: 128000) or
    ``max_target_positions`` (Whisper: 448). ``mm_processor_cache_gb`` (GiB, 0: off);
    ``disable_mm_preprocessor_cache``: the user's "cache off" for real requests.
    ``load_format``: "dummy" random weights, "ct2" the real whisper-tiny.en weights
    (worker/ct2_loader.py), "hf" the local directory ``model_path``; "auto": ct2 for
    whisper-tiny.en, else dummy. ``limit_mm_per_prompt``: items per modality (default 1; Whisper
    at most 1 audio). ``rgba_background_color``: (R, G, B) 0-255 that images with transparency are
    composited over before hashing and processing (vLLM's ``media_io_kwargs`` image option of
    that name; white by default). Raises ConfigError / UnknownModelError naming the field."""
    model: str
    max_model_len: int = None  # type: ignore[assignment]  # None: derived in __post_init__
    scale: str = "auto"
    device: str = "auto"
    dtype: str = "auto"
    limit_mm_per_prompt: dict[str, int] = field(default_factory=dict)
    mm_processor_kwargs: dict[str, Any] = field(default_factory=dict)
    mm_processor_cache_gb: float = 4.0
    disable_mm_preprocessor_cache: bool = False
    load_format: Literal["auto", "dummy", "ct2", "hf"] = "auto"
    model_path: Optional[str] = None
    seed: int = 0
    mm_switches: MultiModalSwitches = field(default_factory=MultiModalSwitches)
    rgba_background_color: tuple[int, int, int] = (255, 255, 255)

    def __post_init__(self):
        check_model(self.model)
        c = self.rgba_background_color
        if not (isinstance(c, (tuple, list)) and len(c) == 3
                and all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 255 for v in c)):
            raise ConfigError("rgba_background_color", "(R, G, B), each an int in [0, 255]", f"got {c!r}")
        self.rgba_background_color = (int(c[0]), int(c[1]), int(c[2]))
        self.device = resolve_device(self.device)
        if self.scale not in SCALES:
            raise ConfigError("scale", SCALES, f"unknown scale {self.scale!r}")
        if self.scale == "auto":
            self.scale = "full" if self.device == "cuda" else "small"
        if self.dtype == "auto":
            self.dtype = "float32" if self.device == "cpu" else (
                "float16" if self.is_encoder_decoder else "bfloat16")
        if self.dtype not in ("float32", "float16", "bfloat16"):
            raise ConfigError("dtype", ("float32", "float16", "bfloat16"), repr(self.dtype))
        limit = self.derived_max_model_len
        if self.max_model_len is None:
            self.max_model_len = limit
        n = self.max_model_len
        if isinstance(n, numbers.Integral) and not isinstance(n, bool):  # numpy's ints too
            n = int(n)
        self.max_model_len = n = check_count("max_model_len", n)  # the guard's rule: an int >= 1
        if n > limit:
            raise ConfigError("max_model_len", limit, f"got {n}, beyond the model's {limit} positions")
        modalities = ("audio",) if self.is_encoder_decoder else ("image", "video")
        for k, v in self.limit_mm_per_prompt.items():
            if k not in modalities:
                raise ConfigError("limit_mm_per_prompt", modalities, f"unknown modality {k!r}")
            if not isinstance(v, int) or v < 0:
                raise ConfigError(f"limit_mm_per_prompt[{k}]", ">= 0", f"got {v!r}")
            if self.is_encoder_decoder and v > 1:  # vLLM's whisper.py get_supported_mm_limits
                raise ConfigError(f"limit_mm_per_prompt[{k}]", "<= 1 (Whisper takes one audio "
                                  "per prompt)", f"got {v}")
        check_size("mm_processor_cache_gb", self.mm_processor_cache_gb)
        check_mm_processor_kwargs(self.model, self.mm_processor_kwargs, get_preprocessor_dict(self.model))
        if self.load_format not in LOAD_FORMATS:
            raise ConfigError("load_format", LOAD_FORMATS, f"unknown load format {self.load_format!r}")
        if self.load_format == "auto":
            self.load_format = "ct2" if self.model in REAL_WEIGHT_MODELS else "dummy"
        if self.load_format == "ct2" and self.model not in REAL_WEIGHT_MODELS:
            raise ConfigError("load_format", f"'ct2' only for {REAL_WEIGHT_MODELS}",
                              f"no real weights ship for {self.model}")
        if self.load_format == "hf":  # this config's run loads the directory's weights
            check_model_dir(self.model_path, weights=True)

    @property
    def hf_config_dict(self) -> dict[str, Any]:
        return get_config_dict(self.model, self.scale)

    @property
    def is_encoder_decoder(self) -> bool:
        return self.model.startswith("whisper")

    @property
    def derived_max_model_len(self) -> int:
        d = get_config_dict(self.model)
        return d["max_target_positions"] if self.is_encoder_decoder else d["max_position_embeddings"]

    @property
    def max_encoder_len(self) -> int:
        """The model's own encoder length in tokens (Whisper: ``max_source_positions`` = 1500), never
        the scheduler's budget."""
        return get_config_dict(self.model)["max_source_positions"] if self.is_encoder_decoder else 0

    @property
    def mm_cache_bytes(self) -> int:
        return int(self.mm_processor_cache_gb * (1 << 30))

    def get_mm_limit(self, modality: str) -> int:
        """Items of ``modality`` allowed per prompt (default 1, as vLLM)."""
        return self.limit_mm_per_prompt.get(modality, 1)
