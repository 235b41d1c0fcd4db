"""Registries for tests: the global one emptied for a test, and a counting stand-in for the
encoder-length lookups (components given ``MultiModalRegistry()`` leave the global one alone).
"""
from __future__ import annotations

import contextlib
from typing import Iterator, Optional

from refimpl.multimodal import MULTIMODAL_REGISTRY, MultiModalRegistry, ProcessingCache, ProcessingStats


@contextlib.contextmanager
def fresh_registry(registry: MultiModalRegistry = MULTIMODAL_REGISTRY) -> Iterator[MultiModalRegistry]:
    """Empty ``registry`` (default the global one) for the ``with`` block: a new ProcessingCache of the
    same capacity and zeroed stats on the same object; the original cache and stats are back
    after, whatever the block did. Yields the registry."""
    saved = registry._processing_cache, registry.stats
    registry._processing_cache = ProcessingCache(saved[0].capacity_bytes)
    registry.stats = ProcessingStats(_cache=registry._processing_cache)
    try:
        yield registry
    finally:
        registry._processing_cache, registry.stats = saved


class FakeRegistry:
    """Counts ``get_encdec_max_encoder_len`` calls (``calls``) and returns ``value`` or the model's own
    encoder length; builds no processor. Pass it as ``mm_registry`` to ``create_vllm_config``."""

    def __init__(self, value: Optional[int] = None):
        self.value = value
        self.calls = 0

    def get_encdec_max_encoder_len(self, model_config) -> int:
        self.calls += 1
        return self.value if self.value is not None else model_config.max_encoder_len
