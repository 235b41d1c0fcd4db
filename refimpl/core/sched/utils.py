"""Stop check of the V1 scheduler.

Mirrors ``check_stop`` of ``vllm/v1/core/sched/utils.py`` (v0.10.2). Left out: pooling
requests, ``stop_reason``.
"""
from __future__ import annotations

from refimpl.request import Request, RequestStatus


def check_stop(request: Request, max_model_len: int) -> bool:
    """Finish ``request`` after its last appended token if it reached ``max_model_len`` or
    ``max_tokens`` (FINISHED_LENGTH_CAPPED), or sampled EOS (unless ``ignore_eos``) or one of
    ``stop_token_ids`` (FINISHED_STOPPED). Sets ``request.status``; returns whether it finished.
    """
    if request.num_tokens >= max_model_len or request.num_output_tokens >= request.max_tokens:
        request.status = RequestStatus.FINISHED_LENGTH_CAPPED
        return True
    last = request.output_token_ids[-1]
    sp = request.sampling_params
    if (not sp.ignore_eos and last == request.eos_token_id) or last in sp.stop_token_ids:
        request.status = RequestStatus.FINISHED_STOPPED
        return True
    return False
