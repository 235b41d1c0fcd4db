"""The byte paths of vLLM's ``MultiModalHasher`` by release and the copies each makes (names only, no
torch: the start-up plans and the explorer page read these; the hashing is ``refimpl.multimodal.hasher``,
which re-exports both).

Mirrors ``vllm/multimodal/hasher.py`` of 0.8.5, 0.9.0, 0.9.2 and 0.11.0 (see ``hasher``'s docstring).
"""
from __future__ import annotations

BYTE_PATHS = ("v0.8.5", "v0.9.0", "v0.9.2", "stream")
# Full copies of an item's bytes one hash makes, per byte path and kind of item: a numpy array
# ("ndarray") or a PIL image ("image": 0.9's RGBA conversion and its join); start-up plans read it.
HASH_COPIES: dict[str, dict[str, int]] = {
    "v0.8.5": {"ndarray": 1, "image": 1}, "v0.9.0": {"ndarray": 3, "image": 6},
    "v0.9.2": {"ndarray": 2, "image": 4}, "stream": {"ndarray": 0, "image": 1}}

__all__ = ["BYTE_PATHS", "HASH_COPIES"]
