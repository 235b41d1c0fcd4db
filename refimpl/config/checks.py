"""One check per setting a user gives, called by every entry point (ModelConfig and so the Python
API, the oracles and the engine; the bench guard and so the CLI; the explorer; the report) before
anything runs. Each raises ConfigError naming the setting and its limit. vLLM checks these in
``ModelConfig`` / ``MultiModalConfig`` and the HF processor's own ``smart_resize``.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from refimpl.errors import ConfigError

CELL_PIXELS = 28 * 28  # one Qwen2.5-VL patch-merge cell (patch 14 x merge 2, squared)
MODEL_DIR_FILES = ("config.json", "preprocessor_config.json")
WEIGHT_PATTERNS = ("*.safetensors", "pytorch_model*.bin", "model.bin")


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def check_count(field: str, value: Any, low: int = 1) -> int:
    """An int (not bool) >= ``low``: request counts, repeats, frames. Returns it."""
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise ConfigError(field, f">= {low} (an int)", f"got {value!r}")
    return value


def check_size(field: str, value: Any) -> float:
    """A finite number >= 0 (GiB or bytes of a cache). Returns it."""
    if not _is_number(value) or not math.isfinite(value) or value < 0:
        raise ConfigError(field, ">= 0 (a finite number)", f"got {value!r}")
    return value


# Keys of preprocessor_config.json that name classes, not settings (never taken as kwargs).
CLASS_KEYS = ("image_processor_type", "feature_extractor_type", "processor_class")
# Settings the model's weights are built for (patch rows, mel bins, frames): only the shipped value.
ARCH_KEYS = ("patch_size", "merge_size", "temporal_patch_size", "feature_size", "sampling_rate",
             "hop_length", "chunk_length", "n_fft", "n_samples", "nb_max_frames")


def check_mm_processor_kwargs(model: str, kwargs: dict[str, Any], shipped: dict[str, Any]) -> None:
    """``kwargs`` against ``model``'s ``shipped`` preprocessor_config.json: known setting keys only;
    each value of the shipped value's kind: a numeric setting a positive finite number (an int where
    the shipped one is), a bool a bool, a string a string, a list a list of as many numbers;
    ``min_pixels`` / ``max_pixels`` at least one 28 x 28 cell and min <= max (with the shipped
    values filled in); a setting the weights are built for (``ARCH_KEYS``) only at its shipped value.
    The model-level ``mm_processor_kwargs`` and a call's merged with them alike."""
    unknown = set(kwargs) - (set(shipped) - set(CLASS_KEYS))
    if unknown:
        raise ConfigError("mm_processor_kwargs", f"keys of {model}'s preprocessor_config.json",
                          f"unknown {', '.join(sorted(map(str, unknown)))}")
    for k, v in kwargs.items():
        d = shipped[k]
        if k in ARCH_KEYS and not (_is_number(v) and v == d):
            raise ConfigError(k, f"{d} (the model's own)", f"got {v!r}")
        if _is_number(d):
            if not _is_number(v) or not math.isfinite(v) or v <= 0 or (isinstance(d, int) and not isinstance(v, int)):
                raise ConfigError(k, f"> 0 ({'an int' if isinstance(d, int) else 'a number'})", f"got {v!r}")
        elif isinstance(d, bool) and not isinstance(v, bool):
            raise ConfigError(k, "a bool", f"got {v!r}")
        elif isinstance(d, str) and not isinstance(v, str):
            raise ConfigError(k, "a str", f"got {v!r}")
        elif isinstance(d, list) and not (isinstance(v, (list, tuple)) and len(v) == len(d)
                                          and all(_is_number(x) and math.isfinite(x) for x in v)):
            raise ConfigError(k, f"a list of {len(d)} finite numbers", f"got {v!r}")
    if "max_pixels" in shipped:
        for k in ("min_pixels", "max_pixels"):
            if k in kwargs and kwargs[k] < CELL_PIXELS:
                raise ConfigError(k, f">= {CELL_PIXELS} (one 28 x 28 cell)", f"got {kwargs[k]}")
        px = {**shipped, **kwargs}
        if px["min_pixels"] > px["max_pixels"]:
            raise ConfigError("min_pixels", f"<= max_pixels ({px['max_pixels']})", f"got {px['min_pixels']}")


def check_model_dir(path: Any, *, weights: bool) -> Path:
    """A local HF directory with config.json and preprocessor_config.json, and (``weights``: a run
    will load them) a weights file. Returns it as a Path."""
    d = Path(path) if isinstance(path, (str, Path)) else None
    limit = "a local HF directory with config.json and preprocessor_config.json"
    if d is None or not d.is_dir():
        raise ConfigError("model_path", limit, f"got {path!r}, not a directory")
    missing = [f for f in MODEL_DIR_FILES if not (d / f).is_file()]
    if missing:
        raise ConfigError("model_path", limit, f"{str(path)!r} has no {' or '.join(missing)}")
    if weights and not any(next(d.glob(p), None) for p in WEIGHT_PATTERNS):
        raise ConfigError("model_path", f"a directory with weights ({', '.join(WEIGHT_PATTERNS)}) for a run "
                          "that loads them", f"{str(path)!r} has no weights file")
    return d
