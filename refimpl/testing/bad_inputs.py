"""Malformed inputs and what the kit does with each: ONE case list for the doc and the tests
(python -m refimpl.lab.docs_gen.reliability_table writes docs/reliability.md from CASES;
tests/testing/test_bad_inputs.py asserts the same cases). Each names its entry point, its input as
data, and the refimpl error it must raise, or the documented behaviour and a check. The cases later
issues added (21, 29, 46) are in refimpl.testing.bad_inputs_added, appended here in that order.
"""
from __future__ import annotations

import numpy as np
from PIL import Image

from refimpl.errors import ConfigError, InvalidInputError, SamplingParamsError, TooManyItemsError
from refimpl.testing.bad_input_data import (
    AUD,
    IMG,
    KV,
    P1,
    QWEN_MAX_MODEL_LEN,
    SR,
    Case,
    kv_sizing,
    png_bytes,
    qwen_apply,
    qwen_request,
    sampling,
    small_kv_request,
    whisper_apply,
    whisper_request,
)
from refimpl.testing.bad_inputs_added import (  # noqa: F401 - appended to CASES below; re-exported
    ISSUE21_CASES,
    ISSUE29_CASES,
    ISSUE46_CASES,
    REQ,
    SET,
    WHISPER_VOCAB,
)

