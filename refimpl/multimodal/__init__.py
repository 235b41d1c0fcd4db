"""Multimodal processing (vLLM ``vllm/multimodal/``): registry, processing cache, dummy inputs,
and the Qwen2.5-VL and Whisper processors.

The names below load on first use (PEP 562): importing one light submodule (``hash_paths``,
``encoder_budget``) imports no torch, so the explorer page, which reads those, starts without it
(tests/lab/explore/test_explorer_imports.py). ``from refimpl.multimodal import X`` works as before.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from refimpl.multimodal.cache import MultiModalHasher, ProcessingCache
    from refimpl.multimodal.inputs import MultiModalInputs, PlaceholderRange
    from refimpl.multimodal.profiling import BaseDummyInputsBuilder, MultiModalProfiler
    from refimpl.multimodal.registry import MULTIMODAL_REGISTRY, MultiModalRegistry, ProcessingStats

_HOME = {"MultiModalHasher": "cache", "ProcessingCache": "cache", "MultiModalInputs": "inputs",
         "PlaceholderRange": "inputs", "BaseDummyInputsBuilder": "profiling", "MultiModalProfiler": "profiling",
         "MULTIMODAL_REGISTRY": "registry", "MultiModalRegistry": "registry", "ProcessingStats": "registry"}

__all__ = ["MULTIMODAL_REGISTRY", "MultiModalRegistry", "ProcessingCache", "MultiModalHasher",
           "BaseDummyInputsBuilder", "MultiModalProfiler", "MultiModalInputs", "PlaceholderRange",
           "ProcessingStats"]


def __getattr__(name: str) -> Any:
    """A name of ``__all__`` from its submodule, kept here after the first lookup; a submodule by name."""
    if name in _HOME:
        value = getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
        globals()[name] = value
        return value
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as e:
        if e.name != f"{__name__}.{name}":
            raise
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
