"""Parsing and validation of multimodal items: images, videos and audio as the processor takes them.

Mirrors the item parsing of ``vllm/multimodal/parse.py`` (0.9.0: ``MultiModalDataParser``) and the
image normalisation of ``vllm/multimodal/image.py``. Unlike vLLM, every malformed item is refused up
front with an InvalidInputError naming the field and the limit. Left out: embedding inputs, audio
resampling (16 kHz required), video decoding. refimpl.multimodal.inputs re-exports every name.
"""
from __future__ import annotations

import io
from functools import lru_cache
from typing import Any, Callable, Optional

import numpy as np
from PIL import Image, ImageOps

from refimpl.errors import InvalidInputError, TooManyItemsError
from refimpl.utils.lazy_torch import is_tensor  # no torch at import (the explorer page)

SAMPLING_RATE = 16000
MAX_AUDIO_S = 30
MAX_ASPECT_RATIO = 200  # smart_resize rejects more extreme images
WHITE = (255, 255, 255)
EXIF_ORIENTATION = 0x0112


def _check_hw(h: int, w: int, fld: str) -> None:
    if h <= 0 or w <= 0:
        raise InvalidInputError(fld, "height and width > 0", f"zero-size {fld} {w}x{h}")
    if max(h, w) / min(h, w) > MAX_ASPECT_RATIO:
        raise InvalidInputError(fld, f"aspect ratio <= {MAX_ASPECT_RATIO}",
                                f"{fld} of {w}x{h} is too elongated")


def tensor_to_array(x: Any, fld: str) -> Any:
    """A torch tensor as a NumPy array the parsers check like any other (anything else unchanged):
    detached, on the CPU, conjugate / negative views resolved; a floating dtype NumPy lacks
    (bfloat16, the float8 types) cast to float32, as float16 is taken. Raises InvalidInputError
    (``fld``) for a tensor without data (meta, sparse, nested, quantized) or of a dtype NumPy
    cannot hold otherwise. bool and complex arrays come out as such, for the parser to refuse."""
    if not is_tensor(x):
        return x
    import torch

    if (x.device.type == "meta" or x.layout != torch.strided or x.is_nested or x.is_quantized):
        raise InvalidInputError(fld, "a dense tensor with data",
                                f"got a {x.device.type} {str(x.layout).replace('torch.', '')} tensor")
    t = x.detach().cpu().resolve_conj().resolve_neg()
    if t.dtype.is_floating_point and t.dtype not in (torch.float16, torch.float32, torch.float64):
        t = t.float()  # bfloat16 and float8 have no NumPy dtype
    try:
        return t.numpy()
    except TypeError as e:  # e.g. unsigned or bit dtypes this torch cannot hand to NumPy
        raise InvalidInputError(fld, "a tensor of a NumPy dtype", f"got {t.dtype}: {e}") from None


def has_transparency(img: Image.Image) -> bool:
    """An alpha band (LA, PA, RGBA, RGBa, ...), an RGBA palette or a ``transparency`` key (P, L, RGB, ...)."""
    return ("A" in img.getbands() or "a" in img.mode or "transparency" in img.info
            or (img.mode == "P" and img.palette is not None and img.palette.mode == "RGBA"))


def normalize_image(img: Image.Image, background: tuple[int, int, int] = WHITE) -> Image.Image:
    """The image a viewer shows: EXIF orientation applied (vLLM PR #18569's ``exif_transpose``),
    then any transparency composited over ``background`` (RGB, vLLM's ``rgba_to_rgb`` /
    ``rgba_background_color``) into an RGB image. Other images are returned as given; the given
    image is never changed."""
    if img.getexif().get(EXIF_ORIENTATION, 1) != 1:
        img = ImageOps.exif_transpose(img)
    if has_transparency(img):
        rgba = img.convert("RGBA")
        out = Image.new("RGB", img.size, background)
        out.paste(rgba, mask=rgba.getchannel("A"))
        img = out
    return img


