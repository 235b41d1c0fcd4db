"""What the model runner hands back to the scheduler, and what the engine hands to users.

Mirrors ``vllm/v1/outputs.py`` (``ModelRunnerOutput``) and ``vllm/outputs.py``
(``RequestOutput``), v0.10.2; vLLM's separate ``EngineCoreOutput`` is the same
``RequestOutput`` here. Left out:
logprobs, prompt logprobs, spec-decode drafts, pooling outputs, detokenized text
(``text`` is filled by the engine when it has a tokenizer), KV-connector fields.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional


@dataclass
class ModelRunnerOutput:
    """One step's sampled tokens.

    req_ids: the requests of the batch, in batch order.
    req_id_to_index: req_id -> row in ``sampled_token_ids``.
    sampled_token_ids: per row, the token ids sampled this step (usually one; empty for
        a request whose prefill chunk did not reach the end of its prompt).
    req_errors: req_id -> why the runner could not set up that request's state (it ran no
        row this step; the scheduler finishes it with status FINISHED_ERROR).
    """
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
    """A request's result: original prompt, every output token so far, why it finished.

    finish_reason: None while running, else "stop" (EOS / stop token), "length"
    (max_tokens or max_model_len), "abort" or "error" (``error`` says why; the engine served
    the other requests on). num_preemptions: times the request was preempted (recomputed from
    scratch) on the way.
    """
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
