"""The gain of a registry-call fix from its parts, beside the direct paired A/B (issue 42).

For a paired comparison of ``variant`` over ``over`` (``bench serve --design paired``), per pair of
blocks: the registry calls the fix removed (``over``'s calls less ``variant``'s: the sites it moved
off the registry, whisper_sites.FIXES), each at ``over``'s measured cost per call c (registry seconds
/ calls), over the serving time of ``variant``'s block as steps x measured step time by kind:

    gain from its parts = calls x c / sum_k (steps_k x T_k)

medians over the pairs, with a percentile bootstrap 95% interval that resamples whole pairs (numpy,
the fixed seed of refimpl.lab.stats). Step kinds: a run's ``step_summary`` (the serving bench's
per-step telemetry, refimpl/lab/bench/telemetry.py: {kind: {"steps": n, "wall_s_total": seconds, ...}})
or ``step_kinds`` ({kind: {"steps": n, "s": seconds}}) where recorded; otherwise (runs before the
telemetry) one kind, "all", the block's steps and wall seconds. A gain from its parts near the direct one says the fix's effect is
its registry seconds and nothing else. paired_table (the CLI's paired report, notebook 02, the GPU
pages) and docs/results.md show it beside the paired gain.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from refimpl.lab.bench.schema import Result
from refimpl.lab.stats import N_BOOT, SEED, Interval
from refimpl.lab.studies.whisper_sites import FIXES

__all__ = ["PartsGain", "step_kinds", "parts_gain", "parts_gain_of", "points_gains", "points_table"]


@dataclass(frozen=True)
class PartsGain:
    """A fix's gain from its parts: ``interval`` (gain, 95% bootstrap), and the medians it is made of:
    removed ``calls`` per block, ``call_s`` (s per registry call), ``steps`` and ``step_s`` by kind
    (count; s per step), ``pairs``; ``fix`` where the pair of rows is one of whisper_sites.FIXES."""
    variant: str
    over: str
    fix: Optional[str]
    interval: Interval
    calls: float
    call_s: float
    steps: dict[str, float]
    step_s: dict[str, float]
    pairs: int

    @property
    def gain(self) -> float:
        return self.interval.estimate


def step_kinds(run: dict) -> dict[str, tuple[float, float]]:
    """{kind: (steps, seconds)} of one served block: its ``step_summary`` or ``step_kinds`` if recorded, else {"all":
    (steps, wall_s)}. Raises KeyError naming the field when a run has neither."""
    if run.get("step_summary"):
        return {k: (float(v["steps"]), float(v["wall_s_total"])) for k, v in run["step_summary"].items()
                if v.get("steps")}
    if run.get("step_kinds"):
        return {k: (float(v["steps"]), float(v["s"])) for k, v in run["step_kinds"].items()}
    for key in ("steps", "wall_s"):
        if key not in run:
            raise KeyError(f"a paired run needs {key!r} (or 'step_kinds') for the gain from its parts")
    return {"all": (float(run["steps"]), float(run["wall_s"]))}


def _estimate(calls: np.ndarray, cost: np.ndarray, steps: dict[str, np.ndarray],
              secs: dict[str, np.ndarray], idx: np.ndarray) -> np.ndarray:
    """The gain of each row of pair indices ``idx`` (n_boot, n): medians over the chosen pairs."""
    med = lambda a: np.median(a[idx], axis=-1)  # noqa: E731
    serving = sum(med(steps[k]) * med(secs[k] / steps[k]) for k in steps)
    return med(calls) * med(cost) / serving


def _call_cost(run: dict) -> float:
    """Seconds per registry call of one block; 0.0 where it made none."""
    return run["registry_s"] / run["registry_calls"] if run["registry_calls"] else 0.0


def parts_gain(over_runs: Sequence[dict], variant_runs: Sequence[dict], variant: str = "", over: str = "",
               *, confidence: float = 0.95, n_boot: int = N_BOOT, seed: int = SEED) -> Optional[PartsGain]:
    """The gain from its parts of ``variant`` over ``over`` from their runs, paired in order (round i
    with round i); None without a pair or without a step. The cost per call c is the pair's
    row that made calls: ``over``'s, or ``variant``'s where ``over`` made none (the fix listed first, as in
    a reversed paired run: its gain from its parts is then negative); 0 where neither made a call."""
    n = min(len(over_runs), len(variant_runs))
    if n == 0:
        return None
    a, b = list(over_runs[:n]), list(variant_runs[:n])
    calls = np.array([x["registry_calls"] - y["registry_calls"] for x, y in zip(a, b)], dtype=float)
    cost = np.array([_call_cost(x) or _call_cost(y) for x, y in zip(a, b)])
    kinds = [step_kinds(y) for y in b]
    names = sorted({k for kd in kinds for k in kd})
    steps = {k: np.array([kd.get(k, (0.0, 0.0))[0] for kd in kinds]) for k in names}
    secs = {k: np.array([kd.get(k, (0.0, 0.0))[1] for kd in kinds]) for k in names}
    if any((steps[k] <= 0).any() for k in names):  # a kind absent from a block: its seconds count 0
        for k in names:
            secs[k] = np.where(steps[k] > 0, secs[k], 0.0)
            steps[k] = np.where(steps[k] > 0, steps[k], 1.0)
    everyone = np.arange(n)[None, :]
    est = float(_estimate(calls, cost, steps, secs, everyone)[0])
    boot = _estimate(calls, cost, steps, secs, np.random.default_rng(seed).integers(0, n, size=(n_boot, n)))
    low, high = np.quantile(boot, [(1 - confidence) / 2, (1 + confidence) / 2])
    fix = next((f for f, pair in FIXES.items() if pair == (over, variant)), None)
    return PartsGain(variant, over, fix, Interval(est, float(low), float(high), confidence, 0.0, n_boot),
                     float(np.median(calls)), float(np.median(cost)),
                     {k: float(np.median(steps[k])) for k in names},
                     {k: float(np.median(secs[k] / steps[k])) for k in names}, n)


def parts_gain_of(res: Result, comparison: dict) -> Optional[PartsGain]:
    """``parts_gain`` of one comparison of a paired Result (its ``variant`` over its ``over``); None
    for another design's Result, or runs without the registry counters or the steps and wall seconds."""
    if res.bench != "paired":
        return None
    a, b = res.runs(comparison["over"]), res.runs(comparison["variant"])
    if not a or not all("registry_calls" in r and "registry_s" in r for r in a + b) \
            or not all(r.get("step_summary") or r.get("step_kinds") or {"steps", "wall_s"} <= set(r) for r in b):
        return None
    return parts_gain(a, b, comparison["variant"], comparison["over"])


