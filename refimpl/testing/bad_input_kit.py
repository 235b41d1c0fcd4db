"""The kit the malformed-input cases run against, their inputs as data, and what "refused" means.

A case's input is a BadInput: an entry point (a processor's ``apply``, ``Scheduler.add_request``,
start-up KV sizing, ``SamplingParams``) and its arguments, so a user can feed them to their own
validator. Refused: a ValueError (any subclass, as vLLM raises) or a refimpl error (REFUSALS);
``run_case`` records anything else raised as "crashed". Sizes are small (one CPU thread, seconds).
The cases and their inputs as data (Case, BadInput and its constructors, REFUSALS) are in
refimpl.testing.bad_input_data, importable from here too.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np

from refimpl.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
from refimpl.core.sched.scheduler import Scheduler
from refimpl.multimodal import MultiModalRegistry
from refimpl.request import Request, RequestStatus
from refimpl.sampling_params import SamplingParams
from refimpl.testing.bad_input_data import (  # noqa: F401 - the names this module held before the split
    QWEN_MAX_MODEL_LEN,
    QWEN_MAX_PIXELS,
    REFUSALS,
    SR,
    WHISPER_PROMPT,
    BadInput,
    Case,
    is_refusal,
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
from refimpl.worker.gpu_model_runner import GPUModelRunner


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


def _tokens(out) -> str:
    """Short description of an accepted processor output."""
    parts = []
    for m, ph in out.mm_placeholders.items():
        shapes = [tuple(t.shape) for d in out.mm_kwargs[m] for t in d.values()][:1]
        parts.append(f"{m}: {[p.length for p in ph]} tokens, first tensor {shapes[0] if shapes else ()}")
    return "; ".join(parts) or f"{len(out.prompt_token_ids)} prompt tokens"


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
