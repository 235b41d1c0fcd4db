"""The kit the malformed-input cases run against, their inputs as data, and what "refused" means.

A case's input is a BadInput: an entry point (a processor's ``apply``, ``Scheduler.add_request``,
start-up KV sizing, ``SamplingParams``) and its arguments, so a user can feed them to their own
validator. Refused: a ValueError (any subclass, as vLLM raises) or a refimpl error (REFUSALS);
``run_case`` records anything else raised as "crashed". Sizes are small (one CPU thread, seconds).
"""
from __future__ import annotations

import io
from dataclasses import dataclass
from dataclasses import field as dc_field
from typing import Any, Callable, Optional, Union

import numpy as np
from PIL import Image

from refimpl.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
from refimpl.core.sched.scheduler import Scheduler
from refimpl.errors import RefimplError
from refimpl.multimodal import MultiModalRegistry
from refimpl.request import Request, RequestStatus
from refimpl.sampling_params import SamplingParams
from refimpl.worker.gpu_model_runner import GPUModelRunner

SR = 16000
QWEN_MAX_PIXELS = 28 * 28 * 64
QWEN_MAX_MODEL_LEN = 4096
WHISPER_PROMPT = (50258, 50259, 50359, 50363)  # <|startoftranscript|><|en|><|transcribe|><|notimestamps|>
REFUSALS: tuple[type[BaseException], ...] = (RefimplError, ValueError)


def is_refusal(exc: BaseException) -> bool:
    """True for what counts as refusing a bad input: a ValueError (subclasses included, as
    vLLM raises) or a refimpl error."""
    return isinstance(exc, REFUSALS)


