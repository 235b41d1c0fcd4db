"""Processor outputs are identical with the cache off, cold, warm and partly warm."""
import numpy as np
import pytest
import torch
from PIL import Image

from refimpl.config import ModelConfig
from refimpl.multimodal import MultiModalRegistry
from refimpl.multimodal.photos import load_sample_photos
from tests.multimodal.utils import assert_same_inputs

QWEN = dict(max_model_len=4096, device="cpu", limit_mm_per_prompt={"image": 3, "video": 1})
PROMPT = "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>and<|vision_start|><|image_pad|><|vision_end|>?"


@pytest.fixture(scope="module")
def images():
    photos = dict(load_sample_photos())
    return photos["grace_hopper.jpg"], photos["logo2.png"]


def test_qwen_images_off_cold_warm_partly_warm(images):
    a, b = images
    mc = ModelConfig("qwen2.5-vl-3b", **QWEN)
    off = MultiModalRegistry().create_processor(mc, disable_cache=True).apply(PROMPT, {"image": [a, b]}, return_mm_hashes=True)
    # grace_hopper 512x600 -> smart_resize 504x588 -> 36x42 patches -> 18*21 tokens
    assert [p.length for p in off.mm_placeholders["image"]] == [
        18 * 21, int(off.mm_kwargs["image"][1]["image_grid_thw"].prod()) // 4]
    assert off.mm_kwargs["image"][0]["pixel_values"].shape == (18 * 21 * 4, 1176)
    assert off.mm_kwargs["image"][0]["image_grid_thw"].tolist() == [1, 42, 36]
    assert off.mm_kwargs["image"][0]["pixel_values"].dtype == torch.float32
    ids, ph = off.prompt_token_ids, off.mm_placeholders["image"]
    assert all(set(ids[p.offset:p.offset + p.length]) == {151655} for p in ph)
    assert ids[ph[0].offset - 1] == 151652 and ids[ph[0].offset + ph[0].length] == 151653

    reg = MultiModalRegistry()
    proc = reg.create_processor(mc)
    cold = proc.apply(PROMPT, {"image": [a, b]})
    assert (reg.stats.hf_mm_passes, reg.stats.cache_misses, len(reg.processing_cache)) == (1, 2, 2)
    warm = proc.apply(PROMPT, {"image": [a, b]})
    assert (reg.stats.hf_mm_passes, reg.stats.cache_hits) == (1, 2)
    assert_same_inputs(off, cold)
    assert_same_inputs(off, warm)

    reg2 = MultiModalRegistry()
    p2 = reg2.create_processor(mc)
    p2.apply("<|image_pad|>", {"image": [b]})
    partly = p2.apply(PROMPT, {"image": [a, b]})  # a missing, b cached
    assert (reg2.stats.hf_mm_passes, reg2.stats.cache_hits, reg2.stats.cache_misses) == (2, 1, 2)
    assert_same_inputs(off, partly)
    # swapped order, all warm: each item keeps its own tensors
    swapped = p2.apply(PROMPT, {"image": [b, a]})
    assert torch.equal(swapped.mm_kwargs["image"][0]["pixel_values"], off.mm_kwargs["image"][1]["pixel_values"])


def test_qwen_token_prompt_and_mixed_modalities(images):
    a, _ = images
    mc = ModelConfig("qwen2.5-vl-3b", **QWEN)
    vid = np.random.default_rng(0).integers(0, 256, (3, 56, 84, 3), dtype=np.uint8)
    prompt = "<|video_pad|> then <|image_pad|> end"
    data = {"image": a, "video": vid}
    off = MultiModalRegistry().create_processor(mc, disable_cache=True).apply(prompt, data, return_mm_hashes=True)
    v = off.mm_kwargs["video"][0]
    assert v["video_grid_thw"].tolist() == [2, 4, 6]  # 3 frames padded to 4, 56x84 -> 4x6 patches
    assert v["pixel_values_videos"].shape == (48, 1176) and off.mm_placeholders["video"][0].length == 12
    assert off.mm_placeholders["video"][0].offset == 0
    reg = MultiModalRegistry()
    proc = reg.create_processor(mc)
    for _ in range(2):
        assert_same_inputs(off, proc.apply(prompt, data))
    # token-id prompts go through the same placeholder expansion
    ids = proc.info.get_tokenizer().encode(prompt)
    assert_same_inputs(off, proc.apply(ids, data))
    assert_same_inputs(off, MultiModalRegistry().create_processor(mc, disable_cache=True).apply(ids, data, return_mm_hashes=True))


@pytest.mark.parametrize("model,mels", [("whisper-tiny", 80), ("whisper-large-v3", 128)])
def test_whisper_audio_off_cold_warm(model, mels):
    mc = ModelConfig(model, device="cpu")
    rng = np.random.default_rng(0)
    audio = (0.1 * rng.standard_normal(40000)).astype(np.float32)
    prompt = "<|startoftranscript|><|en|><|transcribe|><|notimestamps|>"
    off = MultiModalRegistry().create_processor(mc, disable_cache=True).apply(prompt, {"audio": [audio]}, return_mm_hashes=True)
    assert off.prompt_token_ids == [50258, 50259, 50359 + (mels == 128), 50363 + (mels == 128)]
    assert off.encoder_prompt_token_ids == [0] * 1500
    assert off.mm_placeholders == {"audio": [type(off.mm_placeholders["audio"][0])(0, 1500)]}
    feats = off.mm_kwargs["audio"][0]["input_features"]
    assert feats.shape == (mels, 3000) and feats.dtype == torch.float32
    reg = MultiModalRegistry()
    proc = reg.create_processor(mc)
    cold = proc.apply(prompt, {"audio": (audio, 16000)})
    warm = proc.apply("<|startoftranscript|>", {"audio": audio.copy()})  # other prompt, same item
    assert (reg.stats.hf_mm_passes, reg.stats.cache_hits) == (1, 1)
    assert_same_inputs(off, cold)
    assert warm.prompt_token_ids == [50258]
    assert torch.equal(warm.mm_kwargs["audio"][0]["input_features"], feats)


def test_user_cache_off_is_honoured():
    mc = ModelConfig("qwen2.5-vl-3b", **(QWEN | {"mm_processor_cache_gb": 0}))
    reg = MultiModalRegistry()
    proc = reg.create_processor(mc)
    assert proc.cache is None
    img = Image.new("RGB", (60, 60), (10, 20, 30))
    for _ in range(2):
        proc.apply("<|image_pad|>", {"image": img})
    assert reg.stats.hf_mm_passes == 2 and reg.cache_bytes() == 0 and reg.stats.cache_hits == 0


def test_only_the_hf_call_turns_type_error_into_bad_input(monkeypatch):
    """A TypeError inside refimpl's own code is a bug and propagates; the same error raised by
    the HF processor call is the input's fault (InvalidInputError naming mm_data)."""
    from refimpl.errors import InvalidInputError
    mc = ModelConfig("whisper-tiny", device="cpu")
    proc = MultiModalRegistry().create_processor(mc, disable_cache=True)
    audio = np.zeros(16000, dtype=np.float32)

    def hf_rejects(**kwargs):
        raise TypeError("unexpected input")

    def own_bug(hf, text, items):
        raise TypeError("refimpl bug")
    monkeypatch.setattr(proc.info, "get_hf_processor", lambda: hf_rejects)
    monkeypatch.setattr(proc, "_get_hf_inputs", own_bug)
    with pytest.raises(TypeError, match="refimpl bug"):
        proc.apply("", {"audio": audio})
    monkeypatch.setattr(proc, "_get_hf_inputs", lambda hf, text, items: dict(text=text))
    with pytest.raises(InvalidInputError) as e:
        proc.apply("", {"audio": audio})
    assert e.value.field == "mm_data"


class _StrictProcessor:
    """The HF processor as transformers >= 5.23 checks it: placeholders in the text without
    their items are refused (ProcessorMixin.validate_inputs), whatever version is installed."""

    def __init__(self, hf):
        self.hf, self.tokenizer, self.calls = hf, hf.tokenizer, []

    def __getattr__(self, name):
        return getattr(self.hf, name)

    def __call__(self, text, images=None, videos=None, **kw):
        n = sum(t.count(self.hf.image_token) for t in text)
        self.calls.append((n, 0 if images is None else len(images)))
        if n and images is None:
            raise ValueError(f"Found {n} {self.hf.image_token} tokens in the text but no images were passed.")
        return self.hf(text=text, images=images, videos=videos, **kw)


def test_cached_path_never_sends_placeholders_without_items(monkeypatch):
    """The cached path's text-only pass goes through the HF processor's tokenizer (as vLLM
    >= 0.31 tokenizes the prompt apart): it is counted as one pass without items, as
    before, and never asks the processor to expand placeholders it has no items for."""
    mc = ModelConfig("qwen2.5-vl-3b", **QWEN)
    img = Image.new("RGB", (60, 60), (10, 20, 30))
    off = MultiModalRegistry().create_processor(mc, disable_cache=True).apply("<|image_pad|>", {"image": img},
                                                                          return_mm_hashes=True)
    reg = MultiModalRegistry()
    proc = reg.create_processor(mc)
    strict = _StrictProcessor(proc.info.get_hf_processor())
    monkeypatch.setattr(proc.info, "get_hf_processor", lambda: strict)
    for _ in range(2):  # cold, then warm (text-only pass alone)
        assert_same_inputs(off, proc.apply("<|image_pad|>", {"image": img}))
    # cold: the item's pass; warm: the empty mm-only pass (dummy text, no items) vLLM makes too;
    # the two text-only passes are tokenizer calls
    assert strict.calls == [(1, 1), (0, 0)]
    assert (reg.stats.hf_processor_calls, reg.stats.hf_mm_passes) == (4, 1)
