"""The kit the malformed-input cases run against, their entry points and their outcome.

Used by refimpl/testing/bad_inputs.py (the case list). A case names an entry point (the
Qwen2.5-VL or Whisper processor's ``apply``, ``Scheduler.add_request`` with the processor's
output, or ``SamplingParams``); :func:`run_case` records a refimpl exception as "raised", any
other exception as "crashed" (a bug to fix in the owning module). Sizes are small (Qwen
``max_pixels`` = 64 patches of 28x28) so the whole table runs in a few seconds on one CPU thread.
"""
from __future__ import annotations

import io
from dataclasses import dataclass
from dataclasses import field as dc_field
from typing import Any, Callable, Optional

import numpy as np
from PIL import Image

from refimpl.errors import RefimplError

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
        from refimpl.request import Request, RequestStatus
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


def small_kv_request(num_blocks: int, prompt_len: int) -> Callable[[Kit], Any]:
    """A Qwen request of ``prompt_len`` tokens on a Scheduler of ``num_blocks`` KV blocks."""
    def run(kit):
        from refimpl.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
        from refimpl.core.sched.scheduler import Scheduler
        from refimpl.request import Request
        from refimpl.sampling_params import SamplingParams
        cfg = VllmConfig(ModelConfig("qwen2.5-vl-3b", device="cpu", max_model_len=QWEN_MAX_MODEL_LEN),
                         SchedulerConfig(), CacheConfig(block_size=16))
        s = Scheduler(cfg, num_blocks, encoder_compute_budget=8192, encoder_cache_size=8192)
        s.add_request(Request("bad-input", [220] * prompt_len, SamplingParams(max_tokens=1)))
        return f"queued: {prompt_len} tokens"
    return run


def kv_sizing(**cache_kw) -> Callable[[Kit], Any]:
    """Start-up KV sizing (``GPUModelRunner.determine_num_blocks``) of whisper-tiny under
    ``CacheConfig(**cache_kw)``; no model is loaded (the sizes come from the config)."""
    def run(kit):
        from refimpl.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
        from refimpl.worker.gpu_model_runner import GPUModelRunner
        cfg = VllmConfig(ModelConfig("whisper-tiny", device="cpu"), SchedulerConfig(), CacheConfig(**cache_kw))
        return f"{GPUModelRunner(cfg).determine_num_blocks()} KV blocks"
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
