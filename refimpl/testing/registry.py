"""Registries for tests: the global one emptied for the duration of a test, and a counting
stand-in for the encoder-length lookups.

Components take their registry from ``VllmConfig.mm_registry`` (or a ``mm_registry=``
argument, which they set there), so a test that builds its engine on
``MultiModalRegistry()`` leaves the global one alone; ``fresh_registry`` is for code that
reaches the global ``MULTIMODAL_REGISTRY`` (vLLM's idiom, and every config built without a
registry).
"""
from __future__ import annotations

import contextlib
from typing import Iterator, Optional

from refimpl.multimodal import MULTIMODAL_REGISTRY, MultiModalRegistry, ProcessingCache, ProcessingStats


@contextlib.contextmanager
def fresh_registry(registry: MultiModalRegistry = MULTIMODAL_REGISTRY) -> Iterator[MultiModalRegistry]:
    """Empty ``registry`` (default the global one) for the ``with`` block, then restore it.

    Inside: a new ProcessingCache of the same capacity and zeroed ``stats``, on the same
    registry object (code holding ``MULTIMODAL_REGISTRY`` sees them). Afterwards: the original
    cache (entries, LRU order, counters) and stats are back, whatever the block did. Yields
    the registry.
    """
    saved = registry._processing_cache, registry.stats
    registry._processing_cache = ProcessingCache(saved[0].capacity_bytes)
    registry.stats = ProcessingStats(_cache=registry._processing_cache)
    try:
        yield registry
    finally:
        registry._processing_cache, registry.stats = saved


class FakeRegistry:
    """Stand-in for the encoder-length lookup: counts ``get_encdec_max_encoder_len`` calls
    (``calls``) and returns ``value``, or the model's own encoder length (1500 for Whisper)
    when ``value`` is None. Builds no processor. Pass it as ``mm_registry`` to
    ``create_vllm_config`` to count the reads of the registry-reading variants."""

    def __init__(self, value: Optional[int] = None):
        self.value = value
        self.calls = 0

    def get_encdec_max_encoder_len(self, model_config) -> int:
        self.calls += 1
        return self.value if self.value is not None else model_config.max_encoder_len
