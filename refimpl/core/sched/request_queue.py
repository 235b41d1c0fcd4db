"""The scheduler's WAITING queue: ``FCFSRequestQueue`` of ``vllm/v1/core/sched/request_queue.py``
(0.10.2) as a deque. Left out: the ABC, ``SchedulingPolicy``, ``PriorityRequestQueue``.
"""
from __future__ import annotations

from collections import deque
from typing import Iterable

from refimpl.request import Request


class FCFSRequestQueue(deque[Request]):
    """First come, first served; preempted and skipped requests go back to the front."""

    def add_request(self, request: Request) -> None:
        self.append(request)

    def pop_request(self) -> Request:
        """Raises IndexError on an empty queue."""
        return self.popleft()

    def peek_request(self) -> Request:
        """Raises IndexError on an empty queue."""
        return self[0]

    def prepend_request(self, request: Request) -> None:
        self.appendleft(request)

    def prepend_requests(self, requests: Iterable[Request]) -> None:
        """Put ``requests`` back at the front, in their order."""
        self.extendleft(reversed(list(requests)))

    def remove_request(self, request: Request) -> None:
        """Raises ValueError when ``request`` is not queued."""
        self.remove(request)
