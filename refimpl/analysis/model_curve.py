"""Where the ~3% lives: the gain of a registry fix against the model's step time.

A fix that removes ``c`` seconds of registry work per engine step gains ``c / s`` on a step of
``s`` seconds (the step is otherwise unchanged). PR #24866 removed the per-step call of the
cross-attention metadata builder, so its cost model is ``c`` = registry seconds per call.
This module draws that curve, the points measured by ``refimpl bench paired`` (one per
result JSON and variant pair), and a labelled place for GPU points: none is drawn until a GPU
run's JSON is given (GPU figures are never estimated).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np


def points(paired, metric: str = "wall_s", pairing: str = "round") -> list[dict]:
    """Measured points of one paired result (a Result or its JSON path): per variant pair,
    the median step seconds of the later variant, the measured gain with its 95% interval
    (``pairing`` "round" or "abba", see bench/paired.py; older results hold "round" only), and
    the registry seconds per call of the earlier variant (the curve's ``c``). Needs per-block
    ``steps`` (paired.py)."""
    from refimpl.bench.schema import Result
    res = paired if isinstance(paired, Result) else Result.load(paired)
    out = []
    for row in (c for c in res.comparisons
                if c["metric"] == metric and c.get("pairing", "round") == pairing):
        a, b = res.runs(row["over"]), res.runs(row["variant"])
        calls = sum(r["registry_calls"] for r in a)
        per_call = sum(r["registry_s"] for r in a) / calls if calls else 0.0
        step_s = float(np.median([r[metric] / r["steps"] for r in b]))
        out.append({**row, "step_s": step_s, "registry_s_per_call": per_call})
    return out


def plot_gain_vs_step_time(cpu_points: list[dict], gpu_points: list[dict] | None = None,
                           out_png: str | Path | None = None, stored_points: list[dict] | None = None):
    """The cost-model curve c / s over step seconds s (log axes), the measured CPU points with
    their 95% intervals, ``stored_points`` (CPU runs of other machines, hollow) and GPU points
    if given (else a note that none is measured yet). Returns the matplotlib Figure; saved to
    ``out_png`` when given."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.5, 4))
    c = max((p["registry_s_per_call"] for p in cpu_points), default=0.0)
    s = np.logspace(-3, 1, 100)
    if c:
        ax.plot(s, 100 * c / s, "k--", label=f"cost model: {1e3 * c:.1f} ms registry call per step / step s")
    for p in cpu_points:
        ax.errorbar(p["step_s"], 100 * p["gain"], yerr=[[100 * (p["gain"] - p["low"])], [100 * (p["high"] - p["gain"])]],
                    fmt="o", capsize=3, label=f"CPU: {p['variant']} over {p['over']}")
    for p in stored_points or []:
        ax.errorbar(p["step_s"], 100 * p["gain"], yerr=[[100 * (p["gain"] - p["low"])], [100 * (p["high"] - p["gain"])]],
                    fmt="o", mfc="white", capsize=3, color="grey",
                    label=f"stored CPU: {p['variant']} over {p['over']} ({p.get('hardware', '')})")
    for p in gpu_points or []:
        ax.errorbar(p["step_s"], 100 * p["gain"], yerr=[[100 * (p["gain"] - p["low"])], [100 * (p["high"] - p["gain"])]],
                    fmt="s", capsize=3, label=f"GPU: {p['variant']} over {p['over']}")
    if not gpu_points:
        ax.text(0.02, 0.04, "GPU points: not measured yet (scripts/gpu_bench.sh)", transform=ax.transAxes,
                fontsize=8, style="italic")
    ax.set_xscale("log")
    ax.set_yscale("symlog", linthresh=1)
    ax.axhline(0, color="grey", lw=0.5)
    ax.set_ylim(bottom=-1)
    ax.set_xlabel("model step time (s)")
    ax.set_ylabel("throughput gain (%)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    if out_png:
        fig.savefig(out_png, dpi=120)
    return fig
