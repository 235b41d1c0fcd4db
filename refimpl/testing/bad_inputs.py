"""Malformed inputs and what the kit does with each: ONE case list for the doc and the tests
(python -m refimpl.lab.docs_gen.reliability_table writes docs/reliability.md from CASES;
tests/core/test_bad_inputs.py asserts the same cases). Each names its entry point, its input as
data, and the refimpl error it must raise, or the documented behaviour and a check.
"""
from __future__ import annotations

import numpy as np
import torch
from PIL import Image

from refimpl.errors import ConfigError, InvalidInputError, SamplingParamsError, TooManyItemsError
from refimpl.sampling_params import SEED_LIMIT
from refimpl.testing.bad_input_kit import (
    QWEN_MAX_MODEL_LEN,
    SR,
    Case,
    kv_sizing,
    model_settings,
    png_bytes,
    processing_cache,
    qwen_apply,
    qwen_apply_kw,
    qwen_request,
    request_batch,
    request_dict,
    sampling,
    small_kv_request,
    stop_at_cap,
    uncached_hashes,
    whisper_admit,
    whisper_apply,
    whisper_request,
)

IMG = "Qwen2.5-VL processor.apply"
AUD = "Whisper processor.apply"
P1 = "<|image_pad|>"
KV = "GPUModelRunner.determine_num_blocks"

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

# ---- per-request values in type but out of what a step's consumers take (issue 21, kind 4)
WHISPER_VOCAB = 51865

ISSUE21_CASES: list[Case] = [
    Case("sampling-seed-2**64", "sampling", "seed=2**64 (overflowed torch.Generator.manual_seed in the step)",
         "SamplingParams", sampling(seed=2**64), SamplingParamsError, "seed", SEED_LIMIT),
    Case("sampling-seed-below-int64", "sampling", "seed=-2**63 - 1", "SamplingParams",
         sampling(seed=-(2**63) - 1), SamplingParamsError, "seed", SEED_LIMIT),
    Case("sampling-seed-int64-max", "sampling", "seed=2**63 - 1", "SamplingParams",
         sampling(seed=2**63 - 1), behaviour="accepted: the largest int64 seed",
         check=lambda out: "seed=9223372036854775807" in out),
    Case("sampling-seed-minus-1", "sampling", "seed=-1", "SamplingParams", sampling(seed=-1),
         behaviour="accepted: -1 means unset (as vLLM), seed None", check=lambda out: "seed=None" in out),
    Case("sampling-seed-changed-after-check", "sampling", "SamplingParams built, then .seed = 2**64",
         "Scheduler.add_request", whisper_admit(set_after_check={"seed": 2**64}),
         SamplingParamsError, "seed", SEED_LIMIT),
    Case("sampling-temperature-inf", "sampling", "temperature=inf (logits / inf: NaN for a -inf logit)",
         "SamplingParams", sampling(temperature=float("inf")), SamplingParamsError, "temperature", "finite"),
    Case("sampling-temperature-int-2**1024", "sampling", "temperature=2**1024 (an int beyond float range)",
         "SamplingParams", sampling(temperature=2**1024), SamplingParamsError, "temperature", "finite"),
    Case("sampling-stop-token-beyond-vocab", "sampling", f"stop_token_ids=[{WHISPER_VOCAB}] (whisper-tiny vocab)",
         "Scheduler.add_request", whisper_admit(stop_token_ids=[WHISPER_VOCAB]),
         SamplingParamsError, "stop_token_ids", WHISPER_VOCAB - 1),
    Case("sampling-params-not-sampling-params", "sampling", "a dict as the request's sampling_params",
         "Scheduler.add_request", whisper_admit(sampling_params={"max_tokens": 1}),
         SamplingParamsError, "sampling_params", "a SamplingParams"),
    Case("prompt-token-id-beyond-vocab", "prompt", f"decoder prompt [50258, {WHISPER_VOCAB}] (IndexError in the "
         "embedding, in the step)", "Scheduler.add_request", whisper_admit(prompt=[50258, WHISPER_VOCAB]),
         InvalidInputError, "prompt_token_ids", WHISPER_VOCAB - 1),
    Case("prompt-token-id-2**64", "prompt", "decoder prompt [50258, 2**64] (beyond int64)",
         "Scheduler.add_request", whisper_admit(prompt=[50258, 2**64]),
         InvalidInputError, "prompt_token_ids", WHISPER_VOCAB - 1),
    Case("audio-features-100-frames", "audio", "input_features of (80, 100) queued directly (the encoder takes 3000)",
         "Scheduler.add_request", whisper_admit(features=torch.zeros(80, 100)),
         InvalidInputError, "mm_inputs", "input_features: a finite float tensor of shape (80, 3000)"),
    Case("audio-features-nan", "audio", "input_features full of NaN queued directly (NaN probabilities in sampling)",
         "Scheduler.add_request", whisper_admit(features=torch.full((80, 3000), float("nan"))),
         InvalidInputError, "mm_inputs", "input_features: a finite float tensor of shape (80, 3000)"),
]
CASES += ISSUE21_CASES

