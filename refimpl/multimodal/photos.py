"""A few real photos that ship inside installed wheels, for realistic image requests.

No vLLM counterpart (vLLM's examples download ``ImageAsset`` files); nothing is downloaded
here. Source: matplotlib's ``mpl-data/sample_data`` (installed with matplotlib):

- ``grace_hopper.jpg`` (512x600 RGB photo of Rear Admiral Grace Hopper; a U.S. Navy photo,
  public domain);
- ``Minduka_Present_Blue_Pack.png`` (128x128 clip-art of a present; Openclipart, released
  into the public domain);
- ``logo2.png`` (the matplotlib logo, under matplotlib's BSD-compatible license).

``pan_video`` makes a video from real frames: a camera pan across one of these photos (each
frame a crop of the photo, moved a few pixels per frame), so the video path runs on
non-constant pixels. It is synthesised from a still photo, not a recorded video.

Left out: any photo not already on disk; recorded videos (none ships in an installed wheel).
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
from PIL import Image

SAMPLE_FILES = ("grace_hopper.jpg", "Minduka_Present_Blue_Pack.png", "logo2.png")


def sample_data_dir() -> Path:
    """matplotlib's ``mpl-data/sample_data`` folder. Raises FileNotFoundError if absent."""
    import matplotlib
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
    """[(file name, RGB PIL image)] of the photos found (at least one; usually three).

    Images are decoded once per process and shared: copy before mutating.
    Raises FileNotFoundError when matplotlib's sample data is missing.
    """
    return list(_load())


def pan_video(num_frames: int = 8, size: tuple[int, int] = (336, 336), photo: int = 0) -> np.ndarray:
    """A (num_frames, height, width, 3) uint8 video: a diagonal camera pan over sample photo
    ``photo`` (grace_hopper.jpg, 512x600), frame i the ``size`` = (width, height) crop at
    offset i/(num_frames-1) of the way from the top-left to the bottom-right corner.
    Raises ValueError if ``size`` exceeds the photo or num_frames < 1."""
    _, im = _load()[photo]
    w, h = size
    if num_frames < 1 or w > im.width or h > im.height:
        raise ValueError(f"{num_frames} frames of {w}x{h} from a {im.width}x{im.height} photo")
    arr = np.asarray(im)
    steps = max(num_frames - 1, 1)
    return np.stack([arr[(im.height - h) * i // steps:][:h, (im.width - w) * i // steps:][:, :w]
                     for i in range(num_frames)])