class Kit:
    """Lazily built processors and schedulers the cases run against (own registry each);
    one method per entry point a BadInput names."""

    def __init__(self):
        self._cache: dict[str, Any] = {}

    def _get(self, key: str, build: Callable[[], Any]):
        if key not in self._cache:
            self._cache[key] = build()
        return self._cache[key]

    @property
    def qwen(self):
        def build():
            mc = ModelConfig("qwen2.5-vl-3b", max_model_len=QWEN_MAX_MODEL_LEN, device="cpu",
                             limit_mm_per_prompt={"image": 2, "video": 1})
            mc.mm_processor_kwargs = {"max_pixels": QWEN_MAX_PIXELS}
            return MultiModalRegistry().create_processor(mc)
        return self._get("qwen", build)

    @property
    def whisper(self):
        return self._get("whisper", lambda: MultiModalRegistry().create_processor(
            ModelConfig("whisper-tiny", device="cpu")))

    def scheduler(self, model: str):
        def build():
            kw = dict(max_model_len=QWEN_MAX_MODEL_LEN) if model.startswith("qwen") else {}
            cfg = VllmConfig(ModelConfig(model, device="cpu", **kw), SchedulerConfig(max_num_seqs=4),
                             CacheConfig(block_size=16))
            enc = 1500 if cfg.model_config.is_encoder_decoder else 8192
            return Scheduler(cfg, 2000, encoder_compute_budget=enc, encoder_cache_size=enc)
        return self._get(f"sched-{model}", build)

    # the entry points a BadInput names
    def qwen_apply(self, prompt, mm_data):
        return self.qwen.apply(prompt, mm_data)

    def whisper_apply(self, audio):
        return self.whisper.apply("<|startoftranscript|>", {"audio": audio})

    def whisper_request(self, decoder_prompt_len: int = 4, max_tokens: int = 8, audio=None) -> str:
        a = np.zeros(SR, np.float32) if audio is None else audio
        mm = self.whisper.apply("", {"audio": a})
        dec = [50258, 50259, 50359, 50363][:decoder_prompt_len] + [220] * max(decoder_prompt_len - 4, 0)
        req = Request("bad-input", dec, SamplingParams(max_tokens=max_tokens), mm_inputs=mm.mm_kwargs["audio"],
                      mm_hashes=mm.mm_hashes.get("audio", []))
        s = self.scheduler("whisper-tiny")
        s.add_request(req)
        s.finish_requests("bad-input", RequestStatus.FINISHED_ABORTED)
        return f"queued: {len(dec)}-token decoder prompt, max_tokens={max_tokens}"

    def whisper_admit(self, prompt=WHISPER_PROMPT, features=None, sampling_params=None,
                      set_after_check=None, **sp_kw) -> str:
        """A Whisper request (``features``, else the processor's for 1 s of silence) queued on the
        Scheduler, then removed: its SamplingParams(**sp_kw), with ``set_after_check``'s
        attributes set after they were checked, or ``sampling_params`` as given instead."""
        sp = SamplingParams(**sp_kw)
        for name, value in (set_after_check or {}).items():
            setattr(sp, name, value)
        feats = (self.whisper.apply("", {"audio": np.zeros(SR, np.float32)}).mm_kwargs["audio"][0]["input_features"]
                 if features is None else features)
        req = Request("bad-input", list(prompt), sp if sampling_params is None else sampling_params,
                      mm_inputs=[{"input_features": feats}])
        s = self.scheduler("whisper-tiny")
        s.add_request(req)
        s.finish_requests("bad-input", RequestStatus.FINISHED_ABORTED)
        return f"queued: seed={sp.seed}"

    def qwen_request(self, prompt) -> str:
        out = self.qwen.apply(prompt, {})
        req = Request("bad-input", out.prompt_token_ids, SamplingParams(max_tokens=1))
        s = self.scheduler("qwen2.5-vl-3b")
        s.add_request(req)
        s.finish_requests("bad-input", RequestStatus.FINISHED_ABORTED)
        return f"queued: {len(out.prompt_token_ids)} tokens"

    def small_kv_request(self, num_blocks: int, prompt_len: int) -> str:
        cfg = VllmConfig(ModelConfig("qwen2.5-vl-3b", device="cpu", max_model_len=QWEN_MAX_MODEL_LEN),
                         SchedulerConfig(), CacheConfig(block_size=16))
        s = Scheduler(cfg, num_blocks, encoder_compute_budget=8192, encoder_cache_size=8192)
        s.add_request(Request("bad-input", [220] * prompt_len, SamplingParams(max_tokens=1)))
        return f"queued: {prompt_len} tokens"

    def kv_sizing(self, **cache_kw) -> str:
        cfg = VllmConfig(ModelConfig("whisper-tiny", device="cpu"), SchedulerConfig(), CacheConfig(**cache_kw))
        return f"{GPUModelRunner(cfg).determine_num_blocks()} KV blocks"

    def sampling(self, **kw) -> str:
        return repr(SamplingParams(**kw))

    def model_settings(self, model: str, **kw) -> str:
        from refimpl.testing.oracles import max_tokens_per_item
        return f"max tokens per item {max_tokens_per_item(model, **kw)}"

    def processing_cache(self, capacity_bytes) -> str:
        from refimpl.multimodal.cache import ProcessingCache
        return f"ProcessingCache of {ProcessingCache(capacity_bytes).capacity_bytes} bytes"

    def request_batch(self, num_requests) -> str:
        from refimpl.testing.scheduling import create_requests
        return f"{len(create_requests(num_requests))} requests"

    # issue 46: the request dict, a call's processor kwargs, hashing without a cache, check_stop
    def qwen_apply_kw(self, prompt, mm_data, kwargs):
        return self.qwen.apply(prompt, mm_data, kwargs)

    def request_dict(self, prompt) -> str:
        from refimpl.engine.prompt import parse_prompt
        p = parse_prompt(prompt)
        return f"decoder prompt {p.decoder!r} from {p.field}" + (" (start token prepended)" * p.prepend_start)

    def uncached_hashes(self, **model_kw) -> str:
        proc = MultiModalRegistry().create_processor(ModelConfig("whisper-tiny", device="cpu", **model_kw))
        data = {"audio": np.zeros(SR, np.float32)}
        out = proc.apply("", data, mm_uuids=proc.request_uuids("r-0", data))
        return f"{proc.stats.hash_calls} content hashes; item ids {out.mm_hashes['audio']}"

    def stop_at_cap(self, outputs, max_tokens: int, stop_check: str = "stop-first") -> str:
        from refimpl.testing.scheduling import (
            FakeModelRunner,
            create_requests,
            create_scheduler,
            run_to_completion,
        )
        s = create_scheduler()
        s.vllm_config.scheduler_config.stop_check = stop_check  # type: ignore[assignment]
        (req,) = create_requests(1, max_tokens=max_tokens, ignore_eos=False)
        s.add_request(req)
        out = run_to_completion(s, FakeModelRunner(94, lambda rid, n: outputs[n - len(WHISPER_PROMPT)]))["req0"]
        return f"finish_reason {out.finish_reason!r}, outputs {out.output_token_ids}"