CASE_IDS = [c.id for c in CASES]
assert len(set(CASE_IDS)) == len(CASE_IDS), "duplicate case ids"


def _exif_jpeg(orientation: int, size=(112, 56)) -> bytes:
    import io
    ex = Image.Exif()
    ex[0x0112] = orientation
    buf = io.BytesIO()
    Image.new("RGB", size, (30, 60, 90)).save(buf, format="JPEG", exif=ex.tobytes())
    return buf.getvalue()


_CLIP = np.random.default_rng(0).normal(0, 0.1, 4000).astype(np.float32)

# Issue 29 (kinds 1 and 5): images as a viewer shows them; tensors NumPy cannot take.
ISSUE29_CASES: list[Case] = [
    Case("image-exif-orientation-6", "image", "112x56 JPEG bytes stored with EXIF Orientation 6 (displayed 56x112)",
         IMG, qwen_apply(P1, {"image": _exif_jpeg(6)}),
         behaviour="accepted: EXIF orientation applied before hashing and processing (grid of the displayed image)",
         check=lambda out: out.mm_kwargs["image"][0]["image_grid_thw"].tolist()[1:] == [8, 4]),
    Case("image-rgba-transparent", "image", "RGBA image, black and fully transparent (56x56)", IMG,
         qwen_apply(P1, {"image": Image.new("RGBA", (56, 56), (0, 0, 0, 0))}),
         behaviour="accepted: composited over white (ModelConfig.rgba_background_color)",
         check=lambda out: float(out.mm_kwargs["image"][0]["pixel_values"].min()) > 1.5),
    Case("image-uint8-tensor", "image", "(40, 60, 3) uint8 torch tensor", IMG,
         qwen_apply(P1, {"image": torch.zeros(40, 60, 3, dtype=torch.uint8)}),
         behaviour="accepted: as the same uint8 array", check=lambda out: "image" in out.mm_kwargs),
    Case("audio-bfloat16-tensor", "audio", "bfloat16 torch tensor (TypeError out of NumPy before)", AUD,
         whisper_apply(torch.from_numpy(_CLIP).to(torch.bfloat16)),
         behaviour="accepted: cast to float32 as a float16 tensor is", check=lambda out: "audio" in out.mm_kwargs),
    Case("audio-float8-tensor", "audio", "float8_e4m3fn torch tensor", AUD,
         whisper_apply(torch.from_numpy(_CLIP).to(torch.float8_e4m3fn)),
         behaviour="accepted: cast to float32", check=lambda out: "audio" in out.mm_kwargs),
    Case("audio-requires-grad-tensor", "audio", "float32 tensor with requires_grad (RuntimeError before)", AUD,
         whisper_apply(torch.from_numpy(_CLIP.copy()).requires_grad_()),
         behaviour="accepted: detached", check=lambda out: "audio" in out.mm_kwargs),
    Case("audio-complex-tensor", "audio", "complex64 torch tensor", AUD,
         whisper_apply(torch.from_numpy(_CLIP).to(torch.complex64)), InvalidInputError, "audio", "float32 samples"),
    Case("audio-meta-tensor", "audio", "tensor on the meta device (no data)", AUD,
         whisper_apply(torch.empty(4000, device="meta")), InvalidInputError, "audio", "a dense tensor with data"),
    Case("video-bfloat16-tensor", "video", "(2, 56, 56, 3) bfloat16 torch tensor (TypeError before)", IMG,
         qwen_apply("<|video_pad|>", {"video": torch.zeros(2, 56, 56, 3, dtype=torch.bfloat16)}),
         behaviour="accepted: cast to float32", check=lambda out: "video" in out.mm_kwargs),
    Case("video-bool-tensor", "video", "(2, 56, 56, 3) bool torch tensor", IMG,
         qwen_apply("<|video_pad|>", {"video": torch.zeros(2, 56, 56, 3, dtype=torch.bool)}),
         InvalidInputError, "video", "numeric dtype"),
]
# Issue 29, kind 6: one check per setting (refimpl/config/checks.py), the same at every entry point.
SET = "ModelConfig via max_tokens_per_item"
ISSUE29_CASES += [
    Case("setting-max-pixels-negative", "setting", "mm_processor_kwargs max_pixels=-5 (math domain error before)", SET,
         model_settings(mm_processor_kwargs={"max_pixels": -5}), ConfigError, "max_pixels", "> 0 (an int)"),
    Case("setting-max-pixels-0", "setting", "mm_processor_kwargs max_pixels=0 (ZeroDivisionError before)", SET,
         model_settings(mm_processor_kwargs={"max_pixels": 0}), ConfigError, "max_pixels", "> 0 (an int)"),
    Case("setting-max-pixels-10", "setting", "mm_processor_kwargs max_pixels=10 (1 token per image before)", SET,
         model_settings(mm_processor_kwargs={"max_pixels": 10}), ConfigError, "max_pixels", ">= 784 (one 28 x 28 cell)"),
    Case("setting-min-above-max-pixels", "setting", "min_pixels=2000000 with max_pixels=1003520", SET,
         model_settings(mm_processor_kwargs={"min_pixels": 2_000_000, "max_pixels": 1_003_520}),
         ConfigError, "min_pixels", "<= max_pixels (1003520)"),
    Case("setting-cache-gb-nan", "setting", "mm_processor_cache_gb=nan", SET,
         model_settings(mm_processor_cache_gb=float("nan")), ConfigError, "mm_processor_cache_gb", ">= 0 (a finite number)"),
    Case("setting-processing-cache-negative", "setting", "ProcessingCache(-5) (accepted before)", "ProcessingCache",
         processing_cache(-5), ConfigError, "capacity_bytes", ">= 0 (a finite number)"),
    Case("setting-create-requests-negative", "setting", "create_requests(-1) ([] before)", "refimpl.testing.create_requests",
         request_batch(-1), ConfigError, "num_requests", ">= 0 (an int)"),
]
CASES += ISSUE29_CASES
CASE_IDS = [c.id for c in CASES]
assert len(set(CASE_IDS)) == len(CASE_IDS), "duplicate case ids"