def parse_image(x: Any, background: tuple[int, int, int] = WHITE) -> Image.Image:
    """PIL image, encoded bytes or (H, W[, C]) uint8 array (or tensor) -> loaded PIL image as a viewer
    shows it (``normalize_image``: EXIF orientation, transparency over ``background``). Raises
    InvalidInputError ("image") for corrupt bytes, zero size, aspect ratio above 200, other types."""
    x = tensor_to_array(x, "image")
    if isinstance(x, (bytes, bytearray)):
        try:
            x = Image.open(io.BytesIO(bytes(x)))
            x.load()
        except Exception as e:  # PIL raises several types for corrupt data
            raise InvalidInputError("image", "a decodable image", f"corrupt image bytes: {e}") from None
    elif isinstance(x, np.ndarray):
        if x.dtype != np.uint8 or x.ndim not in (2, 3) or (x.ndim == 3 and x.shape[2] not in (1, 3, 4)):
            raise InvalidInputError("image", "(H, W[, 1|3|4]) uint8 array",
                                    f"got {x.dtype} array of shape {x.shape}")
        _check_hw(x.shape[0], x.shape[1], "image")
        x = Image.fromarray(x[..., 0] if x.ndim == 3 and x.shape[2] == 1 else x)
    elif isinstance(x, Image.Image):
        try:
            x.load()
        except Exception as e:
            raise InvalidInputError("image", "a decodable image", f"corrupt image: {e}") from None
    else:
        raise InvalidInputError("image", "PIL.Image | bytes | uint8 ndarray", f"got {type(x).__name__}")
    _check_hw(x.height, x.width, "image")
    if not _converts_to_rgb(x.mode):  # the HF processor would fail in PIL's convert("RGB")
        raise InvalidInputError("image", "a PIL mode convertible to RGB", f"mode {x.mode!r} cannot be converted to RGB")
    try:
        x = normalize_image(x, background)
    except Exception as e:  # a corrupt EXIF block, a palette PIL cannot expand
        raise InvalidInputError("image", "a decodable image", f"cannot normalise the image: {e}") from None
    _check_hw(x.height, x.width, "image")
    return x


@lru_cache(maxsize=None)
def _converts_to_rgb(mode: str) -> bool:
    try:
        Image.new(mode, (1, 1)).convert("RGB")
    except (ValueError, OSError):
        return False
    return True


def _is_frame(x: Any) -> bool:
    """One video frame: a PIL image or an (H, W, C) array / tensor."""
    return isinstance(x, Image.Image) or ((isinstance(x, np.ndarray) or is_tensor(x)) and x.ndim == 3)


def parse_video(x: Any, background: tuple[int, int, int] = WHITE) -> np.ndarray:
    """(T, H, W, 3) numeric array (or tensor), or a list of T frames (PIL images, as a viewer shows
    them, or (H, W, 3) arrays / tensors) -> (T, H, W, 3) array (dtype kept; PIL frames uint8). The
    listed and the stacked frames give the same array. Raises InvalidInputError ("video") for a
    wrong rank / channels, frames of several sizes, 0 frames, zero size, non-finite data."""
    if isinstance(x, (list, tuple)) and x and all(_is_frame(f) for f in x):
        frames = [np.asarray(parse_image(f, background).convert("RGB")) if isinstance(f, Image.Image)
                  else tensor_to_array(f, "video") for f in x]
        if len({f.shape for f in frames}) > 1:
            raise InvalidInputError("video", "frames of one size",
                                    f"got frames of shapes {sorted({f.shape for f in frames})}")
        x = np.stack(frames)
    x = tensor_to_array(x, "video")
    if not isinstance(x, np.ndarray):
        raise InvalidInputError("video", "(T, H, W, 3) array", f"got {type(x).__name__}")
    if x.ndim != 4 or x.shape[-1] != 3:
        raise InvalidInputError("video", "(T, H, W, 3) array", f"got shape {x.shape}")
    if x.shape[0] == 0:
        raise InvalidInputError("video", ">= 1 frame", "video has 0 frames")
    if x.dtype == np.bool_ or not (np.issubdtype(x.dtype, np.integer) or np.issubdtype(x.dtype, np.floating)):
        raise InvalidInputError("video", "numeric dtype", f"got {x.dtype}")
    _check_hw(x.shape[1], x.shape[2], "video")
    if np.issubdtype(x.dtype, np.floating) and not np.isfinite(x).all():
        raise InvalidInputError("video", "finite values", "video contains NaN or inf")
    return x


