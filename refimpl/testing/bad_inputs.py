"""Malformed inputs and what the kit does with each: ONE case list for the doc and the tests.

``scripts/make_reliability_table.py`` feeds every case in :data:`CASES` to the kit and writes
the outcome table into ``docs/reliability.md``; ``tests/test_bad_inputs.py`` runs the same
cases and asserts the expected outcome, so the table and the tests cannot drift apart.

A case names the entry point it goes through (the Qwen2.5-VL or Whisper processor's
``apply``, ``Scheduler.add_request`` with the processor's output, or ``SamplingParams``) and
either the refimpl exception it must raise (type, ``field``, ``limit``) or, for inputs the
kit accepts, the documented behaviour and a check of the result. An outcome whose exception
is not a :class:`refimpl.errors.RefimplError` is a crash: a bug to fix in the owning module.

Sizes are small (Qwen ``max_pixels`` = 64 patches of 28x28) so the whole table runs in a few
seconds on one CPU thread.
"""
from __future__ import annotations

import io
from dataclasses import dataclass, field as dc_field
from typing import Any, Callable, Optional

import numpy as np
from PIL import Image

from refimpl.errors import (InvalidInputError, RefimplError, SamplingParamsError,
                            TooManyItemsError)

SR = 16000
QWEN_MAX_PIXELS = 28 * 28 * 64
QWEN_MAX_MODEL_LEN = 4096


class Kit:
    """Lazily built processors and schedulers the cases run against (own registry each)."""

    def __init__(self):
        self._cache: dict[str, Any] = {}

    def _get(self, key: str, build: Callable[[], Any]):
        if key not in self._cache:
            self._cache[key] = build()
        return self._cache[key]

    @property
    def qwen(self):
        def build():
            from refimpl.config import ModelConfig
            from refimpl.multimodal import MultiModalRegistry
            mc = ModelConfig("qwen2.5-vl-3b", max_model_len=QWEN_MAX_MODEL_LEN, device="cpu",
                             limit_mm_per_prompt={"image": 2, "video": 1})
            mc.mm_processor_kwargs = {"max_pixels": QWEN_MAX_PIXELS}
            return MultiModalRegistry().create_processor(mc)
        return self._get("qwen", build)

    @property
    def whisper(self):
        def build():
            from refimpl.config import ModelConfig
            from refimpl.multimodal import MultiModalRegistry
            return MultiModalRegistry().create_processor(ModelConfig("whisper-tiny", device="cpu"))
        return self._get("whisper", build)

    def scheduler(self, model: str):
        def build():
            from refimpl.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
            from refimpl.core.sched.scheduler import Scheduler
            kw = dict(max_model_len=QWEN_MAX_MODEL_LEN) if model.startswith("qwen") else {}
            cfg = VllmConfig(ModelConfig(model, device="cpu", **kw), SchedulerConfig(max_num_seqs=4),
                             CacheConfig(block_size=16))
            enc = 1500 if cfg.model_config.is_encoder_decoder else 8192
            return Scheduler(cfg, 2000, encoder_compute_budget=enc, encoder_cache_size=enc)
        return self._get(f"sched-{model}", build)


# ------------------------------------------------------------------------------ entry points
def qwen_apply(prompt, mm_data) -> Callable[[Kit], Any]:
    return lambda kit: kit.qwen.apply(prompt, mm_data)


def whisper_apply(audio) -> Callable[[Kit], Any]:
    return lambda kit: kit.whisper.apply("<|startoftranscript|>", {"audio": audio})


def whisper_request(decoder_prompt_len: int = 4, max_tokens: int = 8, audio=None) -> Callable[[Kit], Any]:
    """Whisper processor output + a decoder prompt, queued on a Scheduler (then removed)."""
    def run(kit):
        from refimpl.request import Request
        from refimpl.request import RequestStatus
        from refimpl.sampling_params import SamplingParams
        a = np.zeros(SR, np.float32) if audio is None else audio
        mm = kit.whisper.apply("", {"audio": a})
        dec = [50258, 50259, 50359, 50363][:decoder_prompt_len] + [220] * max(decoder_prompt_len - 4, 0)
        req = Request("bad-input", dec, SamplingParams(max_tokens=max_tokens), mm_inputs=mm.mm_kwargs["audio"],
                      mm_hashes=mm.mm_hashes.get("audio", []))
        s = kit.scheduler("whisper-tiny")
        s.add_request(req)
        s.finish_requests("bad-input", RequestStatus.FINISHED_ABORTED)
        return f"queued: {len(dec)}-token decoder prompt, max_tokens={max_tokens}"
    return run


