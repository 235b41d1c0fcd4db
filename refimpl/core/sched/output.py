"""SchedulerOutput: what the scheduler tells the model runner each step.

Mirrors ``vllm/v1/core/sched/output.py`` (0.10.2), except that a request resumed after
preemption is re-sent as a NEW request (prompt + outputs so far, recomputed); the runner keeps
its state, so its seeded generator carries on. Left out: spec-decode tokens, common-prefix
blocks, grammar bitmask, KV-connector metadata, freed encoder hashes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from refimpl.core.kv_cache_manager import KVCacheBlocks
from refimpl.multimodal.inputs import PlaceholderRange
from refimpl.request import Request
from refimpl.sampling_params import SamplingParams

# (self-attention block ids, cross-attention block ids); the second is empty for
# decoder-only models.
BlockIds = tuple[list[int], list[int]]


@dataclass
class NewRequestData:
    """A request the runner has not seen (or rebuilds after preemption): prompt_token_ids (+ outputs),
    mm_inputs (Whisper: input_features (n_mels, 3000) float32), block_ids per group,
    num_computed_tokens, mm_positions / mm_hashes."""
    req_id: str
    prompt_token_ids: list[int]
    mm_inputs: list[dict[str, Any]]
    sampling_params: SamplingParams
    block_ids: BlockIds
    num_computed_tokens: int
    mm_positions: list[PlaceholderRange] = field(default_factory=list)
    mm_hashes: list[str] = field(default_factory=list)

    @classmethod
    def from_request(cls, request: Request, block_ids: BlockIds) -> "NewRequestData":
        return cls(req_id=request.request_id, prompt_token_ids=list(request.all_token_ids),
                   mm_inputs=request.mm_inputs, sampling_params=request.sampling_params,
                   block_ids=block_ids, num_computed_tokens=request.num_computed_tokens,
                   mm_positions=list(request.mm_positions), mm_hashes=list(request.mm_hashes))


@dataclass
class CachedRequestData:
    """Requests the runner holds, scheduled again: ``new_block_ids[i]`` per group (None: none added),
    ``num_computed_tokens[i]`` before this step."""
    req_ids: list[str] = field(default_factory=list)
    new_block_ids: list[Optional[BlockIds]] = field(default_factory=list)
    num_computed_tokens: list[int] = field(default_factory=list)

    @property
    def num_reqs(self) -> int:
        return len(self.req_ids)

    @classmethod
    def make_empty(cls) -> "CachedRequestData":
        return cls()

    @classmethod
    def from_requests(cls, requests: list[Request],
                      new_blocks_of: dict[str, KVCacheBlocks]) -> "CachedRequestData":
        """``Scheduler._make_cached_request_data`` of vLLM. new_blocks_of: req_id -> blocks
        allocated this step (possibly empty)."""
        cached = cls.make_empty()
        for r in requests:
            blocks = new_blocks_of[r.request_id]
            cached.req_ids.append(r.request_id)
            cached.new_block_ids.append(None if blocks.is_empty() else blocks.get_block_ids())
            cached.num_computed_tokens.append(r.num_computed_tokens)
        return cached


@dataclass
class SchedulerOutput:
    """One step's plan: ``num_scheduled_tokens`` (req_id -> tokens; total <= max_num_batched_tokens),
    ``scheduled_encoder_inputs`` (req_id -> input indices), ``finished_req_ids`` since the last
    step, ``preempted_req_ids`` (blocks already freed)."""
    scheduled_new_reqs: list[NewRequestData]
    scheduled_cached_reqs: CachedRequestData
    num_scheduled_tokens: dict[str, int]
    total_num_scheduled_tokens: int
    scheduled_encoder_inputs: dict[str, list[int]]
    finished_req_ids: set[str]
    preempted_req_ids: set[str] = field(default_factory=set)
