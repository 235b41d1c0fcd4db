"""Engine configuration, as vLLM's ``vllm/config/``: ModelConfig, SchedulerConfig, CacheConfig and
VllmConfig, all importable from here. Left out: parallel, LoRA, speculative, compilation and
observability configs; hub downloads (configs ship in ``refimpl/data``). ``VllmConfig`` is imported
on first use (it brings the multimodal registry, torch and transformers), so that the configs'
checks, and the CLI's ``--help`` and refusals, start in well under a second.
"""
from typing import TYPE_CHECKING, Any

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
from refimpl.variants import MultiModalSwitches

if TYPE_CHECKING:
    from refimpl.config.vllm import VllmConfig

__all__ = ["CacheConfig", "LOAD_FORMATS", "ModelConfig", "MultiModalSwitches", "REAL_WEIGHT_MODELS",
           "SCALES", "SUPPORTED_MODELS", "SchedulerConfig", "VllmConfig", "check_model",
           "get_config_dict", "get_preprocessor_dict", "resolve_device"]


def __getattr__(name: str) -> Any:
    if name == "VllmConfig":
        from refimpl.config.vllm import VllmConfig
        return VllmConfig
    raise AttributeError(f"module 'refimpl.config' has no attribute {name!r}")
