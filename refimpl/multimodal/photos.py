"""Real photos shipped inside matplotlib's wheel (``mpl-data/sample_data``), for image requests.

grace_hopper.jpg (512x600, U.S. Navy photo, public domain), Minduka_Present_Blue_Pack.png
(128x128, public domain), logo2.png (matplotlib's license). ``pan_video`` pans a camera over
one (a video synthesised from a still). No vLLM counterpart; nothing is downloaded.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
from PIL import Image

SAMPLE_FILES = ("grace_hopper.jpg", "Minduka_Present_Blue_Pack.png", "logo2.png")


def sample_data_dir() -> Path:
    """matplotlib's ``mpl-data/sample_data`` folder. Raises FileNotFoundError if absent."""
    import matplotlib  # optional: matplotlib's sample data ([lab]); the core install lacks it
    d = Path(matplotlib.get_data_path()) / "sample_data"
    if not d.is_dir():
        raise FileNotFoundError(f"matplotlib sample data not found at {d}")
    return d


@lru_cache(maxsize=1)
def _load() -> tuple[tuple[str, Image.Image], ...]:
    d = sample_data_dir()
    out = []
    for name in SAMPLE_FILES:
        p = d / name
        if p.is_file():
            with Image.open(p) as im:
                out.append((name, im.convert("RGB")))
    if not out:
        raise FileNotFoundError(f"none of {SAMPLE_FILES} in {d}")
    return tuple(out)


def load_sample_photos() -> list[tuple[str, Image.Image]]:
    """[(file name, RGB PIL image)] of the photos found (at least one), decoded once per process
    and shared (copy before mutating). Raises FileNotFoundError without matplotlib's sample data."""
    return list(_load())


def pan_video(num_frames: int = 8, size: tuple[int, int] = (336, 336), photo: int = 0) -> np.ndarray:
    """(num_frames, height, width, 3) uint8: a diagonal pan over sample photo ``photo``, frame i the
    ``size`` = (width, height) crop i/(num_frames-1) of the way. Raises ValueError if ``size``
    exceeds the photo or num_frames < 1."""
    _, im = _load()[photo]
    w, h = size
    if num_frames < 1 or w > im.width or h > im.height:
        raise ValueError(f"{num_frames} frames of {w}x{h} from a {im.width}x{im.height} photo")
    arr = np.asarray(im)
    steps = max(num_frames - 1, 1)
    return np.stack([arr[(im.height - h) * i // steps:][:h, (im.width - w) * i // steps:][:, :w]
                     for i in range(num_frames)])