# Issue 46: the request dict, a call's processor kwargs, frames as one video, hashing with no
# cache, EOS at the length cap (docs/reliability.md section 10).
REQ = "LLMEngine.add_request's request check"
_A = {"audio": (_CLIP, SR)}
_FR = "<|startoftranscript|><|fr|><|translate|><|notimestamps|>"
_FR_IDS = [50258, 50265, 50358, 50363]
_IMG448 = Image.fromarray(np.random.default_rng(0).integers(0, 256, (448, 448, 3), dtype=np.uint8))
_TOKEN_IDS = "a str or a list of token ids (ints)"
ISSUE46_CASES: list[Case] = [
    Case("request-decoder-prompt-ids", "request", "decoder_prompt as token ids [50258, 50265, 50358, 50363] "
         "(the tokenizer's ValueError before)", REQ, request_dict({"multi_modal_data": _A, "decoder_prompt": _FR_IDS}),
         behaviour="accepted: a list of ints is token ids", check=lambda out: str(_FR_IDS) in out),
    Case("request-decoder-prompt-none", "request", "decoder_prompt=None at the top level (ValueError before)", REQ,
         request_dict({"multi_modal_data": _A, "decoder_prompt": None}), InvalidInputError, "prompt.decoder_prompt",
         _TOKEN_IDS),
    Case("request-decoder-prompt-int", "request", "decoder_prompt=5 (ValueError before)", REQ,
         request_dict({"multi_modal_data": _A, "decoder_prompt": 5}), InvalidInputError, "prompt.decoder_prompt",
         _TOKEN_IDS),
    Case("request-prompt-token-ids-none", "request", "prompt_token_ids=None (TypeError before)", REQ,
         request_dict({"multi_modal_data": _A, "prompt_token_ids": None}), InvalidInputError,
         "prompt.prompt_token_ids", "a list of token ids (ints)"),
    Case("request-implicit-prompt", "request", "vLLM's implicit form {'prompt': '<|startoftranscript|><|fr|>"
         "<|translate|><|notimestamps|>', 'multi_modal_data': ...} (served English transcribe before)", REQ,
         request_dict({"prompt": _FR, "multi_modal_data": _A}),
         behaviour="accepted: the prompt text is the decoder prompt", check=lambda out: _FR in out),
    Case("request-explicit-prompt", "request", "vLLM's explicit form {'encoder_prompt': {'prompt': '', "
         "'multi_modal_data': ...}, 'decoder_prompt': ...} (refused as needing audio before)", REQ,
         request_dict({"encoder_prompt": {"prompt": "", "multi_modal_data": _A}, "decoder_prompt": _FR}),
         behaviour="accepted: the decoder prompt given (decoder_start_token_id prepended if missing)",
         check=lambda out: _FR in out),
    Case("request-unknown-key", "request", "a misspelt key 'promt' (ignored before)", REQ,
         request_dict({"multi_modal_data": _A, "promt": _FR}), InvalidInputError, "prompt.promt",
         ("prompt", "prompt_token_ids", "multi_modal_data", "mm_processor_kwargs", "decoder_prompt")),
    Case("request-unserved-vllm-key", "request", "vLLM's 'cache_salt', which the kit does not serve", REQ,
         request_dict({"multi_modal_data": _A, "cache_salt": "s"}), InvalidInputError, "prompt.cache_salt",
         ("prompt", "prompt_token_ids", "multi_modal_data", "mm_processor_kwargs", "decoder_prompt")),
    Case("call-max-pixels-16-cells", "call kwargs", "per-call max_pixels=16*28*28, 448x448 image (64 tokens "
         "before: ignored by the HF processor)", IMG, qwen_apply_kw(P1, {"image": _IMG448}, {"max_pixels": 16 * 28 * 28}),
         behaviour="accepted: merged over the model-level value and mapped to the HF processor's size",
         check=lambda out: out.mm_placeholders["image"][0].length == 16),
    Case("call-max-pixels-negative", "call kwargs", "per-call max_pixels=-5 (accepted before)", IMG,
         qwen_apply_kw(P1, {"image": _IMG448}, {"max_pixels": -5}), InvalidInputError,
         "mm_processor_kwargs.max_pixels", "> 0 (an int)"),
    Case("call-max-pixel-typo", "call kwargs", "per-call max_pixel=12544, a typo (accepted before)", IMG,
         qwen_apply_kw(P1, {"image": _IMG448}, {"max_pixel": 12544}), InvalidInputError, "mm_processor_kwargs",
         "keys of qwen2.5-vl-3b's preprocessor_config.json"),
    Case("call-do-resize-false", "call kwargs", "per-call do_resize=False, 448x448 image (256 tokens, "
         "above max_tokens_per_item, before)", IMG, qwen_apply_kw(P1, {"image": _IMG448}, {"do_resize": False}),
         InvalidInputError, "mm_processor_kwargs", "113 tokens per image (max_tokens_per_item)"),
    Case("video-list-of-pil-frames", "video", "4 PIL frames of 56x56 as a list (4 videos refused before)", IMG,
         qwen_apply("<|video_pad|>", {"video": [Image.new("RGB", (56, 56), (9 * i, 0, 0)) for i in range(4)]}),
         behaviour="accepted: one video, as the (4, 56, 56, 3) array",
         check=lambda out: out.mm_kwargs["video"][0]["video_grid_thw"].tolist() == [2, 4, 4]),
    Case("video-list-of-array-frames", "video", "4 (56, 56, 3) uint8 arrays as a list (4 videos refused before)",
         IMG, qwen_apply("<|video_pad|>", {"video": [np.full((56, 56, 3), i, np.uint8) for i in range(4)]}),
         behaviour="accepted: one video, as the (4, 56, 56, 3) array",
         check=lambda out: out.mm_kwargs["video"][0]["video_grid_thw"].tolist() == [2, 4, 4]),
    Case("image-4d-array", "image", "(2, 56, 56, 3) uint8 array as images, two placeholders", IMG,
         qwen_apply(P1 * 2, {"image": np.zeros((2, 56, 56, 3), np.uint8)}),
         behaviour="accepted: two images, as the list of two arrays",
         check=lambda out: [p.length for p in out.mm_placeholders["image"]] == [4, 4]),
    Case("hash-cache-gb-0", "hashing", "one audio with mm_processor_cache_gb=0 (hashed before)",
         "Whisper processor, LLMEngine's ids", uncached_hashes(mm_processor_cache_gb=0),
         behaviour="accepted: no content hash; the item is named by its request",
         check=lambda out: out.startswith("0 content hashes") and "r-0-audio-0" in out),
    Case("stop-eos-at-max-tokens", "sampling", "EOS (50257) as the 3rd output of max_tokens=3 ('length' before)",
         "Scheduler.update_from_output", stop_at_cap([1000, 1000, 50257], 3),
         behaviour="accepted: finish_reason 'stop' (the stop check first, vLLM >= 0.11.1)",
         check=lambda out: "'stop'" in out),
    Case("stop-eos-at-max-tokens-caps-first", "sampling", "the same under stop_check='caps-first' (release rows "
         "0.8.5 to 0.11.0)", "Scheduler.update_from_output", stop_at_cap([1000, 1000, 50257], 3, "caps-first"),
         behaviour="accepted: finish_reason 'length', as those releases", check=lambda out: "'length'" in out),
]
CASES += ISSUE46_CASES
CASE_IDS = [c.id for c in CASES]
assert len(set(CASE_IDS)) == len(CASE_IDS), "duplicate case ids"