def parse_audio(x: Any, keep_float64: bool = False) -> np.ndarray:
    """1-D float array at 16 kHz, or ``(array, rate)`` -> 1-D float32 (float64 kept with
    ``keep_float64``, as vLLM's parser). Raises InvalidInputError: "audio.sampling_rate" (16000),
    "audio" (wrong rank / dtype, empty, NaN / inf, longer than 30 s)."""
    sr = SAMPLING_RATE
    if isinstance(x, tuple):
        if len(x) != 2:
            raise InvalidInputError("audio", "(array, sampling_rate)", f"tuple of {len(x)}")
        x, sr = x
    if sr != SAMPLING_RATE:
        raise InvalidInputError("audio.sampling_rate", SAMPLING_RATE, f"got {sr} Hz (no resampling)")
    x = tensor_to_array(x, "audio")
    if not isinstance(x, np.ndarray):
        raise InvalidInputError("audio", "1-D float32 array", f"got {type(x).__name__}")
    if x.ndim != 1:
        raise InvalidInputError("audio", "1-D (mono) array", f"got shape {x.shape}")
    if not np.issubdtype(x.dtype, np.floating):
        raise InvalidInputError("audio", "float32 samples", f"got dtype {x.dtype}")
    if x.size == 0:
        raise InvalidInputError("audio", "> 0 samples", "empty audio")
    if x.size > MAX_AUDIO_S * SAMPLING_RATE:
        raise InvalidInputError("audio", f"{MAX_AUDIO_S} s",
                                f"{x.size / SAMPLING_RATE:.2f} s of audio ({x.size} samples)")
    f32 = np.finfo(np.float32).max
    if keep_float64 and x.dtype == np.float64:  # finite within float32's range, no copy
        if not (np.isfinite(x).all() and -f32 <= x.min() and x.max() <= f32):
            raise InvalidInputError("audio", "finite samples", "audio contains NaN or inf")
        return x
    with np.errstate(over="ignore"):  # float64 beyond float32's range -> inf, refused below
        x = x.astype(np.float32, copy=False)
    if not np.isfinite(x).all():
        raise InvalidInputError("audio", "finite samples", "audio contains NaN or inf")
    return x


_PARSERS: dict[str, Callable[..., Any]] = {"image": parse_image, "video": parse_video, "audio": parse_audio}


def split_items(modality: str, data: Any) -> list[Any]:
    """One item or several, decided for each modality here only (vLLM's
    ``MultiModalDataParser._parse_{image,video,audio}_data``), before any item is parsed:

    image  a list / tuple: one item each; a 4-D array or tensor: one image per row (N, H, W, C);
           anything else (PIL, bytes, 2-D / 3-D array): one image.
    video  a 4-D array or tensor, or a list / tuple of frames (PIL images or (H, W, C) arrays /
           tensors): one video; a 5-D array or tensor: one video per row; another list: one each.
    audio  a list / tuple of numbers, an ``(array, rate)`` tuple or any array: one audio (a 2-D
           array is refused as not mono, where vLLM would split it); another list: one each.
    An empty list: no item."""
    if modality == "image":
        if (isinstance(data, np.ndarray) or is_tensor(data)) and data.ndim == 4:
            return list(data)
        return list(data) if isinstance(data, (list, tuple)) else [data]
    if modality == "video":
        if (isinstance(data, np.ndarray) or is_tensor(data)) and data.ndim == 5:
            return list(data)
        if isinstance(data, (list, tuple)):
            return [data] if data and all(_is_frame(f) for f in data) else list(data)
        return [data]
    if isinstance(data, tuple) or not isinstance(data, list):
        return [data]
    return [data] if data and all(isinstance(v, (int, float, np.number)) for v in data) else list(data)


def parse_mm_data(mm_data: Optional[dict[str, Any]], limits: dict[str, int],
                  keep_float64: bool = False, background: tuple[int, int, int] = WHITE) -> dict[str, list[Any]]:
    """Validate ``{modality: item | [items]}`` -> ``{modality: [items]}`` (``split_items`` decides one
    or several); ``limits``: items per prompt; images (and PIL video frames) as a viewer shows them,
    transparency over ``background``. Raises InvalidInputError ("mm_data": not a dict, unknown
    modality), TooManyItemsError (``mm_data[<modality>]``) and the per-item errors of parse_image /
    parse_video / parse_audio."""
    out: dict[str, list[Any]] = {}
    if mm_data is not None and not isinstance(mm_data, dict):
        raise InvalidInputError("mm_data", "a dict {modality: item | [items]}",
                                f"got {type(mm_data).__name__}")
    for modality, data in (mm_data or {}).items():
        if modality not in limits:
            raise InvalidInputError("mm_data", tuple(limits), f"unsupported modality {modality!r}")
        items = split_items(modality, data)
        if modality == "audio" and len(items) == 1 and isinstance(items[0], list):
            # a list of samples, not a list of audios: name the audio, not the item count
            raise InvalidInputError("audio", "1-D float32 array",
                                    f"got a Python list of {len(items[0])} numbers")
        if len(items) > limits[modality]:
            raise TooManyItemsError(f"mm_data[{modality}]", limits[modality],
                                    f"{len(items)} {modality} items in one prompt")
        if items:
            out[modality] = [parse_audio(x, keep_float64) if modality == "audio" else _PARSERS[modality](x, background)
                             for x in items]
    return out
