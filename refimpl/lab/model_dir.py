"""A local HF directory as a config, for the start-up bench (``--model-path``), the explorer and the
cost check alike: the shipped model of its family, the preprocessor settings it changes, the
ModelConfig of both. No vLLM counterpart (vLLM reads the directory itself)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from refimpl.config import ModelConfig
from refimpl.config.checks import check_model_dir
from refimpl.config.model import get_preprocessor_dict
from refimpl.errors import ConfigError

__all__ = ["local_model", "preprocessor_overrides", "model_config"]


def local_model(path: str | Path) -> str:
    """The shipped model of the local HF directory's family (from its config.json). Raises
    ConfigError("model_path") without its two configs or for another family."""
    d = check_model_dir(path, weights=False)
    cfg = json.loads((d / "config.json").read_text())
    kind = cfg.get("model_type")
    if kind == "qwen2_5_vl":
        return "qwen2.5-vl-3b"
    if kind == "whisper":
        return "whisper-large-v3" if cfg.get("num_mel_bins") == 128 else \
            "whisper-tiny.en" if cfg.get("vocab_size") == 51864 else "whisper-tiny"
    raise ConfigError("model_path", "a Qwen2.5-VL or Whisper config.json", f"model_type {kind!r}")


def preprocessor_overrides(model: str, path: str | Path) -> dict[str, Any]:
    """The settings of the directory's preprocessor_config.json that ``model``'s shipped one has with
    another value; class names (``processor_class``, ``*_type``) left out."""
    shipped = get_preprocessor_dict(model)
    local = json.loads((Path(path) / "preprocessor_config.json").read_text())
    return {k: v for k, v in local.items()
            if k in shipped and v != shipped[k] and not k.endswith("_type") and k != "processor_class"}


def model_config(model: str, *, model_path: Optional[str] = None, load_weights: bool = True,
                 mm_processor_kwargs: Optional[dict[str, Any]] = None, **kw: Any) -> ModelConfig:
    """The ModelConfig of ``model``, or of ``model`` read from the local directory ``model_path``: its
    preprocessor overrides under ``mm_processor_kwargs`` (these win), its weights when
    ``load_weights`` (load_format "hf"; else the model's default: a plan loads nothing). ``kw`` go
    to ModelConfig. Raises ConfigError naming the field."""
    over = {}
    if model_path:
        check_model_dir(model_path, weights=load_weights)
        over = preprocessor_overrides(model, model_path)
    return ModelConfig(model, model_path=model_path, load_format="hf" if model_path and load_weights else "auto",
                       mm_processor_kwargs={**over, **(mm_processor_kwargs or {})}, **kw)
