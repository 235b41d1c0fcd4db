"""Gains of the paired design (refimpl/bench/paired.py) with bootstrap 95% intervals.

Gain of variant k over k-1 in one pair: t(k-1) / t(k) - 1, a pair being one round of the
A B B A order (``pairing="round"``) or two rounds with each side summed (``"abba"``: a linear
drift of the machine's speed within the four blocks cancels). Median over pairs with a paired
bootstrap interval (``refimpl.stats.paired``), beside the cost model: what a fix removes is
the registry time, so its predicted gain is (registry s per block of k-1 minus that of k) /
(block s of k).
"""
from __future__ import annotations

import numpy as np

MIN_PAIRS = 5  # fewer pairs: the bootstrap interval is degenerate, never called resolved


def abba_sums(values: list[float]) -> list[float]:
    """Sums of consecutive round pairs (0+1, 2+3, ...): one value per A B B A quadruple; an
    odd last round is dropped."""
    return [values[i] + values[i + 1] for i in range(0, len(values) - 1, 2)]


def gains(by_variant: dict, metric: str = "cpu_s", against: str = "previous",
          pairing: str = "round") -> list[dict]:
    """Each variant's gain over the previous one (``against="first"``: over the first):
    paired ratio t(base)/t(this) per pair, minus 1, with its bootstrap 95% interval
    (``refimpl.stats.paired``), and the cost model's prediction (see module doc). A gain from
    fewer than ``MIN_PAIRS`` pairs is never ``resolved``. A pair is a
    round (``pairing="round"``) or two rounds, A B B A, each side summed (``"abba"``).
    Raises ValueError when a pairing has no complete pair."""
    from refimpl.stats import paired
    if pairing not in ("round", "abba"):
        raise ValueError(f"pairing must be 'round' or 'abba', got {pairing!r}")
    pick = abba_sums if pairing == "abba" else list
    variants, rows = list(by_variant), []
    bases = variants[:-1] if against == "previous" else [variants[0]] * (len(variants) - 1)
    for prev, cur in zip(bases, variants[1:]):
        a, b = by_variant[prev], by_variant[cur]
        iv = paired(pick(a[metric]), pick(b[metric]), kind="ratio")
        n = len(pick(a[metric]))
        # registry seconds are wall seconds: the model divides by wall seconds for both metrics
        model = (np.median(a["registry_s"]) - np.median(b["registry_s"])) / np.median(b["wall_s"])
        rows.append({"variant": cur, "over": prev, "metric": metric, "pairing": pairing,
                     "gain": iv.estimate - 1, "low": iv.low - 1, "high": iv.high - 1,
                     "half_width": (iv.high - iv.low) / 2, "resolved": iv.resolved and n >= MIN_PAIRS,
                     "cost_model_gain": float(model), "rounds": len(a[metric]),
                     "pairs": n})
    return rows


def gain_line(r: dict) -> str:
    """One comparison row of ``gains`` as a line: gain, 95% interval, pairs, whether it is
    resolved (never below ``MIN_PAIRS`` pairs) and the cost model."""
    def plural(n: int, word: str) -> str:
        return f"{n} {word}{'' if n == 1 else 's'}"
    state = ("resolved" if r["resolved"] else
             f"not resolved: < {MIN_PAIRS} pairs" if r["pairs"] < MIN_PAIRS else "not resolved: holds 0")
    return (f"{r['metric']}, {r['pairing']} pairs: {r['variant']} over {r['over']}: {100 * r['gain']:+.2f}% "
            f"[{100 * r['low']:+.2f}, {100 * r['high']:+.2f}] (95% CI, {plural(r['pairs'], 'pair')} of "
            f"{plural(r['rounds'], 'round')}, {state}); cost model {100 * r['cost_model_gain']:+.2f}%")


def paired_comparisons(runs: dict[str, list[dict]], variant: str, baseline: str) -> list[dict]:
    """``comparisons`` of ``variant`` (the engine) over ``baseline`` (generate(), bench
    workload --engine both), run i paired with run i: requests/s (engine / generate()) and CPU
    seconds (generate() / engine), each the median of the per-pair ratios with its bootstrap
    95% interval; ``resolved`` needs ``MIN_PAIRS`` pairs."""
    from refimpl.stats import paired
    e, h = runs[variant], runs[baseline]
    rows = []
    for metric, a, b in (("requests_per_s", e, h), ("cpu_s", h, e)):
        iv = paired([x[metric] for x in a], [x[metric] for x in b], kind="ratio")
        rows.append({"variant": variant, "over": baseline, "metric": metric, "ratio": iv.estimate,
                     "low": iv.low, "high": iv.high, "pairs": len(a),
                     "resolved": iv.resolved and len(a) >= MIN_PAIRS})
    return rows