def points_gains(points: Sequence[dict]) -> list[dict]:
    """Per measured point of whisper_sites.measured_points (``fix``, ``source``, the paired ``gain``,
    ``low``, ``high`` in wall seconds): the same comparison's gain from its parts (``parts_gain``,
    ``parts_low``, ``parts_high``; None where its runs lack the counters) and the per-site model at the
    point's own block (``model_gain``, whisper_sites.model_of)."""
    from refimpl.lab.env import REPO_ROOT
    from refimpl.lab.studies.whisper_sites import model_of
    out = []
    for p in points:
        res = Result.load(REPO_ROOT / p["source"])  # an absolute source stays itself
        over, variant = FIXES[p["fix"]]
        c = next(c for c in res.comparisons if (c["over"], c["variant"]) == (over, variant)
                 and c["metric"] == "wall_s" and c.get("pairing", "round") == "round")
        pg = parts_gain_of(res, c)
        out.append({**{k: p[k] for k in ("fix", "source", "hardware", "gain", "low", "high", "registry_call_s",
                                          "step_s")},
                    "parts_gain": pg.gain if pg else None, "parts_low": pg.interval.low if pg else None,
                    "parts_high": pg.interval.high if pg else None, "model_gain": model_of(p).gain(p["fix"])})
    return out


def points_table(points: Sequence[dict]) -> str:
    """Markdown of ``points_gains``: per point the paired gain beside its gain from its parts and the
    per-site model, c and T, where it was measured."""
    from refimpl.lab.studies import md_table

    def pct(g, lo, hi) -> str:
        return "-" if g is None else f"{100 * g:+.2f}% [{100 * lo:+.2f}, {100 * hi:+.2f}]"
    return md_table(["fix", "paired gain (wall s), 95% CI", "from its parts, 95% CI", "per-site model",
                     "c ms per call", "T ms per step", "hardware", "source"],
                    [[r["fix"], pct(r["gain"], r["low"], r["high"]), pct(r["parts_gain"], r["parts_low"], r["parts_high"]),
                      f"{100 * r['model_gain']:+.2f}%", f"{1e3 * r['registry_call_s']:.2f}", f"{1e3 * r['step_s']:.1f}",
                      r["hardware"], f"`{r['source']}`"] for r in points_gains(points)])