CASES: list[Case] = [
    # ---- images
    Case("image-corrupt-bytes", "image", "PNG signature followed by garbage bytes", IMG,
         qwen_apply(P1, {"image": b"\x89PNG\r\n\x1a\n" + b"\x00garbage" * 8}),
         InvalidInputError, "image", "a decodable image"),
    Case("image-truncated-png", "image", "a valid PNG cut after 60 bytes", IMG,
         qwen_apply(P1, {"image": png_bytes()[:60]}), InvalidInputError, "image", "a decodable image"),
    Case("image-empty-bytes", "image", "b'' as image", IMG,
         qwen_apply(P1, {"image": b""}), InvalidInputError, "image", "a decodable image"),
    Case("image-0x0", "image", "PIL image of 0x0 pixels", IMG,
         qwen_apply(P1, {"image": Image.new("RGB", (0, 0))}), InvalidInputError, "image", "height and width > 0"),
    Case("image-1x100000", "image", "PIL image of 100000x1 pixels (aspect ratio 100000)", IMG,
         qwen_apply(P1, {"image": Image.new("RGB", (100000, 1))}), InvalidInputError, "image", "aspect ratio <= 200"),
    Case("image-uint16-array", "image", "(H, W) uint16 numpy array", IMG,
         qwen_apply(P1, {"image": np.zeros((40, 60), np.uint16)}), InvalidInputError, "image",
         "(H, W[, 1|3|4]) uint8 array"),
    Case("image-path-string", "image", "a file name instead of an image", IMG,
         qwen_apply(P1, {"image": "cat.jpg"}), InvalidInputError, "image", "PIL.Image | bytes | uint8 ndarray"),
    *[Case(f"image-mode-{mode.replace(';', '')}", "image", f"PIL image in mode {mode} (60x40)", IMG,
           qwen_apply(P1, {"image": Image.new(mode, (60, 40), 1000 if mode == "I;16" else 0)}),
           behaviour=("accepted: composited over the background (white by default, "
                      "ModelConfig.rgba_background_color), as a viewer shows it" if "A" in mode else
                      "accepted: converted to RGB by the HF processor (PIL convert); "
                      + ("16-bit values above 255 clip to white" if mode == "I;16"
                         else "palette expanded" if mode == "P" else "CMYK -> RGB")),
           check=(lambda out: out.mm_placeholders["image"][0].length == 6
                  and float(out.mm_kwargs["image"][0]["pixel_values"].min()) > 1.5) if "A" in mode else
           (lambda out: out.mm_placeholders["image"][0].length == 6))
      for mode in ("CMYK", "LA", "P", "I;16")],
    Case("image-mode-La", "image", "PIL image in mode La (premultiplied alpha, 60x40)", IMG,
         qwen_apply(P1, {"image": Image.new("La", (60, 40))}), InvalidInputError, "image",
         "a PIL mode convertible to RGB"),
    # ---- video
    Case("video-wrong-rank", "video", "(H, W, 3) array (a single image) as video", IMG,
         qwen_apply("<|video_pad|>", {"video": np.zeros((56, 56, 3), np.uint8)}),
         InvalidInputError, "video", "(T, H, W, 3) array"),
    Case("video-5-channels", "video", "(T, H, W, 5) array", IMG,
         qwen_apply("<|video_pad|>", {"video": np.zeros((2, 56, 56, 5), np.uint8)}),
         InvalidInputError, "video", "(T, H, W, 3) array"),
    Case("video-0-frames", "video", "(0, 56, 56, 3) array", IMG,
         qwen_apply("<|video_pad|>", {"video": np.zeros((0, 56, 56, 3), np.uint8)}),
         InvalidInputError, "video", ">= 1 frame"),
    Case("video-nan", "video", "float32 video full of NaN", IMG,
         qwen_apply("<|video_pad|>", {"video": np.full((2, 56, 56, 3), np.nan, np.float32)}),
         InvalidInputError, "video", "finite values"),
    Case("video-1-frame", "video", "(1, 56, 56, 3) array: fewer frames than temporal_patch_size=2", IMG,
         qwen_apply("<|video_pad|>", {"video": np.zeros((1, 56, 56, 3), np.uint8)}),
         behaviour="accepted: the HF processor repeats the frame up to temporal_patch_size (grid t=1)",
         check=lambda out: out.mm_kwargs["video"][0]["video_grid_thw"].tolist() == [1, 4, 4]),
    # ---- audio
    Case("audio-empty", "audio", "0 samples", AUD, whisper_apply(np.zeros(0, np.float32)),
         InvalidInputError, "audio", "> 0 samples"),
    Case("audio-nan", "audio", "float32 samples containing NaN", AUD,
         whisper_apply(np.array([0.0, np.nan] * 800, np.float32)), InvalidInputError, "audio", "finite samples"),
    Case("audio-inf", "audio", "float32 samples containing +inf", AUD,
         whisper_apply(np.array([0.0, np.inf] * 800, np.float32)), InvalidInputError, "audio", "finite samples"),
    Case("audio-float64-overflow", "audio", "float64 samples of 1e300 (inf once cast to float32)", AUD,
         whisper_apply(np.full(1600, 1e300)), InvalidInputError, "audio", "finite samples"),
    Case("audio-int16", "audio", "int16 PCM samples instead of float", AUD,
         whisper_apply(np.zeros(1600, np.int16)), InvalidInputError, "audio", "float32 samples"),
    Case("audio-float64", "audio", "float64 samples in [-1, 1]", AUD,
         whisper_apply(np.zeros(1600, np.float64)),
         behaviour="accepted: cast to float32 (same features as the float32 input)",
         check=lambda out: tuple(out.mm_kwargs["audio"][0]["input_features"].shape) == (80, 3000)),
    Case("audio-stereo", "audio", "(2, n) stereo array", AUD,
         whisper_apply(np.zeros((2, 1600), np.float32)), InvalidInputError, "audio", "1-D (mono) array"),
    Case("audio-8khz", "audio", "(array, 8000) tuple: 8 kHz audio", AUD,
         whisper_apply((np.zeros(800, np.float32), 8000)), InvalidInputError, "audio.sampling_rate", SR),
    Case("audio-31s", "audio", "31 s at 16 kHz (496,000 samples)", AUD,
         whisper_apply(np.zeros(31 * SR, np.float32)), InvalidInputError, "audio", "30 s"),
    Case("audio-30s", "audio", "exactly 30 s (480,000 samples)", AUD,
         whisper_apply(np.zeros(30 * SR, np.float32)),
         behaviour="accepted: one full window, 3000 mel frames, 1500 encoder tokens",
         check=lambda out: out.mm_placeholders["audio"][0].length == 1500),
    Case("audio-list", "audio", "a Python list of floats", AUD, whisper_apply([0.0] * 1600),
         InvalidInputError, "audio", "1-D float32 array"),
    # ---- prompts / mm_data
    Case("prompt-missing-placeholder", "prompt", "one image, no <|image_pad|> in the prompt", IMG,
         qwen_apply("describe this", {"image": png_bytes()}), InvalidInputError, "prompt", "1 image placeholder(s)"),
    Case("prompt-extra-placeholder", "prompt", "two <|image_pad|> for one image", IMG,
         qwen_apply(P1 + " and " + P1, {"image": png_bytes()}), InvalidInputError, "prompt",
         "1 image placeholder(s)"),
    Case("prompt-placeholder-no-item", "prompt", "<|image_pad|> with no image", IMG,
         qwen_apply(P1, {}), InvalidInputError, "prompt", "0 image placeholder(s)"),
    Case("prompt-too-many-items", "prompt", "3 images, limit_mm_per_prompt image=2", IMG,
         qwen_apply(P1 * 3, {"image": [png_bytes()] * 3}), TooManyItemsError, "mm_data[image]", 2),
    Case("prompt-unknown-modality", "prompt", "audio item for Qwen2.5-VL", IMG,
         qwen_apply(P1, {"audio": np.zeros(10, np.float32)}), InvalidInputError, "mm_data", ("image", "video")),
    Case("prompt-mm-data-not-dict", "prompt", "mm_data given as a list", IMG,
         qwen_apply(P1, [png_bytes()]), InvalidInputError, "mm_data", "a dict {modality: item | [items]}"),
    Case("prompt-too-long", "prompt", f"Qwen prompt of > {QWEN_MAX_MODEL_LEN} tokens",
         "Scheduler.add_request", qwen_request("hello " * QWEN_MAX_MODEL_LEN),
         InvalidInputError, "prompt_token_ids", QWEN_MAX_MODEL_LEN - 1),
    Case("prompt-whisper-decoder-too-long", "prompt", "Whisper decoder prompt of 448 tokens",
         "Scheduler.add_request", whisper_request(decoder_prompt_len=448, max_tokens=1),
         InvalidInputError, "prompt_token_ids", 447),
    Case("prompt-beyond-kv-cache", "prompt", "200-token prompt, a KV cache of 10 blocks of 16 (9 usable)",
         "Scheduler.add_request", small_kv_request(10, 200), InvalidInputError, "prompt_token_ids", 143),
    # ---- KV cache size (start-up)
    Case("kv-num-gpu-blocks-100", "kv cache", "whisper-tiny with num_gpu_blocks=100 (one request needs 123)",
         KV, kv_sizing(num_gpu_blocks=100), ConfigError, "num_gpu_blocks", 123),
    Case("kv-memory-1MiB", "kv cache", "whisper-tiny with kv_cache_memory_bytes=1 MiB on CPU (5 blocks)",
         KV, kv_sizing(kv_cache_memory_bytes=1 << 20), ConfigError, "kv_cache_memory_bytes", 123 * 196608),
    Case("kv-cross-read-unknown", "kv cache", "cross_attention_read='gather'", "CacheConfig",
         kv_sizing(cross_attention_read="gather"), ConfigError, "cross_attention_read",
         ("dense-once", "paged-runs")),
    # ---- sampling
    Case("sampling-negative-max-tokens", "sampling", "max_tokens=-1", "SamplingParams",
         sampling(max_tokens=-1), SamplingParamsError, "max_tokens", ">= 1"),
    Case("sampling-zero-max-tokens", "sampling", "max_tokens=0", "SamplingParams",
         sampling(max_tokens=0), SamplingParamsError, "max_tokens", ">= 1"),
    Case("sampling-float-max-tokens", "sampling", "max_tokens=16.0", "SamplingParams",
         sampling(max_tokens=16.0), SamplingParamsError, "max_tokens", ">= 1"),
    Case("sampling-negative-temperature", "sampling", "temperature=-0.5", "SamplingParams",
         sampling(temperature=-0.5), SamplingParamsError, "temperature", ">= 0.0"),
    Case("sampling-max-tokens-beyond-448", "sampling", "Whisper max_tokens=445 after a 4-token prompt",
         "Scheduler.add_request", whisper_request(max_tokens=445),
         SamplingParamsError, "max_tokens", 444),
]

CASES += ISSUE21_CASES + ISSUE29_CASES + ISSUE46_CASES
CASE_IDS = [c.id for c in CASES]
assert len(set(CASE_IDS)) == len(CASE_IDS), "duplicate case ids"