# ------------------------------------------------------------------------------ entry points
@dataclass(frozen=True)
class BadInput:
    """One input as data: ``entry`` names the entry point (a ``Kit`` method of that name) and
    ``kwargs`` its arguments, so a user can feed ``kwargs`` to their own validator. Calling it
    on a Kit runs refimpl's entry point."""
    entry: str
    kwargs: dict[str, Any]

    def __call__(self, kit: "Kit") -> Any:
        return getattr(kit, self.entry)(**self.kwargs)


def qwen_apply(prompt, mm_data) -> BadInput:
    """The Qwen2.5-VL processor's ``apply(prompt, mm_data)`` (limits image 2, video 1)."""
    return BadInput("qwen_apply", dict(prompt=prompt, mm_data=mm_data))


def whisper_apply(audio) -> BadInput:
    """The Whisper processor's ``apply("<|startoftranscript|>", {"audio": audio})``."""
    return BadInput("whisper_apply", dict(audio=audio))


def whisper_request(decoder_prompt_len: int = 4, max_tokens: int = 8, audio=None) -> BadInput:
    """Whisper processor output + a decoder prompt, queued on a Scheduler (then removed)."""
    return BadInput("whisper_request", dict(decoder_prompt_len=decoder_prompt_len, max_tokens=max_tokens,
                                            audio=audio))


def whisper_admit(prompt=WHISPER_PROMPT, features=None, sampling_params=None, set_after_check=None,
                  **sp_kw) -> BadInput:
    """A Whisper request queued on a Scheduler (then removed): decoder ``prompt``, encoder
    ``features`` (default: the processor's), SamplingParams(**sp_kw) with ``set_after_check``
    (attribute -> value) set after construction, or ``sampling_params`` (any object) instead."""
    return BadInput("whisper_admit", dict(prompt=prompt, features=features, sampling_params=sampling_params,
                                          set_after_check=set_after_check, **sp_kw))


def qwen_request(prompt) -> BadInput:
    """Qwen processor output queued on a Scheduler (max_model_len 4096), then removed."""
    return BadInput("qwen_request", dict(prompt=prompt))


def small_kv_request(num_blocks: int, prompt_len: int) -> BadInput:
    """A Qwen request of ``prompt_len`` tokens on a Scheduler of ``num_blocks`` KV blocks."""
    return BadInput("small_kv_request", dict(num_blocks=num_blocks, prompt_len=prompt_len))


def kv_sizing(**cache_kw) -> BadInput:
    """Start-up KV sizing (``GPUModelRunner.determine_num_blocks``) of whisper-tiny under
    ``CacheConfig(**cache_kw)``; no model is loaded (the sizes come from the config)."""
    return BadInput("kv_sizing", dict(cache_kw))


def model_settings(model: str = "qwen2.5-vl-3b", **kw) -> BadInput:
    """``ModelConfig(model, **kw)`` through the oracle ``max_tokens_per_item`` (the rules every
    entry point runs: refimpl/config/checks.py)."""
    return BadInput("model_settings", dict(model=model, **kw))


