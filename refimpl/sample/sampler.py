"""Sampler: one token per request from the last position's logits.

Mirrors the greedy and random paths of ``vllm/v1/sample/sampler.py`` (v0.10.2): temperature
below 1e-5 is greedy (argmax), otherwise softmax of ``logits / temperature`` and a draw with
the request's own ``torch.Generator`` when it has a seed. Left out: top-k / top-p / min-p
(``SamplingParams`` has no such fields), penalties, logprobs, logits processors, bad words.
"""
from __future__ import annotations

from typing import Optional

import torch

from refimpl.sampling_params import SamplingParams

_SAMPLING_EPS = 1e-5


class Sampler:
    def __call__(self, logits: torch.Tensor, sampling_params: list[SamplingParams],
                 generators: list[Optional[torch.Generator]]) -> list[int]:
        """``logits`` (B, vocab), one SamplingParams and generator (or None) per row; returns
        B token ids."""
        logits = logits.float()
        out = logits.argmax(dim=-1).tolist()
        for i, (sp, gen) in enumerate(zip(sampling_params, generators)):
            if sp.temperature < _SAMPLING_EPS:
                continue
            probs = torch.softmax(logits[i] / float(sp.temperature), dim=-1)  # an int beyond int64 overflows torch
            out[i] = int(torch.multinomial(probs, 1, generator=gen))
        return out
