"""Multimodal processing (vLLM ``vllm/multimodal/``): registry, processing cache, dummy inputs,
and the Qwen2.5-VL and Whisper processors.
"""
from refimpl.multimodal.cache import MultiModalHasher, ProcessingCache
from refimpl.multimodal.inputs import MultiModalInputs, PlaceholderRange
from refimpl.multimodal.profiling import BaseDummyInputsBuilder, MultiModalProfiler
from refimpl.multimodal.registry import MULTIMODAL_REGISTRY, MultiModalRegistry, ProcessingStats

__all__ = ["MULTIMODAL_REGISTRY", "MultiModalRegistry", "ProcessingCache", "MultiModalHasher",
           "BaseDummyInputsBuilder", "MultiModalProfiler", "MultiModalInputs", "PlaceholderRange",
           "ProcessingStats"]