def qwen_request(prompt) -> Callable[[Kit], Any]:
    """Qwen processor output queued on a Scheduler (max_model_len 4096), then removed."""
    def run(kit):
        from refimpl.request import Request, RequestStatus
        from refimpl.sampling_params import SamplingParams
        out = kit.qwen.apply(prompt, {})
        req = Request("bad-input", out.prompt_token_ids, SamplingParams(max_tokens=1))
        s = kit.scheduler("qwen2.5-vl-3b")
        s.add_request(req)
        s.finish_requests("bad-input", RequestStatus.FINISHED_ABORTED)
        return f"queued: {len(out.prompt_token_ids)} tokens"
    return run


def sampling(**kw) -> Callable[[Kit], Any]:
    def run(kit):
        from refimpl.sampling_params import SamplingParams
        return repr(SamplingParams(**kw))
    return run


# ------------------------------------------------------------------------------ inputs
def png_bytes(size=(40, 30), mode="RGB") -> bytes:
    buf = io.BytesIO()
    Image.new(mode, size, 7).save(buf, format="PNG")
    return buf.getvalue()


def _tokens(out) -> str:
    """Short description of an accepted processor output."""
    parts = []
    for m, ph in out.mm_placeholders.items():
        shapes = [tuple(t.shape) for d in out.mm_kwargs[m] for t in d.values()][:1]
        parts.append(f"{m}: {[p.length for p in ph]} tokens, first tensor {shapes[0] if shapes else ()}")
    return "; ".join(parts) or f"{len(out.prompt_token_ids)} prompt tokens"


@dataclass(frozen=True)
class Case:
    """One malformed input. ``raises``: expected exception class (exactly), with ``field`` and
    ``limit``; None means accepted, with ``behaviour`` documented and ``check(result)`` true."""
    id: str
    group: str
    what: str
    entry: str
    run: Callable[[Kit], Any] = dc_field(repr=False)
    raises: Optional[type] = None
    field: Optional[str] = None
    limit: Any = None
    behaviour: str = ""
    check: Optional[Callable[[Any], bool]] = dc_field(default=None, repr=False)


@dataclass
class Outcome:
    """What happened: ``kind`` in {"raised", "accepted", "crashed"}."""
    kind: str
    exc_type: str = ""
    field: Optional[str] = None
    limit: Any = None
    message: str = ""
    result: Any = None


def run_case(case: Case, kit: Kit) -> Outcome:
    """Feed ``case`` to the kit. A non-refimpl exception is reported as ``crashed``."""
    try:
        res = case.run(kit)
    except RefimplError as e:
        return Outcome("raised", type(e).__name__, e.field, e.limit, str(e))
    except Exception as e:  # noqa: BLE001 - recorded as a crash, the tests fail on it
        return Outcome("crashed", f"{type(e).__module__}.{type(e).__name__}", message=str(e)[:200])
    return Outcome("accepted", result=res, message=_tokens(res) if hasattr(res, "mm_placeholders") else str(res))


IMG = "Qwen2.5-VL processor.apply"
AUD = "Whisper processor.apply"
P1 = "<|image_pad|>"

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
           behaviour=("accepted: converted to RGB by the HF processor (PIL convert); "
                      + ("16-bit values above 255 clip to white" if mode == "I;16"
                         else "alpha dropped" if "A" in mode else "palette expanded" if mode == "P"
                         else "CMYK -> RGB")),
           check=lambda out: out.mm_placeholders["image"][0].length == 6)
      for mode in ("CMYK", "LA", "P", "I;16")],
    Case("image-mode-La", "image", "PIL image in mode La (premultiplied alpha, 60x40)", IMG,
         qwen_apply(P1, {"image": Image.new("La", (60, 40))}), InvalidInputError, "mm_data",
         "input the HF processor accepts"),
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
         TooManyItemsError, "mm_data[audio]", 1),
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

CASE_IDS = [c.id for c in CASES]
assert len(set(CASE_IDS)) == len(CASE_IDS), "duplicate case ids"
