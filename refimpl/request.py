"""Request and RequestStatus: the scheduler's view of one generation request.

Mirrors ``vllm/v1/request.py`` (0.10.2). ``mm_positions[i]``: item i's placeholder span (Whisper:
offset 0, ``input_features.shape[-1] // 2`` encoder tokens when not given). Left out: structured
output, LoRA, pooling, KV transfer, events, priorities, spec decode, block hashes.
"""
from __future__ import annotations

import enum
import time
from typing import Any, Optional

from refimpl.errors import InvalidInputError
from refimpl.multimodal.inputs import PlaceholderRange
from refimpl.sampling_params import SamplingParams


class RequestStatus(enum.IntEnum):
    WAITING = enum.auto()
    RUNNING = enum.auto()
    PREEMPTED = enum.auto()
    # Every status after PREEMPTED is a finished one.
    FINISHED_STOPPED = enum.auto()
    FINISHED_LENGTH_CAPPED = enum.auto()
    FINISHED_ABORTED = enum.auto()
    FINISHED_ERROR = enum.auto()  # the runner could not set up its state (newer vLLM's name)

    @staticmethod
    def is_finished(status: "RequestStatus") -> bool:
        return status > RequestStatus.PREEMPTED

    @staticmethod
    def get_finished_reason(status: "RequestStatus") -> Optional[str]:
        return _FINISHED_REASONS.get(status)


_FINISHED_REASONS = {RequestStatus.FINISHED_STOPPED: "stop",
                     RequestStatus.FINISHED_LENGTH_CAPPED: "length",
                     RequestStatus.FINISHED_ABORTED: "abort",
                     RequestStatus.FINISHED_ERROR: "error"}


def _encoder_len_of(item: dict[str, Any]) -> int:
    feats = item.get("input_features") if isinstance(item, dict) else None
    if feats is None or not hasattr(feats, "shape") or len(feats.shape) < 1:
        raise InvalidInputError("mm_positions", "given, or items with input_features",
                                "cannot derive the encoder length of an item")
    return int(feats.shape[-1]) // 2


class Request:
    """One request (tokens; ``arrival_time`` in s). ``request_id`` per submission,
    ``external_req_id`` the user's (default ``request_id``). Raises InvalidInputError for an empty
    or non-int prompt, or mismatched encoder inputs."""

    def __init__(self, request_id: str, prompt_token_ids: list[int],
                 sampling_params: Optional[SamplingParams] = None,
                 mm_inputs: Optional[list[dict[str, Any]]] = None,
                 mm_hashes: Optional[list[str]] = None,
                 mm_positions: Optional[list[PlaceholderRange]] = None,
                 eos_token_id: Optional[int] = None,
                 arrival_time: Optional[float] = None,
                 external_req_id: Optional[str] = None):
        if not isinstance(request_id, str) or not request_id:
            raise InvalidInputError("request_id", "a non-empty str", f"got {request_id!r}")
        prompt = list(prompt_token_ids or [])
        if not prompt:
            raise InvalidInputError("prompt_token_ids", ">= 1 token", "empty prompt")
        if not all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in prompt):
            raise InvalidInputError("prompt_token_ids", "ints >= 0", "non-integer token id")
        self.request_id = request_id
        self.external_req_id = request_id if external_req_id is None else external_req_id
        self.sampling_params = sampling_params or SamplingParams()
        self.eos_token_id = eos_token_id
        self.arrival_time = time.time() if arrival_time is None else arrival_time
        self.prompt_token_ids = prompt
        self.mm_inputs = list(mm_inputs or [])
        self.mm_hashes = list(mm_hashes or [])
        if mm_positions is None:
            mm_positions = [PlaceholderRange(0, _encoder_len_of(it)) for it in self.mm_inputs]
        self.mm_positions = list(mm_positions)
        if len(self.mm_positions) != len(self.mm_inputs):
            raise InvalidInputError("mm_positions", len(self.mm_inputs),
                                    f"{len(self.mm_positions)} ranges for {len(self.mm_inputs)} items")
        for p in self.mm_positions:
            if p.offset < 0 or p.length <= 0:
                raise InvalidInputError("mm_positions", "offset >= 0, length > 0", f"got {p}")
        self.status = RequestStatus.WAITING
        self.num_computed_tokens = 0
        self.num_preemptions = 0
        self._output_token_ids: list[int] = []
        self._all_token_ids: list[int] = list(prompt)

    # token bookkeeping
    @property
    def output_token_ids(self) -> list[int]:
        return self._output_token_ids

    @property
    def all_token_ids(self) -> list[int]:
        """Prompt + outputs so far (what a request resumed after preemption recomputes)."""
        return self._all_token_ids

    @property
    def num_tokens(self) -> int:
        return len(self._all_token_ids)

    @property
    def num_prompt_tokens(self) -> int:
        return len(self.prompt_token_ids)

    @property
    def num_output_tokens(self) -> int:
        return len(self._output_token_ids)

    @property
    def max_tokens(self) -> int:
        return self.sampling_params.max_tokens

    def append_output_token_ids(self, token_ids: int | list[int]) -> None:
        ids = [token_ids] if isinstance(token_ids, int) else list(token_ids)
        self._output_token_ids.extend(ids)
        self._all_token_ids.extend(ids)

    # encoder inputs
    @property
    def num_encoder_inputs(self) -> int:
        return len(self.mm_inputs)

    @property
    def has_encoder_inputs(self) -> bool:
        return self.num_encoder_inputs > 0

    def get_num_encoder_tokens(self, input_id: int) -> int:
        """Encoder tokens of item ``input_id`` (Whisper: 1500). Raises IndexError."""
        return self.mm_positions[input_id].length

    # status
    def is_finished(self) -> bool:
        return RequestStatus.is_finished(self.status)

    def get_finished_reason(self) -> Optional[str]:
        return RequestStatus.get_finished_reason(self.status)

    def __repr__(self) -> str:
        return (f"Request({self.request_id!r}, {self.status.name}, tokens={self.num_tokens}, "
                f"computed={self.num_computed_tokens})")
