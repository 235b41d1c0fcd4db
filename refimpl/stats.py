"""Statistics of every table and figure: medians, spread, bootstrap confidence intervals.

One place for them, so a median is always the true median (the mean of the two middle values
for an even count) and every comparison carries an interval. Percentile bootstrap with numpy
(Efron & Tibshirani, "An Introduction to the Bootstrap", 1993, ch. 13), fixed seed, so a
table rebuilt from the same runs shows the same interval.

Errors: ValueError for no values, a non-finite value, unequal lengths of paired samples, or a
ratio whose denominator median (or a paired denominator) is zero.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Literal

import numpy as np

N_BOOT = 10_000
SEED = 0


def _array(values: Iterable[float], name: str = "values") -> np.ndarray:
    arr = np.asarray(list(values), dtype=float)
    if arr.size == 0:
        raise ValueError(f"{name}: need at least one value")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: non-finite value in {arr.tolist()}")
    return arr


def median(values: Iterable[float]) -> float:
    """The median of ``values`` (mean of the two middle values for an even count)."""
    return float(np.median(_array(values)))


def summarize(values: Iterable[float]) -> dict[str, float]:
    """``{"median", "min", "max", "iqr", "n"}`` of ``values`` (units of ``values``; ``n`` an int).

    IQR is p75 - p25 with numpy's linear interpolation. Raises ValueError (see module doc).
    """
    arr = _array(values)
    q25, q75 = np.percentile(arr, [25, 75])
    return {"median": float(np.median(arr)), "min": float(arr.min()), "max": float(arr.max()),
            "iqr": float(q75 - q25), "n": int(arr.size)}


@dataclass(frozen=True)
class Interval:
    """A point estimate with its bootstrap confidence interval [low, high] (units of the
    statistic; a ratio is unitless). ``null`` is the value meaning "no difference" (1 for a
    ratio, 0 for a difference); ``resolved`` is True when the interval excludes it."""
    estimate: float
    low: float
    high: float
    confidence: float
    null: float
    n_boot: int

    @property
    def resolved(self) -> bool:
        return not self.low <= self.null <= self.high

    def contains(self, x: float) -> bool:
        return self.low <= x <= self.high

    def as_dict(self) -> dict[str, float | bool]:
        return {"estimate": self.estimate, "low": self.low, "high": self.high,
                "confidence": self.confidence, "resolved": self.resolved}


def _interval(estimate: float, boot: np.ndarray, confidence: float, null: float) -> Interval:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    alpha = (1 - confidence) / 2
    low, high = np.quantile(boot, [alpha, 1 - alpha])
    return Interval(float(estimate), float(low), float(high), confidence, null, int(boot.size))


def _resample_medians(arr: np.ndarray, rng: np.random.Generator, n_boot: int) -> np.ndarray:
    idx = rng.integers(0, arr.size, size=(n_boot, arr.size))
    return np.median(arr[idx], axis=1)


def ratio_of_medians(a: Iterable[float], b: Iterable[float], *, confidence: float = 0.95,
                     n_boot: int = N_BOOT, seed: int = SEED) -> Interval:
    """median(a) / median(b) for two independent samples, with a percentile-bootstrap interval.

    Each bootstrap round resamples ``a`` and ``b`` separately (with replacement). Example: a =
    requests/s of the fixed variant over its fresh-process repeats, b = of the old one; a
    ratio of 1.03 means 3% faster. Raises ValueError (see module doc).
    """
    xa, xb = _array(a, "a"), _array(b, "b")
    if np.median(xb) == 0:
        raise ValueError("b: median is zero, the ratio is undefined")
    rng = np.random.default_rng(seed)
    ma, mb = _resample_medians(xa, rng, n_boot), _resample_medians(xb, rng, n_boot)
    with np.errstate(divide="ignore", invalid="ignore"):
        boot = ma / mb
    boot = boot[np.isfinite(boot)]
    return _interval(np.median(xa) / np.median(xb), boot, confidence, 1.0)


def paired(a: Iterable[float], b: Iterable[float], *,
           kind: Literal["difference", "ratio"] = "difference", confidence: float = 0.95,
           n_boot: int = N_BOOT, seed: int = SEED) -> Interval:
    """Median of the per-pair ``a_i - b_i`` (or ``a_i / b_i``), with a bootstrap interval.

    ``a`` and ``b`` are measured in pairs (same round of an A B B A design, same inputs); each
    bootstrap round resamples whole pairs. Units: those of the values (difference) or none
    (ratio). Raises ValueError (see module doc).
    """
    xa, xb = _array(a, "a"), _array(b, "b")
    if xa.size != xb.size:
        raise ValueError(f"paired samples differ in length: {xa.size} != {xb.size}")
    if kind == "ratio":
        if np.any(xb == 0):
            raise ValueError("b: a zero value makes a paired ratio undefined")
        d, null = xa / xb, 1.0
    elif kind == "difference":
        d, null = xa - xb, 0.0
    else:
        raise ValueError(f"kind must be 'difference' or 'ratio', got {kind!r}")
    boot = _resample_medians(d, np.random.default_rng(seed), n_boot)
    return _interval(np.median(d), boot, confidence, null)
