"""The HF loader needs a directory (the loader's weight tests are in tests/worker/test_model_loader.py)."""

import pytest

from refimpl.config import ModelConfig
from refimpl.errors import ConfigError
from refimpl.worker.model_loader import get_model


def _mc(model="whisper-tiny", **kw):
    kw.setdefault("device", "cpu")
    return ModelConfig(model, **kw)


def test_hf_load_needs_directory(tmp_path):
    with pytest.raises(ConfigError):
        _mc(load_format="hf", model_path=str(tmp_path / "missing"))
    with pytest.raises(ConfigError):                                  # a directory without a model
        get_model(_mc(load_format="hf", model_path=str(tmp_path)))
