"""Hypothesis strategies for multimodal items and processing-cache operations (optional: needs
hypothesis; ImportError saying so). Small items that the processors accept unless said
otherwise: every PIL mode that converts to RGB, uint8 arrays, PNG / JPEG bytes, uint8 videos,
float32 16 kHz audio.
"""
from __future__ import annotations

import io
from typing import Any, Optional, Sequence

import numpy as np
from PIL import Image

try:
    from hypothesis import strategies as st
except ImportError as e:  # pragma: no cover - exercised in the core-only venv
    raise ImportError("refimpl.testing.strategies needs hypothesis: pip install 'refimpl[lab]' "
                      "(or pip install hypothesis)") from e

# Every PIL mode refimpl's processors accept (converted to RGB); "La" is refused
# (premultiplied alpha, no conversion to RGB): see docs/reliability.md.
IMAGE_MODES: tuple[str, ...] = ("1", "L", "LA", "P", "PA", "RGB", "RGBA", "RGBa", "RGBX", "CMYK",
                                "YCbCr", "LAB", "HSV", "I", "I;16", "I;16B", "I;16L", "F")
SAMPLING_RATE = 16000


def _pixels(draw, mode: str, w: int, h: int) -> Image.Image:
    """A ``mode`` image of random pixels (seeded by hypothesis); "I" / "F" values finite and
    within +-2**20, 16-bit modes over their whole range."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if mode in ("I", "F"):
        data = rng.integers(-2**20, 2**20, (h, w)).astype(np.int32 if mode == "I" else np.float32)
        return Image.frombytes(mode, (w, h), data.tobytes())
    if mode.startswith("I;16"):
        data = rng.integers(0, 65536, (h, w)).astype(">u2" if mode == "I;16B" else "<u2")
        return Image.frombytes(mode, (w, h), data.tobytes())
    size = ((w + 7) // 8) * h if mode == "1" else w * h * len(Image.new(mode, (1, 1)).getbands())
    return Image.frombytes(mode, (w, h), rng.integers(0, 256, size, dtype=np.uint8).tobytes())


@st.composite
def images(draw, modes: Sequence[str] = IMAGE_MODES, min_side: int = 1, max_side: int = 48,
           max_ratio: int = 200) -> Image.Image:
    """PIL images of ``modes`` (default every accepted mode) with random pixels, sides in
    [min_side, max_side] and aspect ratio <= max_ratio. "P" / "PA" images get a random RGB or
    RGBA palette; "P", "L" and "RGB" images sometimes a ``transparency`` key in ``info``."""
    mode = draw(st.sampled_from(list(modes)))
    w = draw(st.integers(min_side, max_side))
    h = draw(st.integers(max(min_side, -(-w // max_ratio)), min(max_side, w * max_ratio)))
    img = _pixels(draw, mode, w, h)
    if mode in ("P", "PA"):
        pal_mode = draw(st.sampled_from(["RGB", "RGBA"]))
        n = draw(st.integers(1, 256))
        img.putpalette(draw(st.binary(min_size=n * len(pal_mode), max_size=n * len(pal_mode))), pal_mode)
    if mode in ("P", "L") and draw(st.booleans()):
        img.info["transparency"] = draw(st.integers(0, 255))
    elif mode == "RGB" and draw(st.booleans()):
        img.info["transparency"] = tuple(draw(st.integers(0, 255)) for _ in range(3))
    return img


@st.composite
def image_arrays(draw, min_side: int = 1, max_side: int = 48) -> np.ndarray:
    """uint8 arrays (H, W) or (H, W, C) with C in 1, 3, 4 (aspect ratio <= 200)."""
    h = draw(st.integers(min_side, max_side))
    w = draw(st.integers(max(min_side, -(-h // 200)), min(max_side, 200 * h)))
    shape = (h, w) + tuple(draw(st.sampled_from([(), (1,), (3,), (4,)])))
    return np.random.default_rng(draw(st.integers(0, 2**32 - 1))).integers(0, 256, shape, dtype=np.uint8)


@st.composite
def encoded_images(draw, formats: Sequence[str] = ("PNG", "JPEG"), max_side: int = 48) -> bytes:
    """PNG / JPEG bytes of RGB (JPEG) or any PNG-writable mode's images."""
    fmt = draw(st.sampled_from(list(formats)))
    modes = ("RGB", "L") if fmt == "JPEG" else ("RGB", "RGBA", "L", "LA", "P", "1", "I;16")
    img = draw(images(modes=modes, max_side=max_side))
    buf = io.BytesIO()
    img.save(buf, format=fmt)
    return buf.getvalue()


