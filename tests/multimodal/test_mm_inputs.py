"""Malformed multimodal items raise refimpl errors naming field and limit; nothing breaks."""
import io

import numpy as np
import pytest
import torch
from PIL import Image

from refimpl.config import ModelConfig
from refimpl.errors import InvalidInputError, TooManyItemsError
from refimpl.multimodal import MultiModalRegistry


@pytest.fixture(scope="module")
def qwen():
    reg = MultiModalRegistry()
    mc = ModelConfig("qwen2.5-vl-3b", max_model_len=4096, device="cpu",
                     limit_mm_per_prompt={"image": 2, "video": 1})
    mc.mm_processor_kwargs = {"max_pixels": 28 * 28 * 64}
    return reg, reg.create_processor(mc)


@pytest.fixture(scope="module")
def whisper():
    reg = MultiModalRegistry()
    return reg, reg.create_processor(ModelConfig("whisper-tiny", device="cpu"))


def _png(size=(40, 30)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, (1, 2, 3)).save(buf, format="PNG")
    return buf.getvalue()


def _check_still_works_qwen(reg, proc):
    out = proc.apply("<|image_pad|>", {"image": _png()})
    assert out.mm_placeholders["image"][0].length == 6  # 40x30 -> up to min_pixels: 84x56 -> 6 tokens
    assert reg.processing_cache.bytes <= reg.processing_cache.capacity_bytes


BAD_QWEN = [
    ("<|image_pad|>", {"audio": np.zeros(10, np.float32)}, InvalidInputError, "mm_data"),
    ("<|image_pad|>", {"image": b"\x89PNG\r\n\x1a\nnot really"}, InvalidInputError, "image"),
    ("<|image_pad|>", {"image": _png()[:60]}, InvalidInputError, "image"),
    ("<|image_pad|>", {"image": Image.new("RGB", (0, 0))}, InvalidInputError, "image"),
    ("<|image_pad|>", {"image": np.zeros((0, 5, 3), np.uint8)}, InvalidInputError, "image"),
    ("<|image_pad|>", {"image": Image.new("RGB", (4000, 10))}, InvalidInputError, "image"),
    ("<|image_pad|>", {"image": "cat.jpg"}, InvalidInputError, "image"),
    ("<|video_pad|>", {"video": np.zeros((56, 56, 3), np.uint8)}, InvalidInputError, "video"),
    ("<|video_pad|>", {"video": np.zeros((0, 56, 56, 3), np.uint8)}, InvalidInputError, "video"),
    ("<|video_pad|>", {"video": np.zeros((2, 56, 56, 5), np.uint8)}, InvalidInputError, "video"),
    ("<|video_pad|>", {"video": np.full((2, 56, 56, 3), np.nan, np.float32)}, InvalidInputError, "video"),
    ("<|image_pad|>" * 3, {"image": [_png()] * 3}, TooManyItemsError, "mm_data[image]"),
    ("no placeholder", {"image": _png()}, InvalidInputError, "prompt"),
    ("<|image_pad|>", {"image": [_png(), _png()]}, InvalidInputError, "prompt"),
]


@pytest.mark.parametrize("prompt,data,exc,field", BAD_QWEN)
def test_bad_qwen_inputs(qwen, prompt, data, exc, field):
    reg, proc = qwen
    with pytest.raises(exc) as ei:
        proc.apply(prompt, data)
    assert ei.value.field == field and ei.value.limit is not None
    assert isinstance(ei.value, ValueError)
    if exc is TooManyItemsError:
        assert ei.value.limit == 2
    _check_still_works_qwen(reg, proc)


def test_image_above_max_pixels_is_resized_not_rejected(qwen):
    _, proc = qwen
    out = proc.apply("<|image_pad|>", {"image": Image.new("RGB", (1000, 700), (9, 9, 9))})
    assert out.mm_placeholders["image"][0].length <= 64  # max_pixels 50176 -> <= 64 tokens
    arr = np.full((300, 400, 3), 7, np.uint8)  # arrays and PIL images of the same pixels agree
    a, b = proc.apply("<|image_pad|>", {"image": arr}), proc.apply("<|image_pad|>", {"image": Image.fromarray(arr)})
    assert a.mm_hashes == b.mm_hashes
    assert torch.equal(a.mm_kwargs["image"][0]["pixel_values"], b.mm_kwargs["image"][0]["pixel_values"])


P = "<|startoftranscript|>"
BAD_AUDIO = [
    (np.zeros(1600, np.int16), "audio", "float32 samples"),
    (np.zeros((2, 1600), np.float32), "audio", "1-D (mono) array"),
    ((np.zeros(1600, np.float32), 8000), "audio.sampling_rate", 16000),
    (np.array([0.0, np.nan], np.float32), "audio", "finite samples"),
    (np.array([0.0, np.inf], np.float32), "audio", "finite samples"),
    (np.zeros(0, np.float32), "audio", "> 0 samples"),
    (np.zeros(30 * 16000 + 1, np.float32), "audio", "30 s"),
    ("speech.wav", "audio", "1-D float32 array"),
]


@pytest.mark.parametrize("audio,field,limit", BAD_AUDIO)
def test_bad_audio(whisper, audio, field, limit):
    reg, proc = whisper
    with pytest.raises(InvalidInputError) as ei:
        proc.apply(P, {"audio": audio})
    assert (ei.value.field, ei.value.limit) == (field, limit)
    ok = proc.apply(P, {"audio": np.zeros(30 * 16000, np.float32)})  # exactly 30 s is fine
    assert ok.mm_kwargs["audio"][0]["input_features"].shape == (80, 3000)
    assert ok.mm_placeholders["audio"][0].length == 1500


def test_too_many_audios_and_tiny_cache(whisper):
    _, proc = whisper
    with pytest.raises(TooManyItemsError) as ei:
        proc.apply(P, {"audio": [np.zeros(160, np.float32)] * 2})
    assert ei.value.limit == 1
    # a cache smaller than one item: nothing stored, nothing evicted, output still right
    reg = MultiModalRegistry()
    p = reg.create_processor(ModelConfig("whisper-tiny", device="cpu", mm_processor_cache_gb=1e-6))
    for _ in range(2):
        out = p.apply(P, {"audio": np.ones(1600, np.float32) * 0.1})
        assert out.mm_kwargs["audio"][0]["input_features"].shape == (80, 3000)
    c = reg.processing_cache
    assert len(c) == 0 and c.bytes == 0 and c.evictions == 0 and c.rejected == 2
    assert reg.stats.hf_mm_passes == 2
