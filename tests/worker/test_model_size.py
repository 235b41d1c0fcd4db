"""Parameter counts from config.json (refimpl/worker/model_size.py) against the HF model on the meta device."""
import copy

import pytest
import torch
from transformers.initialization import no_init_weights

from refimpl.config import ModelConfig
from refimpl.config.model import SUPPORTED_MODELS, get_config_dict
from refimpl.worker import model_loader, model_size


def _meta_count(config_dict: dict) -> int:
    cfg = model_loader.build_hf_config(config_dict)
    with no_init_weights(), torch.device("meta"):
        m = model_loader._model_class(cfg.model_type)._from_config(cfg, dtype=torch.float32)
    m.tie_weights()
    return sum(p.numel() for p in m.parameters())


@pytest.mark.parametrize("scale", ["small", "full"])
@pytest.mark.parametrize("model", SUPPORTED_MODELS)
def test_the_count_from_config_json_is_the_meta_models(model, scale):
    d = get_config_dict(model, scale)
    assert model_size.parameter_count(copy.deepcopy(d)) == _meta_count(d)


@pytest.mark.parametrize("model", ["whisper-tiny", "qwen2.5-vl-3b"])
def test_untied_heads_are_counted(model):
    d = get_config_dict(model, "small") | {"tie_word_embeddings": False}
    tied = model_size.parameter_count(get_config_dict(model, "small"))
    assert model_size.parameter_count(copy.deepcopy(d)) == _meta_count(d) > tied


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_parameter_bytes_keeps_its_name_and_units(dtype):
    mc = ModelConfig("whisper-tiny", device="cpu", dtype=dtype)
    n = _meta_count(get_config_dict("whisper-tiny"))
    assert model_loader.parameter_bytes(mc) == n * getattr(torch, dtype).itemsize == model_size.parameter_bytes(mc) \
        == model_loader.meta_parameter_bytes(mc)


def test_an_architecture_the_kit_does_not_ship_is_a_key_error():
    with pytest.raises(KeyError):
        model_size.parameter_count({"model_type": "llama"})
