"""The gain of a registry fix against the model's step time: ``c / s`` for ``c`` registry seconds
per step (measured) and step time ``s``; GPU points only from a GPU run's JSON."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from refimpl.analysis import figure
from refimpl.bench.schema import Result


def points(paired, metric: str = "wall_s", pairing: str = "round") -> list[dict]:
    """Per comparison of a paired Result (or path): plus ``step_s`` and ``registry_s_per_call``."""
    res = paired if isinstance(paired, Result) else Result.load(paired)
    out = []
    for row in (c for c in res.comparisons if c["metric"] == metric and c.get("pairing", "round") == pairing):
        a, b = res.runs(row["over"]), res.runs(row["variant"])
        calls = sum(r["registry_calls"] for r in a)
        out.append({**row, "step_s": float(np.median([r[metric] / r["steps"] for r in b])),
                    "registry_s_per_call": sum(r["registry_s"] for r in a) / calls if calls else 0.0})
    return out


def gain_errorbar(ax, x: float, c: dict, **kw) -> None:
    """A comparison's gain (%) at ``x`` with its 95% interval."""
    ax.errorbar(x, 100 * c["gain"], capsize=3, **kw,
                yerr=[[100 * (c["gain"] - c["low"])], [100 * (c["high"] - c["gain"])]])


def plot_gain_vs_step_time(cpu_points: list[dict], gpu_points: list[dict] | None = None,
                           out_png: str | Path | None = None, stored_points: list[dict] | None = None,
                           title: str = "", c: float | None = None):
    """The curve c / s (log x), measured points with 95% intervals (stored hollow, GPU squares)."""
    fig, ax = figure(9, 4.2)
    c = max((p["registry_s_per_call"] for p in cpu_points), default=0.0) if c is None else c
    s = np.logspace(-3, 1, 100)
    if c:
        ax.plot(s, 100 * c / s, "k--", label=f"cost model: {1e3 * c:.1f} ms registry call per step / step s")
    for p in cpu_points:
        gain_errorbar(ax, p["step_s"], p, fmt="o", label=f"CPU: {p['variant']} over {p['over']}")
    for p in stored_points or []:
        gain_errorbar(ax, p["step_s"], p, fmt="o", mfc="white", color="grey",
                  label=f"stored CPU: {p['variant']} over {p['over']} ({p.get('hardware', '')})")
    for p in gpu_points or []:
        gain_errorbar(ax, p["step_s"], p, fmt="s", label=f"GPU: {p['variant']} over {p['over']}")
    lows = [100 * p["low"] for p in [*cpu_points, *(stored_points or []), *(gpu_points or [])]]
    ax.set_xscale("log")
    ax.set_yscale("symlog", linthresh=1)
    ax.axhline(0, color="grey", lw=0.5)
    ax.set_ylim(bottom=min([-1.0, *[1.5 * x for x in lows]]))
    ax.set_xlabel("model step time (s)")
    ax.set_ylabel("throughput gain (%)")
    note = "" if gpu_points else "\nGPU points: not measured yet (scripts/gpu_bench.sh)"
    ax.set_title(f"Gain of a registry fix against step time{': ' + title if title else ''}{note}", fontsize=9)
    if ax.get_legend_handles_labels()[0]:
        fig.legend(loc="outside lower center", fontsize=7, ncols=2)
    if out_png:
        fig.savefig(out_png, dpi=120)
    return fig
