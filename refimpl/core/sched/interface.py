"""SchedulerInterface: the contract between the engine core and its scheduler.

Mirrors ``vllm/v1/core/sched/interface.py`` (0.10.2), reduced to the calls refimpl's engine core
makes; ``update_from_output`` returns finished requests, not ``EngineCoreOutputs``. Left out:
draft tokens, prefix-cache reset, stats, KV connectors, shutdown.
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
        """Plan one step: tokens per request, encoder inputs, KV blocks (allocated before it returns);
        advances ``num_computed_tokens`` of the scheduled requests."""
        raise NotImplementedError

    @abstractmethod
    def update_from_output(self, scheduler_output: SchedulerOutput,
                           model_runner_output: ModelRunnerOutput) -> list[RequestOutput]:
        """Append the sampled tokens, finish requests (check_stop) and free their blocks; tokens of a
        request mid-prefill, aborted or preempted are dropped. One RequestOutput per finished request."""
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
        """Finished requests whose ids the next ``schedule()`` hands the runner."""
        raise NotImplementedError

    def has_requests(self) -> bool:
        """Unfinished requests, or finished ones not yet handed to the runner (the engine steps while true)."""
        return self.has_unfinished_requests() or self.has_finished_requests()
