"""Sampler: one token per request. Mirrors the greedy and random paths of
``vllm/v1/sample/sampler.py`` (0.10.2): temperature below 1e-5 is argmax, else a draw from
softmax(logits / T) with the request's generator. Left out: top-k/p, min-p, penalties, logprobs.
"""
from __future__ import annotations

from typing import Optional

import torch

from refimpl.sampling_params import SamplingParams

_SAMPLING_EPS = 1e-5


class Sampler:
    def __call__(self, logits: torch.Tensor, sampling_params: list[SamplingParams],
                 generators: list[Optional[torch.Generator]]) -> list[int]:
        """Token ids (B,) from ``logits`` (B, vocab), one SamplingParams and generator (or None) per row.
        The ids are read back to the host once, after every row is drawn on the device."""
        logits = logits.float()
        out = logits.argmax(dim=-1)
        for i, (sp, gen) in enumerate(zip(sampling_params, generators)):
            if sp.temperature < _SAMPLING_EPS:
                continue
            probs = torch.softmax(logits[i] / float(sp.temperature), dim=-1)  # an int beyond int64 overflows torch
            out[i] = torch.multinomial(probs, 1, generator=gen)[0]
        return out.tolist()
