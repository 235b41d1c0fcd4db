"""Scheduler: the V1 engine's per-step choice of requests, tokens, encoder inputs and blocks.

Mirrors ``vllm/v1/core/sched/scheduler.py`` (0.10.2): RUNNING first, preempting the last by
recompute when blocks run out; then WAITING in strict FCFS order unless something was preempted
(the first waiting request that does not fit ends admission, PR #28911). Admission reads
``get_encoder_len("scheduler")`` on every attempt. A preempted request comes back NEW; encoder-
decoder requests are never chunked. Left out: priorities, LoRA, structured output, spec decode,
KV connectors, stats, async scheduling, prefix caching.
"""
from __future__ import annotations

from typing import Iterable, Optional

from refimpl.config import VllmConfig
from refimpl.core.encoder_cache_manager import EncoderCacheManager, compute_encoder_budget
from refimpl.core.kv_cache_manager import KVCacheBlocks, KVCacheManager
from refimpl.core.sched.encoder_inputs import free_encoder_inputs, try_schedule_encoder_inputs
from refimpl.core.sched.interface import SchedulerInterface
from refimpl.core.sched.output import SchedulerOutput
from refimpl.core.sched.request_queue import FCFSRequestQueue
from refimpl.core.sched.step import ScheduledStep
from refimpl.core.sched.utils import check_kv_cache_fit, check_request_limits, check_stop
from refimpl.errors import ConfigError, EncoderLengthMismatchError, InvalidInputError
from refimpl.outputs import ModelRunnerOutput, RequestOutput
from refimpl.request import Request, RequestStatus


