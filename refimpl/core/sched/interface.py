"""SchedulerInterface: the contract between the engine core and its scheduler.

Mirrors ``vllm/v1/core/sched/interface.py`` (v0.10.2), reduced to the calls refimpl's engine
core makes. Left out: draft tokens, prefix-cache reset, stats, KV connectors, shutdown.
``update_from_output`` returns finished requests, not per-client ``EngineCoreOutputs``.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:
    from refimpl.core.sched.output import SchedulerOutput
    from refimpl.outputs import ModelRunnerOutput, RequestOutput
    from refimpl.request import Request, RequestStatus


class SchedulerInterface(ABC):

    @abstractmethod
    def schedule(self) -> SchedulerOutput:
        """Plan one engine step (one forward pass): how many tokens each request computes
        (a whole prompt, a prefill chunk, or 1 for a decode step), which encoder inputs run,
        and the KV blocks they write. Blocks for every scheduled token are allocated before
        it returns, and ``num_computed_tokens`` of scheduled requests is advanced (V1's
        ``_update_after_schedule``)."""
        raise NotImplementedError

    @abstractmethod
    def update_from_output(self, scheduler_output: SchedulerOutput,
                           model_runner_output: ModelRunnerOutput) -> list[RequestOutput]:
        """Append the sampled tokens of the step, finish requests (max_tokens,
        max_model_len, EOS unless ignore_eos, stop_token_ids) and free their blocks. Tokens
        for a request still in a prefill chunk, or for one aborted or preempted since, are
        dropped. Returns one RequestOutput per request finished in this step."""
        raise NotImplementedError

    @abstractmethod
    def add_request(self, request: Request) -> None:
        """Queue a new request (WAITING)."""
        raise NotImplementedError

    @abstractmethod
    def finish_requests(self, request_ids: str | Iterable[str], finished_status: RequestStatus) -> None:
        """Finish requests from outside (abort): their blocks and encoder cache are freed;
        unknown or already finished ids are ignored."""
        raise NotImplementedError

    @abstractmethod
    def get_num_unfinished_requests(self) -> int:
        """Requests WAITING or RUNNING."""
        raise NotImplementedError

    def has_unfinished_requests(self) -> bool:
        return self.get_num_unfinished_requests() > 0

    @abstractmethod
    def has_finished_requests(self) -> bool:
        """Requests finished (or aborted) whose ids the next ``schedule()`` hands the runner, so
        that it frees their state; not the same as ``not has_unfinished_requests()``."""
        raise NotImplementedError

    def has_requests(self) -> bool:
        """Unfinished requests, or finished ones not yet handed to the runner (vLLM PR #14388:
        the engine steps while this holds)."""
        return self.has_unfinished_requests() or self.has_finished_requests()
