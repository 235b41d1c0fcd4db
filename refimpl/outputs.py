"""What the model runner hands the scheduler, and the engine its users: ``vllm/v1/outputs.py``
and ``vllm/outputs.py`` (0.10.2; ``EngineCoreOutput`` is RequestOutput here). Left out:
logprobs, spec-decode drafts, pooling outputs, KV-connector fields.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional


@dataclass
class ModelRunnerOutput:
    """One step's sampled tokens: ``req_ids`` in batch order, ``req_id_to_index``,
    ``sampled_token_ids`` per row (empty mid-prefill), ``req_errors`` (req_id -> why its state
    could not be set up; the scheduler finishes it FINISHED_ERROR)."""
    req_ids: list[str]
    req_id_to_index: dict[str, int]
    sampled_token_ids: list[list[int]]
    req_errors: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, tokens: dict[str, list[int]]) -> "ModelRunnerOutput":
        ids = list(tokens)
        return cls(ids, {r: i for i, r in enumerate(ids)}, [list(tokens[r]) for r in ids])


EMPTY_MODEL_RUNNER_OUTPUT = ModelRunnerOutput([], {}, [])


@dataclass
class RequestOutput:
    """A request's result: prompt, output tokens so far, ``finish_reason`` (None, "stop", "length",
    "abort", "error" with ``error``), ``num_preemptions``."""
    request_id: str
    prompt_token_ids: list[int]
    output_token_ids: list[int]
    finish_reason: Optional[str] = None
    num_preemptions: int = 0
    text: Optional[str] = None
    metrics: dict = field(default_factory=dict)
    error: Optional[str] = None

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None
