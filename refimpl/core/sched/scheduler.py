"""Scheduler: the V1 engine's per-step choice of requests, tokens, encoder inputs and blocks.

Mirrors ``vllm/v1/core/sched/scheduler.py`` (v0.10.2): RUNNING requests first (decode and
prefill chunks), preempting the last running request by recompute when KV blocks run out;
then WAITING requests in FCFS order unless something was preempted this step. Admitting an
encoder-decoder request reads ``vllm_config.get_encoder_len("scheduler")`` on EVERY attempt,
failed ones included (a registry call or a config read, per refimpl/variants.py). The encoder
compute budget (Whisper: 1500 tokens, one audio per step) is charged per step.

Differences: a preempted request comes back as a NEW request (see sched/output.py);
encoder-decoder requests are never chunked (as vLLM 0.10.2), decoder-only ones are; the
encoder cache is token accounting only (``EncoderCacheManager``). Left out: priorities,
LoRA, structured output, spec decode, KV connectors, stats/events, async scheduling, prefix
caching. ``update_from_output`` returns only finished requests.
"""
from __future__ import annotations

from collections import deque
from typing import Iterable, Optional

from refimpl.config import VllmConfig
from refimpl.core.encoder_cache_manager import EncoderCacheManager, compute_encoder_budget
from refimpl.core.kv_cache_manager import KVCacheBlocks, KVCacheManager, cdiv
from refimpl.core.sched.output import CachedRequestData, NewRequestData, SchedulerOutput
from refimpl.core.sched.utils import check_request_limits, check_stop
from refimpl.errors import ConfigError, EncoderLengthMismatchError, InvalidInputError, SamplingParamsError
from refimpl.outputs import ModelRunnerOutput, RequestOutput
from refimpl.request import Request, RequestStatus