def processing_cache(capacity_bytes) -> BadInput:
    """``ProcessingCache(capacity_bytes)``."""
    return BadInput("processing_cache", dict(capacity_bytes=capacity_bytes))


def request_batch(num_requests) -> BadInput:
    """``refimpl.testing.create_requests(num_requests)``."""
    return BadInput("request_batch", dict(num_requests=num_requests))


def qwen_apply_kw(prompt, mm_data, kwargs) -> BadInput:
    """The Qwen2.5-VL processor's ``apply(prompt, mm_data, kwargs)``: a call's own processor kwargs."""
    return BadInput("qwen_apply_kw", dict(prompt=prompt, mm_data=mm_data, kwargs=kwargs))


def request_dict(prompt) -> BadInput:
    """``LLMEngine.add_request``'s request check (``refimpl.engine.prompt.parse_prompt``), run first."""
    return BadInput("request_dict", dict(prompt=prompt))


def uncached_hashes(**model_kw) -> BadInput:
    """Whisper's processor given one audio as LLMEngine gives it (``request_uuids``): hash calls."""
    return BadInput("uncached_hashes", dict(model_kw))


def stop_at_cap(outputs, max_tokens: int, stop_check: str = "stop-first") -> BadInput:
    """A Whisper request sampling ``outputs`` on the Scheduler (FakeModelRunner): its finish reason."""
    return BadInput("stop_at_cap", dict(outputs=list(outputs), max_tokens=max_tokens, stop_check=stop_check))


def sampling(**kw) -> BadInput:
    """``SamplingParams(**kw)``."""
    return BadInput("sampling", dict(kw))


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
    """One malformed input: ``run`` (a BadInput, or any callable taking a Kit), ``raises`` (the
    refimpl exception expected, with ``field`` and ``limit``) or None (accepted: ``behaviour``,
    ``check(result)``)."""
    id: str
    group: str
    what: str
    entry: str
    run: Union[BadInput, Callable[[Kit], Any]] = dc_field(repr=False)
    raises: Optional[type] = None
    field: Optional[str] = None
    limit: Any = None
    behaviour: str = ""
    check: Optional[Callable[[Any], bool]] = dc_field(default=None, repr=False)

    @property
    def input(self) -> BadInput:
        """The input as data (entry point name and arguments)."""
        assert isinstance(self.run, BadInput), f"{self.id}: its input is code, not a BadInput"
        return self.run

    @property
    def refused(self) -> bool:
        """Whether the input must be refused (is_refusal of what the entry point raises)."""
        return self.raises is not None

    def mismatches(self, exc: Optional[BaseException]) -> list[str]:
        """How ``exc`` (a validator's, None: accepted) departs from the case ([]: agrees): refused or
        not, and ``field`` / ``limit`` when it names them."""
        if not self.refused:
            return [] if exc is None else [f"{self.id}: expected acceptance, got {exc!r}"]
        if exc is None or not is_refusal(exc):
            return [f"{self.id}: expected a refusal naming {self.field!r}, got {exc!r}"]
        out = []
        for name in ("field", "limit"):
            if hasattr(exc, name) and getattr(exc, name) != getattr(self, name):
                out.append(f"{self.id}: {name} {getattr(exc, name)!r} != expected {getattr(self, name)!r}")
        return out


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
    """Feed ``case`` to the kit. A refusal (is_refusal) is "raised", with the exception's
    ``field`` / ``limit`` when it has them; any other exception is "crashed"."""
    try:
        res = case.run(kit)
    except REFUSALS as e:
        return Outcome("raised", type(e).__name__, getattr(e, "field", None), getattr(e, "limit", None), str(e))
    except Exception as e:  # noqa: BLE001 - recorded as a crash, the tests fail on it
        return Outcome("crashed", f"{type(e).__module__}.{type(e).__name__}", message=str(e)[:200])
    return Outcome("accepted", result=res, message=_tokens(res) if hasattr(res, "mm_placeholders") else str(res))