class Scheduler(SchedulerInterface):
    """The V1 scheduler. ``kv_cache_manager``: a KVCacheManager or a block count (None:
    cache_config.num_gpu_blocks). Encoder budgets (tokens): given, or read from ``mm_budget`` (the
    runner's MultiModalBudget: the row's own lookup, pass #5, ``encoder_budget_at("scheduler_init")``),
    else ``compute_encoder_budget``. ``max_item_tokens``: the largest encoder item the profile run covered (admission
    refuses a larger one; None: the budgets bound it). ``check_encoder_len``: refuse a
    cross-attention length that is not the model's (EncoderLengthMismatchError)."""

    def __init__(self, vllm_config: VllmConfig, kv_cache_manager: KVCacheManager | int | None = None,
                 *, encoder_compute_budget: Optional[int] = None,
                 encoder_cache_size: Optional[int] = None, mm_registry=None, mm_budget=None,
                 max_item_tokens: Optional[int] = None, check_encoder_len: bool = True):
        self.vllm_config = vllm_config
        mc, sc = vllm_config.model_config, vllm_config.scheduler_config
        self.max_num_running_reqs = sc.max_num_seqs
        self.max_num_scheduled_tokens = sc.max_num_batched_tokens
        self.max_model_len = mc.max_model_len
        self.is_encoder_decoder = mc.is_encoder_decoder
        self.chunked_prefill_enabled = not self.is_encoder_decoder
        self.max_encoder_len = mc.max_encoder_len  # the model's own (1500), read once
        self.check_encoder_len = check_encoder_len
        hf = mc.hf_config_dict
        self.eos_token_id = hf.get("eos_token_id")
        self.vocab_size = hf.get("vocab_size")   # token ids the embedding and the sampler take
        # what the Whisper runner encodes: (num_mel_bins, 3000), 1500 tokens after the stride-2 conv
        self.encoder_input_shape = ((hf["num_mel_bins"], 2 * self.max_encoder_len)
                                    if self.is_encoder_decoder else None)
        if not isinstance(kv_cache_manager, KVCacheManager):
            num_blocks = kv_cache_manager or vllm_config.cache_config.num_gpu_blocks
            if num_blocks is None:
                raise ConfigError("num_gpu_blocks", "> 0", "no KV cache size given")
            kv_cache_manager = KVCacheManager(vllm_config.cache_config.block_size, num_blocks,
                                              self.is_encoder_decoder)
        self.kv_cache_manager = kv_cache_manager
        mm_registry = vllm_config.use_mm_registry(mm_registry)
        if (encoder_compute_budget is None or encoder_cache_size is None) and mm_budget is not None:
            encoder_compute_budget, encoder_cache_size = mm_budget.encoder_budget_at("scheduler_init")
        elif encoder_compute_budget is None or encoder_cache_size is None:
            encoder_compute_budget, encoder_cache_size = compute_encoder_budget(mc, sc, mm_registry)
        self.max_num_encoder_input_tokens = encoder_compute_budget
        self.encoder_cache_manager = EncoderCacheManager(encoder_cache_size)
        self.encoder_item_limit = min(encoder_compute_budget, encoder_cache_size,
                                      max_item_tokens or encoder_compute_budget)
        self.requests: dict[str, Request] = {}
        self.waiting = FCFSRequestQueue()
        self.running: list[Request] = []
        self.finished_req_ids: set[str] = set()

    # ------------------------------------------------------------------ requests in/out
    def add_request(self, request: Request) -> None:
        """Raises InvalidInputError for a duplicate id, and what ``check_request_limits`` /
        ``check_kv_cache_fit`` raise for a request that can never be served."""
        if request.request_id in self.requests:
            raise InvalidInputError("request_id", "unique", f"{request.request_id!r} is in flight")
        check_request_limits(request, self.max_model_len, self.is_encoder_decoder, self.encoder_item_limit,
                             vocab_size=self.vocab_size, encoder_input_shape=self.encoder_input_shape)
        check_kv_cache_fit(request, self.kv_cache_manager, self.max_model_len, self.max_encoder_len,
                           self.is_encoder_decoder)
        if request.eos_token_id is None:
            request.eos_token_id = self.eos_token_id
        self.requests[request.request_id] = request
        self.waiting.add_request(request)

    def finish_requests(self, request_ids: str | Iterable[str], finished_status: RequestStatus) -> None:
        """Raises InvalidInputError for a status that is not a FINISHED_* one."""
        if not RequestStatus.is_finished(finished_status):
            raise InvalidInputError("finished_status", "a FINISHED_* status", f"got {finished_status!r}")
        for rid in [request_ids] if isinstance(request_ids, str) else list(request_ids):
            request = self.requests.get(rid)
            if request is None or request.is_finished():
                continue
            if request.status == RequestStatus.RUNNING:
                self.running.remove(request)
            else:
                self.waiting.remove_request(request)
            request.status = finished_status
            self._free_request(request)

    def _free_request(self, request: Request) -> None:
        self.kv_cache_manager.free(request)
        self.encoder_cache_manager.free(request)
        self.finished_req_ids.add(request.request_id)
        del self.requests[request.request_id]

    def get_num_unfinished_requests(self) -> int:
        return len(self.waiting) + len(self.running)

    def has_finished_requests(self) -> bool:
        return len(self.finished_req_ids) > 0

    # ------------------------------------------------------------ one step: schedule, update_from_output
    def _preempt_request(self, request: Request) -> None:
        """Back to the front of WAITING, its blocks and encoder cache freed, to be recomputed."""
        self.kv_cache_manager.free(request)
        self.encoder_cache_manager.free(request)
        request.status = RequestStatus.PREEMPTED
        request.num_computed_tokens = 0
        request.num_preemptions += 1
        self.waiting.prepend_request(request)

    def schedule(self) -> SchedulerOutput:
        """One step, in vLLM's phases: RUNNING requests (``_schedule_running``), then WAITING ones
        in FCFS order unless something was preempted (``_schedule_waiting``), then the output
        (``_build_scheduler_output``) and the requests advanced (``_update_after_schedule``)."""
        step = ScheduledStep(self.max_num_scheduled_tokens, self.max_num_encoder_input_tokens)
        self._schedule_running(step)
        if not step.preempted:
            self._schedule_waiting(step)
        out = self._build_scheduler_output(step)
        self._update_after_schedule(out)
        return out

    def _schedule_running(self, step: ScheduledStep) -> None:
        """Phase 1: each RUNNING request's next tokens (a prefill chunk or one decode token) and
        encoder inputs, preempting the last running request when KV blocks run out."""
        req_index = 0
        while req_index < len(self.running) and step.token_budget > 0:
            request = self.running[req_index]
            num_new = min(request.num_tokens - request.num_computed_tokens, step.token_budget)
            items: list[int] = []
            new_enc_budget = step.encoder_compute_budget
            if request.has_encoder_inputs and num_new > 0:
                items, num_new, new_enc_budget = self._try_schedule_encoder_inputs(
                    request, request.num_computed_tokens, num_new, step.encoder_compute_budget)
            if num_new <= 0:
                req_index += 1
                continue
            blocks = self._allocate_or_preempt(request, num_new, step)
            if blocks is None:  # the request itself was preempted
                break
            step.running_reqs.append(request)
            step.new_blocks_of[request.request_id] = blocks
            step.add(request, num_new, items, new_enc_budget, self.encoder_cache_manager)
            req_index += 1

    def _allocate_or_preempt(self, request: Request, num_new: int,
                             step: ScheduledStep) -> Optional[KVCacheBlocks]:
        """KV blocks for ``num_new`` more tokens of running ``request``, preempting the last running
        request (FCFS) until they fit; None once ``request`` itself is preempted."""
        while True:
            blocks = self.kv_cache_manager.allocate_slots(request, num_new)
            if blocks is not None:
                return blocks
            victim = self.running.pop()
            self._preempt_request(victim)
            step.preempted.append(victim)
            if victim is request:
                return None

    def _schedule_waiting(self, step: ScheduledStep) -> None:
        """Phase 2: WAITING requests in strict FCFS order (vLLM PR #28911): the first that does not
        fit ends admission, whichever rule stops it (whole prompt without chunked prefill, encoder
        budget or cache, KV blocks, ``max_num_seqs``)."""
        while self.waiting and step.token_budget > 0:
            if len(self.running) == self.max_num_running_reqs:
                break
            request = self.waiting.peek_request()
            num_new = request.num_tokens  # num_computed_tokens is 0: no prefix caching
            if not self.chunked_prefill_enabled and num_new > step.token_budget:
                break  # whole prompt or nothing; later arrivals wait behind it
            num_new = min(num_new, step.token_budget)
            items: list[int] = []
            new_enc_budget = step.encoder_compute_budget
            if request.has_encoder_inputs:
                items, num_new, new_enc_budget = self._try_schedule_encoder_inputs(
                    request, 0, num_new, step.encoder_compute_budget)
                if num_new == 0:
                    break
            blocks = self.kv_cache_manager.allocate_slots(request, num_new, self._num_encoder_tokens(request))
            if blocks is None:
                break
            self.waiting.pop_request()
            self.running.append(request)
            step.new_reqs.append(request)
            request.status = RequestStatus.RUNNING
            step.add(request, num_new, items, new_enc_budget, self.encoder_cache_manager)

    def _num_encoder_tokens(self, request: Request) -> int:
        """Cross-attention positions to allocate at admission (0: decoder-only or no audio), read
        from ``get_encoder_len("scheduler")`` on every attempt: the call site PR #24989 changed.
        Raises EncoderLengthMismatchError when it is not the model's length (``check_encoder_len``)."""
        if not (self.is_encoder_decoder and request.has_encoder_inputs):
            return 0
        num_encoder_tokens = self.vllm_config.get_encoder_len("scheduler")
        if self.check_encoder_len and num_encoder_tokens != self.max_encoder_len:
            raise EncoderLengthMismatchError(
                "num_encoder_tokens", self.max_encoder_len,
                f"scheduler got {num_encoder_tokens} encoder tokens for cross-attention, "
                f"the model has {self.max_encoder_len} (max_source_positions)")
        return num_encoder_tokens

    # ------------------------------------------------------------ phase: encoder inputs
    def _try_schedule_encoder_inputs(self, request: Request, num_computed_tokens: int, num_new_tokens: int,
                                     encoder_budget: int) -> tuple[list[int], int, int]:
        """``try_schedule_encoder_inputs`` on this scheduler's encoder cache: (input indices,
        num_new_tokens trimmed, encoder budget left)."""
        return try_schedule_encoder_inputs(request, num_computed_tokens, num_new_tokens, encoder_budget,
                                           self.encoder_cache_manager, self.is_encoder_decoder)

    # ------------------------------------------------------------ phase: the output
    def _build_scheduler_output(self, step: ScheduledStep) -> SchedulerOutput:
        """The step's SchedulerOutput, with the requests finished since the last step."""
        assert (step.total_num_scheduled_tokens <= self.max_num_scheduled_tokens
                and len(self.running) <= self.max_num_running_reqs)
        return step.make_output(self.kv_cache_manager, self.finished_req_ids)

    def _update_after_schedule(self, scheduler_output: SchedulerOutput) -> None:
        """Advance each scheduled request by its tokens (before the runner computes them, as vLLM)
        and start a new set of finished ids."""
        for rid, n in scheduler_output.num_scheduled_tokens.items():
            self.requests[rid].num_computed_tokens += n
        self.finished_req_ids = set()

    # ------------------------------------------------------------ after the runner
    def update_from_output(self, scheduler_output: SchedulerOutput,
                           model_runner_output: ModelRunnerOutput) -> list[RequestOutput]:
        """Finished requests of this step, in the order they were scheduled."""
        outputs: list[RequestOutput] = []
        stopped: set[str] = set(model_runner_output.req_errors)
        for rid, err in model_runner_output.req_errors.items():  # the runner could not set it up
            request = self.requests.get(rid)
            if request is not None and request.status == RequestStatus.RUNNING:
                request.status = RequestStatus.FINISHED_ERROR
                self._free_request(request)
                outputs.append(RequestOutput(rid, list(request.prompt_token_ids), list(request.output_token_ids),
                                             "error", request.num_preemptions, error=err))
        index = model_runner_output.req_id_to_index
        for rid in scheduler_output.num_scheduled_tokens:
            request = self.requests.get(rid)
            if request is None or request.status != RequestStatus.RUNNING:
                continue
            free_encoder_inputs(request, self.encoder_cache_manager, self.is_encoder_decoder)
            if request.num_computed_tokens < request.num_tokens or rid not in index:
                continue
            for tok in model_runner_output.sampled_token_ids[index[rid]]:
                request.append_output_token_ids(int(tok))
                if check_stop(request, self.max_model_len, self.vllm_config.scheduler_config.stop_check):
                    break
            if request.is_finished():
                stopped.add(rid)
                self._free_request(request)
                outputs.append(RequestOutput(rid, list(request.prompt_token_ids),
                                             list(request.output_token_ids),
                                             request.get_finished_reason(), request.num_preemptions))
        if stopped:
            self.running = [r for r in self.running if r.request_id not in stopped]
        return outputs
