"""Palette images with the same indices and different palettes get different cache keys (the same-key-same-output properties are in tests/multimodal/test_cache_key_content.py)."""
from __future__ import annotations

import numpy as np

from tests.multimodal.utils import _equal, _image, _key_and_output


def test_palette_images_get_different_keys():
    """The issue's input: two "P" images, same indices, different palettes."""
    idx = np.arange(16, dtype=np.uint8).reshape(4, 4)
    a, b = (_image("P", idx, pal) for pal in (list(range(48)), list(range(48))[::-1]))
    (ka, oa), (kb, ob) = _key_and_output("image", a), _key_and_output("image", b)
    assert not _equal(oa, ob) and ka != kb
