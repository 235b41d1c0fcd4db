"""LLMEngine (add_request / step / generate) and the ``LLM`` front class.

Mirrors ``vllm/v1/engine/llm_engine.py`` and ``vllm/entrypoints/llm.py`` (0.10.2) for Whisper.
Left out: streaming, partial detokenisation, LoRA, priorities, the async engine, chat
templates, Qwen2.5-VL serving (the kit only starts it up).
"""
from __future__ import annotations

import itertools
import time
from typing import Any, Iterable, Literal, Optional, Sequence

from tqdm.auto import tqdm

from refimpl.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
from refimpl.core.sched.utils import check_request_limits
from refimpl.engine.core import EngineCore
from refimpl.engine.mp.frontend import MPFrontend
from refimpl.engine.output_processor import OutputProcessor
from refimpl.engine.prompt import parse_prompt
from refimpl.errors import ConfigError, EngineStateError, InvalidInputError, RefimplError, SamplingParamsError
from refimpl.request import Request
from refimpl.sampling_params import SamplingParams
from refimpl.tokenizer import get_tokenizer, whisper_decoder_prompt


class LLMEngine:
    """Serving engine over one EngineCore (``process_mode`` "mp" or "inproc").

    ``prompt``: a dict with ``multi_modal_data={"audio": audio}`` (float32 (n,) at 16 kHz, or
    ``(array, sr)``) and optional ``decoder_prompt`` (str or token ids) or ``prompt_token_ids``, or
    one of vLLM's forms (``{"prompt": "<|startoftranscript|>...", "multi_modal_data": ...}``,
    ``{"encoder_prompt": {...}, "decoder_prompt": ...}``; refimpl/engine/prompt.py), checked in
    every key first; ``mm_processor_kwargs`` the call's own. A malformed request raises a refimpl
    error naming the key and changes nothing else. Each submission runs under its own
    internal id; outputs carry the user's, reusable once finished. In "mp" mode a dead engine core
    raises EngineDeadError and the child uses its own registry."""

    def __init__(self, vllm_config: VllmConfig, startup_variant: str = "refimpl", *,
                 process_mode: Literal["inproc", "mp"] = "mp", reset_scope: Optional[str] = None,
                 mirror_fault: Optional[str] = None, mm_registry=None):
        self.vllm_config = vllm_config
        reg = vllm_config.use_mm_registry(mm_registry)
        mc = vllm_config.model_config
        if not mc.is_encoder_decoder:
            raise ConfigError("model", "an encoder-decoder (Whisper) model",
                              f"{mc.model} is only started up by the kit, not served")
        if process_mode not in ("inproc", "mp"):
            raise ConfigError("process_mode", ("inproc", "mp"), f"got {process_mode!r}")
        self.process_mode = process_mode
        self.engine_core: Any  # EngineCore in-process, MPFrontend with a child process
        if process_mode == "mp":
            self.engine_core = MPFrontend(vllm_config, startup_variant, reset_scope, mirror_fault)
        else:
            self.engine_core = EngineCore(vllm_config, startup_variant)
        self.tokenizer = get_tokenizer(mc.model)
        self.processor = reg.create_processor(mc)  # honours disable_mm_preprocessor_cache
        self._default_prompt_ids = whisper_decoder_prompt(mc.model)
        self._ids = itertools.count()
        self.output_processor = OutputProcessor()
        self._held_outputs: list = []  # others' outputs finished during generate(), for step()

    @classmethod
    def from_args(cls, model: str = "whisper-tiny", *, startup_variant: str = "refimpl",
                  encoder_len_variant: str = "0.11.0", max_num_seqs: int = 64,
                  max_num_batched_tokens: int = 8192, num_gpu_blocks: Optional[int] = None,
                  block_size: int = 16, process_mode: Literal["inproc", "mp"] = "mp",
                  reset_scope: Optional[str] = None, mirror_fault: Optional[str] = None,
                  max_audios_per_step: int = 1, cross_attention_read: str = "dense-once",
                  **model_kwargs: Any) -> "LLMEngine":
        """Build the configs from keyword arguments (``model_kwargs`` go to ModelConfig)."""
        return cls(VllmConfig(
            ModelConfig(model, **model_kwargs),
            SchedulerConfig(max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=max_num_seqs,
                            max_audios_per_step=max_audios_per_step),
            CacheConfig(block_size=block_size, num_gpu_blocks=num_gpu_blocks,
                        cross_attention_read=cross_attention_read),  # type: ignore[arg-type]
            encoder_len_variant=encoder_len_variant), startup_variant, process_mode=process_mode,
            reset_scope=reset_scope, mirror_fault=mirror_fault)

    @property
    def scheduler(self):
        return self._in_process("scheduler")

    @property
    def model_runner(self):
        return self._in_process("model_runner")

    def _in_process(self, name: str):
        if self.process_mode != "inproc":
            raise EngineStateError(name, 'process_mode="inproc"',
                                   f"the {name} lives in the engine-core process")
        return getattr(self.engine_core, name)

    def add_request(self, request_id: Optional[str], prompt: dict,
                    params: Optional[SamplingParams] = None,
                    arrival_time: Optional[float] = None) -> str:
        """Validate, process and queue one request; its id (``request_id``, or a free one when None).

        Raises InvalidInputError (audio; ``request_id`` not a non-empty str or in flight),
        SamplingParamsError (a field out of range, max_tokens beyond max_target_positions minus the
        decoder prompt), TooManyItemsError. ``params`` is copied."""
        return self._queue(self._process_request(request_id, prompt, params, arrival_time))

    def _process_request(self, request_id: Optional[str], prompt: dict, params: Optional[SamplingParams],
                         arrival_time: Optional[float]) -> Request:
        """Validate and process one request without queueing it (vLLM ``Processor.process_inputs``)."""
        if params is None:
            params = SamplingParams()
        elif not isinstance(params, SamplingParams):
            raise SamplingParamsError("params", "a SamplingParams", f"got {type(params).__name__}")
        params = params.clone()
        if request_id is None:
            request_id = self._free_request_id()
        elif not isinstance(request_id, str) or not request_id:
            raise InvalidInputError("request_id", "a non-empty str", f"got {request_id!r}")
        if request_id in self.output_processor.external_req_ids:
            raise InvalidInputError("request_id", "unique", f"{request_id!r} is in flight")
        parsed = parse_prompt(prompt)  # every key checked before anything is read
        if parsed.decoder is None:
            dec_ids = list(self._default_prompt_ids)
        elif isinstance(parsed.decoder, str):
            dec_ids = self.tokenizer.encode(parsed.decoder, add_special_tokens=False)
        else:
            dec_ids = list(parsed.decoder)
        start = self.vllm_config.model_config.hf_config_dict.get("decoder_start_token_id")
        if parsed.prepend_start and start is not None and dec_ids[:1] != [start]:
            dec_ids = [start, *dec_ids]  # vLLM's _prepare_decoder_input_ids_for_generation
        limit = self.vllm_config.model_config.max_model_len
        fld = parsed.field
        if not dec_ids:
            raise InvalidInputError(fld, ">= 1 token", "empty decoder prompt")
        if len(dec_ids) >= limit:  # the prompt is at fault, not max_tokens (no negative limit)
            raise InvalidInputError(fld, limit - 1, f"decoder prompt of {len(dec_ids)} tokens leaves "
                                    f"no room under max_target_positions={limit}")
        if len(dec_ids) + params.max_tokens > limit:
            raise SamplingParamsError(
                "max_tokens", limit - len(dec_ids),
                f"decoder prompt ({len(dec_ids)}) + max_tokens ({params.max_tokens}) exceeds "
                f"max_target_positions={limit}")
        internal_id = self.output_processor.assign_request_id(request_id)
        mm_data = parsed.mm_data  # another modality is the processor's to refuse
        # Content hashes only where a cache reads them (vLLM PR #23690): without the processing
        # cache (and so without its mirror) the items are named by the request.
        mm = self.processor.apply("", mm_data, parsed.mm_processor_kwargs,
                                  mm_uuids=self.processor.request_uuids(internal_id, mm_data))
        mm_inputs = mm.mm_kwargs["audio"]
        req = Request(request_id=internal_id,
                      prompt_token_ids=dec_ids, mm_inputs=mm_inputs,
                      mm_hashes=mm.mm_hashes.get("audio", []), sampling_params=params,
                      arrival_time=arrival_time if arrival_time is not None else time.time(),
                      external_req_id=request_id)
        # The engine core's per-request rules, here too, so a batch is refused before any of it is
        # queued (vLLM's Processor validates in P0); the KV-cache fit stays the scheduler's.
        mc = self.vllm_config.model_config
        check_request_limits(req, limit, True, mc.max_encoder_len, vocab_size=mc.hf_config_dict.get("vocab_size"),
                             encoder_input_shape=(mc.hf_config_dict["num_mel_bins"], 2 * mc.max_encoder_len))
        return req

    def _queue(self, req: Request) -> str:
        self.engine_core.add_request(req)
        self.output_processor.add_request(req.request_id, req.external_req_id)
        return req.external_req_id

    def _free_request_id(self) -> str:
        while (rid := str(next(self._ids))) in self.output_processor.external_req_ids:
            pass
        return rid

    def abort_request(self, request_ids: str | Iterable[str]) -> None:
        """Abort requests by the user's ids (unknown ones skipped); their blocks go back to the pool."""
        ids = [request_ids] if isinstance(request_ids, str) else request_ids
        self.engine_core.abort_requests(self.output_processor.abort_requests(ids))

    def step(self) -> list:
        """One engine step: the RequestOutputs finished in it (user's ids), and first those of
        requests added by ``add_request`` that finished during a ``generate()``. Raises the
        RefimplError of a request the engine core refused ("mp"), ``request_id`` the user's."""
        if self._held_outputs:
            held, self._held_outputs = self._held_outputs, []
            return held
        return self._step_core()

    def _step_core(self) -> list:
        try:
            outputs = self.engine_core.step()
        except RefimplError as e:
            if e.request_id is not None:
                e.request_id = self.output_processor.finish_request(e.request_id)
            raise
        return self.output_processor.process_outputs(outputs)

    def has_unfinished_requests(self) -> bool:
        return bool(self._held_outputs) or self.engine_core.has_unfinished_requests()

    def reset_mm_cache(self) -> None:
        """Empty the multimodal caches (refused while requests are in flight)."""
        self.engine_core.reset_mm_cache()

    def shutdown(self) -> None:
        """End the engine-core process ("mp"); a no-op in-process."""
        self.engine_core.shutdown()

    def generate(self, prompts: Sequence[dict], params: SamplingParams | Sequence[SamplingParams] | None = None,
                 *, use_tqdm: bool = False) -> list:
        """Run ``prompts`` to completion; RequestOutputs in input order. The batch is one unit (vLLM
        PR #27420): lengths first, then every prompt validated and processed before any is queued;
        on any exception (a refusal by the engine core, an interrupt) the batch's requests still in
        flight are aborted before it is re-raised. Requests queued earlier with ``add_request`` run
        too; their outputs come from the next ``step()``. Raises SamplingParamsError ("params")
        when params and prompts differ in length, and what ``add_request`` raises."""
        if isinstance(params, (list, tuple)):
            if len(params) != len(prompts):
                raise SamplingParamsError("params", f"{len(prompts)} (one per prompt)",
                                          f"{len(params)} SamplingParams for {len(prompts)} prompts")
            params_list = list(params)
        else:
            params_list = [params] * len(prompts)
        reqs = [self._process_request(None, p, sp, None) for p, sp in zip(prompts, params_list)]
        ids: list[str] = []
        done: dict[str, Any] = {}
        try:
            for req in reqs:
                ids.append(self._queue(req))
            own = set(ids)
            with tqdm(total=len(ids), disable=not use_tqdm, desc="generate") as bar:
                while len(done) < len(ids) and self.engine_core.has_unfinished_requests():
                    for out in self._step_core():
                        if out.request_id in own:
                            done[out.request_id] = out
                            bar.update(1)
                        else:
                            self._held_outputs.append(out)
        except BaseException:
            self.abort_request([i for i in ids if i not in done])
            raise
        return [done[i] for i in ids]


class LLM:
    """Front class as ``vllm.LLM``: ``LLM("whisper-tiny").generate(prompts, SamplingParams(...))``."""

    def __init__(self, model: str = "whisper-tiny", **kwargs: Any):
        self.llm_engine = LLMEngine.from_args(model, **kwargs)

    def generate(self, prompts: Sequence[dict], sampling_params=None, *, use_tqdm: bool = False):
        return self.llm_engine.generate(prompts, sampling_params, use_tqdm=use_tqdm)

    def reset_mm_cache(self) -> None:
        self.llm_engine.reset_mm_cache()
