"""A torch check that imports no torch: the modules the explorer page reaches (the processing cache,
the item parsers, the processor's output types) ask ``is_tensor`` instead of ``isinstance(x, torch.Tensor)``.

No object is a ``torch.Tensor`` before torch is imported, so the answer needs no import: one dict
lookup in ``sys.modules`` per call. Code that then works on the tensor imports torch in that branch
(already imported: a lookup, no import runs). tests/lab/explore/test_explorer_imports.py checks that the page
imports no torch.
"""
from __future__ import annotations

import sys
from typing import Any

__all__ = ["is_tensor"]


def is_tensor(x: Any) -> bool:
    """``isinstance(x, torch.Tensor)``; False, importing nothing, while torch is not imported."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)
