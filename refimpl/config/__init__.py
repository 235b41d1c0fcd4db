"""Engine configuration, as vLLM's ``vllm/config/``: ModelConfig (model.py), SchedulerConfig
(scheduler.py), CacheConfig (cache.py) and VllmConfig (vllm.py), all importable from here.

Mirrors ``vllm/config/__init__.py`` (v0.9.0 for the multimodal start-up study, v0.10.2 for
Whisper; vLLM 0.11.0 moved ModelConfig into ``model.py`` and 0.11.1 VllmConfig into
``vllm.py``, as here), in particular ``VllmConfig.__post_init__``, which for encoder-decoder models sets
``scheduler_config.max_num_encoder_input_tokens`` from
``MULTIMODAL_REGISTRY.get_encdec_max_encoder_len(model_config)`` (the value PRs #24866 and
#24989 read instead of calling the registry at run time).

Left out: parallel, LoRA, speculative, compilation and observability configs; model
loading from a hub (configs ship as JSON in ``refimpl/data``; weights are random unless
``model_path`` names a local HF directory).
"""
from refimpl.config.cache import CacheConfig
from refimpl.config.model import (
    LOAD_FORMATS,
    REAL_WEIGHT_MODELS,
    SCALES,
    SUPPORTED_MODELS,
    ModelConfig,
    check_model,
    get_config_dict,
    get_preprocessor_dict,
    resolve_device,
)
from refimpl.config.scheduler import SchedulerConfig
from refimpl.config.vllm import VllmConfig
from refimpl.variants import MultiModalSwitches

__all__ = ["CacheConfig", "LOAD_FORMATS", "ModelConfig", "MultiModalSwitches", "REAL_WEIGHT_MODELS",
           "SCALES", "SUPPORTED_MODELS", "SchedulerConfig", "VllmConfig", "check_model",
           "get_config_dict", "get_preprocessor_dict", "resolve_device"]
