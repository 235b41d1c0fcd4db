"""Medians, spread and percentile-bootstrap intervals (fixed seed: a rebuilt table shows the same
interval). ValueError for no values, a non-finite one, unequal pairs or a zero denominator."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Literal, Sequence

import numpy as np

N_BOOT = 10_000
SEED = 0
MIN_PAIRS = 5  # fewer runs or pairs a side: the bootstrap interval is degenerate, never resolved


def _array(values: Iterable[float], name: str = "values") -> np.ndarray:
    arr = np.asarray(list(values), dtype=float)
    if arr.size == 0:
        raise ValueError(f"{name}: need at least one value")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: non-finite value in {arr.tolist()}")
    return arr


def median(values: Iterable[float]) -> float:
    return float(np.median(_array(values)))


def summarize(values: Iterable[float]) -> dict[str, float]:
    """``{"median", "min", "max", "iqr", "n"}`` (units of ``values``; iqr = p75 - p25)."""
    arr = _array(values)
    q25, q75 = np.percentile(arr, [25, 75])
    return {"median": float(np.median(arr)), "min": float(arr.min()), "max": float(arr.max()),
            "iqr": float(q75 - q25), "n": int(arr.size)}


@dataclass(frozen=True)
class Interval:
    """An estimate and its bootstrap interval; ``resolved``: it excludes ``null`` (1 ratio, 0 difference)."""
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


def _interval(estimate: float, boot: np.ndarray, confidence: float, null: float) -> Interval:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    low, high = np.quantile(boot, [(1 - confidence) / 2, (1 + confidence) / 2])
    return Interval(float(estimate), float(low), float(high), confidence, null, int(boot.size))


def _resample_medians(arr: np.ndarray, rng: np.random.Generator, n_boot: int) -> np.ndarray:
    return np.median(arr[rng.integers(0, arr.size, size=(n_boot, arr.size))], axis=1)


def ratio_of_medians(a: Iterable[float], b: Iterable[float], *, confidence: float = 0.95,
                     n_boot: int = N_BOOT, seed: int = SEED) -> Interval:
    """median(a) / median(b) of two independent samples; each bootstrap round resamples both."""
    xa, xb = _array(a, "a"), _array(b, "b")
    if np.median(xb) == 0:
        raise ValueError("b: median is zero, the ratio is undefined")
    rng = np.random.default_rng(seed)
    ma, mb = _resample_medians(xa, rng, n_boot), _resample_medians(xb, rng, n_boot)
    with np.errstate(divide="ignore", invalid="ignore"):
        boot = ma / mb
    return _interval(np.median(xa) / np.median(xb), boot[np.isfinite(boot)], confidence, 1.0)


def paired(a: Iterable[float], b: Iterable[float], *, kind: Literal["difference", "ratio"] = "difference",
           confidence: float = 0.95, n_boot: int = N_BOOT, seed: int = SEED) -> Interval:
    """Median of the per-pair ``a_i - b_i`` (or ``a_i / b_i``), resampling whole pairs."""
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
    return _interval(np.median(d), _resample_medians(d, np.random.default_rng(seed), n_boot), confidence, null)


def compare(a: Sequence[float], b: Sequence[float], a_name: str = "a", b_name: str = "b",
            min_n: int = 1) -> dict[str, Any]:
    """median(a) / median(b): {"estimate", "low", "high" (95% bootstrap), "n", "state"}."""
    n = min(len(a), len(b))
    out: dict[str, Any] = {"estimate": None, "low": None, "high": None, "n": n}
    if n == 0:
        return out | {"state": f"no runs of {a_name if not a else b_name}" if a or b else "no runs a side"}
    if n < min_n:
        return out | {"state": f"not shown ({n} run{'s' * (n > 1)} a side; {min_n} needed)"}
    if n < 2:
        return out | {"estimate": median(a) / median(b), "state": f"not resolved ({n} run a side)"}
    ci = ratio_of_medians(a, b)
    return out | {"estimate": ci.estimate, "low": ci.low, "high": ci.high,
                  "state": f"not resolved (< {MIN_PAIRS} runs a side)" if n < MIN_PAIRS
                  else "resolved" if ci.resolved else "unresolved (interval holds 1)"}