@st.composite
def videos(draw, max_frames: int = 6, min_side: int = 28, max_side: int = 64) -> np.ndarray:
    """(T, H, W, 3) uint8 videos, T in [1, max_frames] (one frame is padded to two by the HF
    processor), random pixels."""
    t, h, w = (draw(st.integers(1, max_frames)), draw(st.integers(min_side, max_side)),
               draw(st.integers(min_side, max_side)))
    seed = draw(st.integers(0, 2**32 - 1))
    return np.random.default_rng(seed).integers(0, 256, (t, h, w, 3), dtype=np.uint8)


@st.composite
def audios(draw, max_seconds: float = 2.0, with_rate: Optional[bool] = None) -> Any:
    """float32 mono audio in [-1, 1] of 1 to ``max_seconds * 16000`` samples; with
    ``with_rate`` (default: drawn) as an ``(array, 16000)`` tuple."""
    n = draw(st.integers(1, int(max_seconds * SAMPLING_RATE)))
    seed = draw(st.integers(0, 2**32 - 1))
    a = np.random.default_rng(seed).uniform(-1, 1, n).astype(np.float32)
    return (a, SAMPLING_RATE) if (draw(st.booleans()) if with_rate is None else with_rate) else a


# torch dtypes a caller may hand over: some NumPy lacks (bfloat16, float8), some a parser refuses
TENSOR_DTYPES: tuple[str, ...] = ("float32", "float16", "bfloat16", "float64", "float8_e4m3fn",
                                  "float8_e5m2", "complex64", "bool", "uint8", "int16", "int64")


@st.composite
def as_tensors(draw, items: st.SearchStrategy, dtypes: Sequence[str] = TENSOR_DTYPES) -> Any:
    """An array item of ``items`` as a torch tensor of one of ``dtypes``, sometimes with
    ``requires_grad`` (floating dtypes), non-contiguous (a strided view of a copy twice as wide)
    or on the meta device (no data: refused). Needs torch."""
    import torch
    a = draw(items)
    if isinstance(a, tuple):  # (array, rate)
        a = a[0]
    dtype = getattr(torch, draw(st.sampled_from(list(dtypes))))
    t = torch.from_numpy(np.ascontiguousarray(a))
    t = (t > t.float().mean()) if dtype == torch.bool else t.to(dtype)
    how = draw(st.sampled_from(["plain", "requires_grad", "non-contiguous", "meta"]))
    if how == "requires_grad" and (t.dtype.is_floating_point or t.dtype.is_complex) and t.dtype.itemsize >= 2:
        t = t.clone().requires_grad_()
    elif how == "non-contiguous":
        wide = torch.stack([t, t], dim=-1)
        t = wide[..., 1]
    elif how == "meta":
        t = torch.empty(t.shape, dtype=t.dtype, device="meta")
    return t


def mm_items(modality: str) -> st.SearchStrategy:
    """Items of ``modality``: "image" (PIL images, arrays, encoded bytes), "video", "audio"."""
    return {"image": st.one_of(images(), image_arrays(), encoded_images()), "video": videos(),
            "audio": audios()}[modality]


def cache_ops(num_keys: int = 8, max_nbytes: int = 4096) -> st.SearchStrategy:
    """Lists of processing-cache operations to replay on a cache and a ReferenceLRU:
    ("get", key), ("put", key, nbytes), ("set_capacity", nbytes), ("reset",)."""
    keys = st.sampled_from([f"k{i}" for i in range(num_keys)])
    return st.lists(st.one_of(
        st.tuples(st.just("get"), keys),
        st.tuples(st.just("put"), keys, st.integers(0, max_nbytes)),
        st.tuples(st.just("set_capacity"), st.integers(0, 4 * max_nbytes)),
        st.tuples(st.just("reset"))), max_size=60)


__all__ = ["IMAGE_MODES", "TENSOR_DTYPES", "as_tensors", "audios", "cache_ops", "encoded_images", "image_arrays", "images", "mm_items",
           "videos"]
