"""ScheduledStep: one ``Scheduler.schedule()`` call's budgets left and what it has chosen.

vLLM's ``schedule()`` (``vllm/v1/core/sched/scheduler.py``, 0.10.2) keeps these as locals
(``token_budget``, ``encoder_compute_budget``, ``scheduled_new_reqs``, ``scheduled_running_reqs``,
``preempted_reqs``, ``req_to_new_blocks``, ``num_scheduled_tokens``, ``scheduled_encoder_inputs``) and
builds the SchedulerOutput from them at its end; here they are one object that the scheduler's phase
helpers share, and that builds the output.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from refimpl.core.encoder_cache_manager import EncoderCacheManager
from refimpl.core.kv_cache_manager import KVCacheBlocks, KVCacheManager
from refimpl.core.sched.output import CachedRequestData, NewRequestData, SchedulerOutput
from refimpl.request import Request


@dataclass
class ScheduledStep:
    """Budgets left (``token_budget``: tokens; ``encoder_compute_budget``: encoder tokens) and the step's
    choices: requests admitted (``new_reqs``), running ones scheduled again (``running_reqs``, with
    the blocks added this step in ``new_blocks_of``), ``preempted`` ones, tokens per request id
    (``num_scheduled``) and encoder input indices per request id (``encoder_inputs``)."""
    token_budget: int
    encoder_compute_budget: int
    new_reqs: list[Request] = field(default_factory=list)
    running_reqs: list[Request] = field(default_factory=list)
    preempted: list[Request] = field(default_factory=list)
    new_blocks_of: dict[str, KVCacheBlocks] = field(default_factory=dict)
    num_scheduled: dict[str, int] = field(default_factory=dict)
    encoder_inputs: dict[str, list[int]] = field(default_factory=dict)

    @property
    def total_num_scheduled_tokens(self) -> int:
        return sum(self.num_scheduled.values())

    def add(self, request: Request, num_new_tokens: int, encoder_items: list[int], encoder_budget_left: int,
            encoder_cache_manager: EncoderCacheManager) -> None:
        """Schedule ``num_new_tokens`` of ``request`` and its ``encoder_items`` (input indices: their
        encoder-cache space is taken and the encoder budget becomes ``encoder_budget_left``)."""
        self.num_scheduled[request.request_id] = num_new_tokens
        self.token_budget -= num_new_tokens
        if encoder_items:
            self.encoder_inputs[request.request_id] = encoder_items
            for i in encoder_items:
                encoder_cache_manager.allocate(request, i)
            self.encoder_compute_budget = encoder_budget_left

    def make_output(self, kv_cache_manager: KVCacheManager, finished_req_ids: set[str]) -> SchedulerOutput:
        """The SchedulerOutput: new requests with all their block ids, running ones with the blocks
        added this step (``_make_cached_request_data``), and ``finished_req_ids`` (the set itself)."""
        return SchedulerOutput(
            scheduled_new_reqs=[NewRequestData.from_request(
                r, kv_cache_manager.get_block_ids(r.request_id)) for r in self.new_reqs],
            scheduled_cached_reqs=CachedRequestData.from_requests(self.running_reqs, self.new_blocks_of),
            num_scheduled_tokens=self.num_scheduled,
            total_num_scheduled_tokens=self.total_num_scheduled_tokens,
            scheduled_encoder_inputs=self.encoder_inputs,
            finished_req_ids=finished_req_ids,
            preempted_req_ids={r.request_id for r in self.preempted},
        )
