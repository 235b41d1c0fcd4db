"""The calibration's fits and draws, with numpy only: the encoder's price per frame pair in a form
that cannot go negative, and a rate drawn several times inside one calibration run.

``pair_price_fit(tokens, seconds)`` fits ``s = c + a t + b t^2`` per frame pair (``c`` seconds per
pair, ``a`` per token, ``b`` per token squared) by non-negative least squares on the relative
error: every active set of the three coefficients is solved and the best one with no coefficient
below 0 is kept (exact for three unknowns). Every coefficient is >= 0, so the price is >= 0 and
non-decreasing in ``t`` for ``t >= 0``; a price that is exactly such a quadratic is recovered.
Before issue 43 the fit was ``a t + b t^2`` by plain least squares, which gave a negative ``b`` in
every calibration and fell back to a straight per-token price. No vLLM counterpart.
"""
from __future__ import annotations

from itertools import combinations
from typing import Sequence

import numpy as np

__all__ = ["pair_price_fit", "pair_price", "median_draw"]


def pair_price(c: float, a: float, b: float, tokens: float) -> float:
    """Seconds of one frame pair of ``tokens`` tokens: ``c + a t + b t^2``."""
    return c + a * tokens + b * tokens * tokens


def pair_price_fit(tokens: Sequence[float], seconds: Sequence[float]) -> tuple[float, float, float]:
    """``(c, a, b)`` >= 0 minimising the squared relative error of ``c + a t + b t^2`` against
    ``seconds`` (s per pair) at ``tokens`` (tokens per pair). Raises ValueError on fewer than one
    point, lengths that differ, or a negative or non-finite value."""
    t, s = np.asarray(tokens, dtype=float), np.asarray(seconds, dtype=float)
    if t.shape != s.shape or t.ndim != 1 or t.size < 1:
        raise ValueError(f"tokens and seconds: two lists of one length >= 1, got {t.shape} and {s.shape}")
    if not (np.isfinite(t).all() and np.isfinite(s).all()) or (t < 0).any() or (s < 0).any():
        raise ValueError("tokens and seconds must be finite and >= 0")
    w = 1.0 / np.maximum(s, 1e-12)  # relative error: the 1024-token pair counts as much as the 16384 one
    basis = np.stack([np.ones_like(t), t, t * t], axis=1) * w[:, None]
    target = s * w
    best: tuple[float, tuple[float, float, float]] = (float(np.sum(target ** 2)), (0.0, 0.0, 0.0))  # all zero
    for k in (1, 2, 3):
        for active in combinations(range(3), k):
            x = np.linalg.lstsq(basis[:, active], target, rcond=None)[0]
            if (x < 0).any():
                continue
            coef = [0.0, 0.0, 0.0]
            for j, v in zip(active, x):
                coef[j] = float(v)
            res = float(np.sum((basis @ np.array(coef) - target) ** 2))
            if res < best[0] - 1e-15:
                best = (res, (coef[0], coef[1], coef[2]))
    return best[1]


def median_draw(values: Sequence[float]) -> float:
    """The median of a rate's draws inside one calibration run (ValueError when there are none)."""
    if len(values) == 0:
        raise ValueError("a rate needs at least one draw")
    return float(np.median(np.asarray(values, dtype=float)))