class Scheduler:
    """kv_cache_manager: a KVCacheManager, or a block count (None: cache_config.num_gpu_blocks).
    encoder_compute_budget / encoder_cache_size (tokens): from ``compute_encoder_budget``
    when not given. check_encoder_len: refuse a cross-attention length that is not the
    model's own (EncoderLengthMismatchError; the review warning on PR #24989).
    """

    def __init__(self, vllm_config: VllmConfig, kv_cache_manager: KVCacheManager | int | None = None,
                 *, encoder_compute_budget: Optional[int] = None,
                 encoder_cache_size: Optional[int] = None, mm_registry=None,
                 check_encoder_len: bool = True):
        self.vllm_config = vllm_config
        mc, sc = vllm_config.model_config, vllm_config.scheduler_config
        self.max_num_running_reqs = sc.max_num_seqs
        self.max_num_scheduled_tokens = sc.max_num_batched_tokens
        self.max_model_len = mc.max_model_len
        self.is_encoder_decoder = mc.is_encoder_decoder
        self.chunked_prefill_enabled = not self.is_encoder_decoder
        self.max_encoder_len = mc.max_encoder_len  # the model's own (1500), read once
        self.check_encoder_len = check_encoder_len
        self.eos_token_id = mc.hf_config_dict.get("eos_token_id")
        if not isinstance(kv_cache_manager, KVCacheManager):
            num_blocks = kv_cache_manager or vllm_config.cache_config.num_gpu_blocks
            if num_blocks is None:
                raise ConfigError("num_gpu_blocks", "> 0", "no KV cache size given")
            kv_cache_manager = KVCacheManager(vllm_config.cache_config.block_size, num_blocks,
                                              self.is_encoder_decoder)
        self.kv_cache_manager = kv_cache_manager
        if encoder_compute_budget is None or encoder_cache_size is None:
            if mm_registry is None:
                from refimpl.multimodal import MULTIMODAL_REGISTRY as mm_registry
            encoder_compute_budget, encoder_cache_size = compute_encoder_budget(mc, sc, mm_registry)
        self.max_num_encoder_input_tokens = encoder_compute_budget
        self.encoder_cache_manager = EncoderCacheManager(encoder_cache_size)
        self.requests: dict[str, Request] = {}
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.finished_req_ids: set[str] = set()

    # ------------------------------------------------------------------ requests in/out
    def add_request(self, request: Request) -> None:
        """Queue a request. Raises InvalidInputError (duplicate id, prompt too long, encoder
        input that can never fit the budget), SamplingParamsError (max_tokens beyond
        max_model_len - prompt length: 448 - decoder prompt for Whisper; or more than the
        whole KV cache could ever hold for this one request)."""
        if request.request_id in self.requests:
            raise InvalidInputError("request_id", "unique", f"{request.request_id!r} is in flight")
        check_request_limits(request, self.max_model_len, self.is_encoder_decoder,
                             min(self.max_num_encoder_input_tokens, self.encoder_cache_manager.cache_size))
        # A request that cannot fit even alone would preempt itself forever (livelock).
        bs = self.kv_cache_manager.block_size
        usable = self.kv_cache_manager.block_pool.num_gpu_blocks - 1 - (
            cdiv(self.max_encoder_len, bs) if self.is_encoder_decoder and request.has_encoder_inputs else 0)
        max_len = min(request.num_prompt_tokens + request.max_tokens, self.max_model_len)
        if usable < 1:
            raise ConfigError("num_gpu_blocks", self.kv_cache_manager.block_pool.num_gpu_blocks - usable + 1,
                              f"{self.kv_cache_manager.block_pool.num_gpu_blocks} KV blocks leave none "
                              f"for a request's own tokens")
        if cdiv(request.num_prompt_tokens + 1, bs) > usable:  # not even one output token fits
            raise InvalidInputError("prompt_token_ids", usable * bs - 1,
                                    f"prompt of {request.num_prompt_tokens} tokens leaves no room in the "
                                    f"KV cache ({usable} blocks of {bs} after cross-attention)")
        if cdiv(max_len, bs) > usable:
            raise SamplingParamsError("max_tokens", usable * bs - request.num_prompt_tokens,
                                      f"prompt + max_tokens = {max_len} tokens cannot fit the KV "
                                      f"cache ({usable} blocks of {bs} after cross-attention)")
        if request.eos_token_id is None:
            request.eos_token_id = self.eos_token_id
        self.requests[request.request_id] = request
        self.waiting.append(request)

    def finish_requests(self, request_ids: str | Iterable[str], finished_status: RequestStatus) -> None:
        """Finish requests from outside (abort): blocks and encoder cache freed; unknown or
        already finished ids are ignored. Raises InvalidInputError for a non-finished status."""
        if not RequestStatus.is_finished(finished_status):
            raise InvalidInputError("finished_status", "a FINISHED_* status", f"got {finished_status!r}")
        ids = [request_ids] if isinstance(request_ids, str) else list(request_ids)
        for rid in ids:
            request = self.requests.get(rid)
            if request is None or request.is_finished():
                continue
            if request.status == RequestStatus.RUNNING:
                self.running.remove(request)
            else:
                self.waiting.remove(request)
            request.status = finished_status
            self._free_request(request)

    def _free_request(self, request: Request) -> None:
        self.kv_cache_manager.free(request)
        self.encoder_cache_manager.free(request)
        self.finished_req_ids.add(request.request_id)
        del self.requests[request.request_id]

    def get_num_unfinished_requests(self) -> int:
        return len(self.waiting) + len(self.running)

    def has_unfinished_requests(self) -> bool:
        return self.get_num_unfinished_requests() > 0

    # ------------------------------------------------------------------ encoder inputs
    def _try_schedule_encoder_inputs(self, request: Request, num_computed_tokens: int,
                                     num_new_tokens: int, budget: int) -> tuple[list[int], int, int]:
        """Encoder inputs to run with this step's tokens; trims num_new_tokens (to 0 when
        the first unfitting item starts at num_computed_tokens). Returns (items,
        num_new_tokens, remaining budget)."""
        items: list[int] = []
        num_tokens_to_schedule = 0
        for i, pos in enumerate(request.mm_positions):
            if self.is_encoder_decoder:
                if num_computed_tokens > 0:  # encoded on the first decoder step
                    continue
            else:
                if pos.offset >= num_computed_tokens + num_new_tokens:
                    break
                if (pos.offset + pos.length <= num_computed_tokens
                        or self.encoder_cache_manager.has_cache(request, i)):
                    continue
            if not self.encoder_cache_manager.can_allocate(request, i, budget, num_tokens_to_schedule):
                if not self.is_encoder_decoder and num_computed_tokens < pos.offset:
                    num_new_tokens = pos.offset - num_computed_tokens
                else:
                    num_new_tokens = 0
                break
            budget -= pos.length
            num_tokens_to_schedule += pos.length
            items.append(i)
        return items, num_new_tokens, budget

    def _free_encoder_inputs(self, request: Request) -> None:
        """Free the cache space of items whose tokens are all computed (encoder-decoder:
        after the first decoder step)."""
        for i in sorted(self.encoder_cache_manager.get_cached_input_ids(request)):
            pos = request.mm_positions[i]
            if (request.num_computed_tokens > 0 if self.is_encoder_decoder
                    else pos.offset + pos.length <= request.num_computed_tokens):
                self.encoder_cache_manager.free_encoder_input(request, i)

    def _get_num_encoder_tokens(self, request: Request) -> int:
        """Cross-attention length for admitting ``request`` (the call site PR #24989 changed)."""
        if not (self.is_encoder_decoder and request.has_encoder_inputs):
            return 0
        n = self.vllm_config.get_encoder_len("scheduler")
        if self.check_encoder_len and n != self.max_encoder_len:
            raise EncoderLengthMismatchError(
                "num_encoder_tokens", self.max_encoder_len,
                f"scheduler got {n} encoder tokens for cross-attention, the model has "
                f"{self.max_encoder_len} (max_source_positions)")
        return n

    # ------------------------------------------------------------------ one step
    def _preempt(self, request: Request) -> None:
        self.kv_cache_manager.free(request)
        self.encoder_cache_manager.free(request)
        request.status = RequestStatus.PREEMPTED
        request.num_computed_tokens = 0
        request.num_preemptions += 1
        self.waiting.appendleft(request)

    def schedule(self) -> SchedulerOutput:
        """Plan one step. Blocks for every scheduled token are allocated before it returns;
        ``num_computed_tokens`` of scheduled requests is advanced (V1's _update_after_schedule).
        """
        new_reqs: list[Request] = []
        running_reqs: list[Request] = []
        preempted: list[Request] = []
        new_blocks_of: dict[str, KVCacheBlocks] = {}
        num_scheduled: dict[str, int] = {}
        encoder_inputs: dict[str, list[int]] = {}
        token_budget = self.max_num_scheduled_tokens
        encoder_budget = self.max_num_encoder_input_tokens

        # 1. RUNNING requests.
        req_index = 0
        while req_index < len(self.running) and token_budget > 0:
            request = self.running[req_index]
            num_new = min(request.num_tokens - request.num_computed_tokens, token_budget)
            items: list[int] = []
            new_enc_budget = encoder_budget
            if request.has_encoder_inputs and num_new > 0:
                items, num_new, new_enc_budget = self._try_schedule_encoder_inputs(
                    request, request.num_computed_tokens, num_new, encoder_budget)
            if num_new <= 0:
                req_index += 1
                continue
            while True:
                blocks = self.kv_cache_manager.allocate_slots(request, num_new)
                if blocks is not None:
                    break
                victim = self.running.pop()  # the last running request: FCFS preemption
                self._preempt(victim)
                preempted.append(victim)
                if victim is request:
                    break
            if blocks is None:
                break
            running_reqs.append(request)
            new_blocks_of[request.request_id] = blocks
            num_scheduled[request.request_id] = num_new
            token_budget -= num_new
            req_index += 1
            if items:
                encoder_inputs[request.request_id] = items
                for i in items:
                    self.encoder_cache_manager.allocate(request, i)
                encoder_budget = new_enc_budget

        # 2. WAITING requests, only when nothing was preempted this step.
        skipped: list[Request] = []
        while not preempted and self.waiting and token_budget > 0:
            if len(self.running) == self.max_num_running_reqs:
                break
            request = self.waiting[0]
            num_new = request.num_tokens  # num_computed_tokens is 0: no prefix caching
            if not self.chunked_prefill_enabled and num_new > token_budget:
                skipped.append(self.waiting.popleft())  # whole prompt or nothing
                continue
            num_new = min(num_new, token_budget)
            items, new_enc_budget = [], encoder_budget
            if request.has_encoder_inputs:
                items, num_new, new_enc_budget = self._try_schedule_encoder_inputs(
                    request, 0, num_new, encoder_budget)
                if num_new == 0:
                    break
            num_encoder_tokens = self._get_num_encoder_tokens(request)
            blocks = self.kv_cache_manager.allocate_slots(request, num_new, num_encoder_tokens)
            if blocks is None:
                break
            self.waiting.popleft()
            self.running.append(request)
            new_reqs.append(request)
            request.status = RequestStatus.RUNNING
            num_scheduled[request.request_id] = num_new
            token_budget -= num_new
            if items:
                encoder_inputs[request.request_id] = items
                for i in items:
                    self.encoder_cache_manager.allocate(request, i)
                encoder_budget = new_enc_budget
        self.waiting.extendleft(reversed(skipped))

        total = sum(num_scheduled.values())
        assert total <= self.max_num_scheduled_tokens and len(self.running) <= self.max_num_running_reqs
        out = SchedulerOutput(
            scheduled_new_reqs=[NewRequestData.from_request(
                r, self.kv_cache_manager.get_block_ids(r.request_id)) for r in new_reqs],
            scheduled_cached_reqs=self._make_cached_request_data(running_reqs, new_blocks_of),
            num_scheduled_tokens=num_scheduled,
            total_num_scheduled_tokens=total,
            scheduled_encoder_inputs=encoder_inputs,
            finished_req_ids=self.finished_req_ids,
            preempted_req_ids={r.request_id for r in preempted},
        )
        for rid, n in num_scheduled.items():
            self.requests[rid].num_computed_tokens += n
        self.finished_req_ids = set()
        return out

    @staticmethod
    def _make_cached_request_data(running_reqs: list[Request],
                                  new_blocks_of: dict[str, KVCacheBlocks]) -> CachedRequestData:
        cached = CachedRequestData.make_empty()
        for r in running_reqs:
            blocks = new_blocks_of[r.request_id]
            cached.req_ids.append(r.request_id)
            cached.new_block_ids.append(None if blocks.is_empty() else blocks.get_block_ids())
            cached.num_computed_tokens.append(r.num_computed_tokens)
        return cached

    # ------------------------------------------------------------------ results
    def update_from_output(self, scheduler_output: SchedulerOutput,
                           model_runner_output: ModelRunnerOutput) -> list[RequestOutput]:
        """Append sampled tokens, finish requests (max_tokens, max_model_len, EOS unless
        ignore_eos, stop_token_ids), free their blocks. Tokens for a request still in a
        prefill chunk, or for one aborted / preempted since, are dropped.
        Returns one RequestOutput per request finished in this step.
        """
        outputs: list[RequestOutput] = []
        stopped: set[str] = set()
        index = model_runner_output.req_id_to_index
        for rid in scheduler_output.num_scheduled_tokens:
            request = self.requests.get(rid)
            if request is None or request.status != RequestStatus.RUNNING:
                continue
            self._free_encoder_inputs(request)
            if request.num_computed_tokens < request.num_tokens or rid not in index:
                continue
            for tok in model_runner_output.sampled_token_ids[index[rid]]:
                request.append_output_token_ids(int(tok))
                if check_stop(request, self.max_model_len):
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
