"""Engine configuration, as vLLM's ``vllm/config/``: ModelConfig, SchedulerConfig, CacheConfig and
VllmConfig, all importable from here. Left out: parallel, LoRA, speculative, compilation and
observability configs; hub downloads (configs ship in ``refimpl/data``).
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
