"""The output-length sweep of the throughput study: how the gain of ``0.11.0`` over
``0.10.2+#24866`` (PR #24989) shrinks as the work per request grows.

Tables and figures of the ``throughput-sweep`` Result that
``refimpl.analysis.throughput.run_sweep`` writes: per output length, the measured gain with
its 95% interval beside the model gain = registry seconds per request / work seconds per
request.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt

from refimpl.analysis import md_table, save
from refimpl.bench.schema import Result


def sweep_points(sweep: Result) -> list[dict]:
    """The sweep's per-point summaries, in output-length order."""
    return sorted((v["summary"] for v in sweep.variants.values()), key=lambda p: p["max_tokens"])


def _state(p: dict) -> str:
    """A point's state: stored by run_sweep, or (older sweeps) the rule of
    ``refimpl.analysis.compare`` from its runs and interval."""
    from refimpl.stats import MIN_PAIRS
    if "state" in p:
        return p["state"]
    if p["n"] < MIN_PAIRS:
        return f"not resolved (< {MIN_PAIRS} runs a side)"
    return "unresolved (interval holds 1)" if p.get("gain_low", -1) <= 0 <= p.get("gain_high", 1) else "resolved"


def _has_gain(p: dict) -> bool:
    return p.get("gain") is not None and p["gain"] == p["gain"]  # None or NaN: a side had no runs


def sweep_table(sweep: Result) -> str:
    """Markdown: per output length, work and registry seconds per request, measured gain with
    its 95% interval and state ("-" when a side has no runs), model gain, runs a side."""
    def gain(p):
        if not _has_gain(p):
            return "-"
        ci = f" [{100 * p['gain_low']:+.1f}, {100 * p['gain_high']:+.1f}]" if "gain_low" in p else ""
        return f"{100 * p['gain']:+.1f}%{ci}"
    return md_table(["max_tokens", "work s/request", "registry s/request",
                     "measured gain [95% CI]", "", "model gain", "runs"],
                    [[p["max_tokens"], p["work_s_per_request"], p["registry_s_per_request"],
                      gain(p), _state(p), f"{100 * p['model_gain']:+.1f}%", p["n"]] for p in sweep_points(sweep)])


def sweep_figure(sweep: Result, out_dir: Path):
    """Measured gain of 0.11.0 over 0.10.2+#24866 vs work per request, with the model."""
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    pts = [p for p in sweep_points(sweep) if _has_gain(p)]  # a point without runs: no marker
    w = [p["work_s_per_request"] for p in pts]
    err = [[100 * (p["gain"] - p.get("gain_low", p["gain"])) for p in pts],
           [100 * (p.get("gain_high", p["gain"]) - p["gain"]) for p in pts]]
    ax.errorbar(w, [100 * p["gain"] for p in pts], yerr=err, fmt="o-", capsize=3,
                label="measured (95% CI)")
    ax.plot(w, [100 * p["model_gain"] for p in pts], "s--", label="model: registry s / work s per request")
    for p in pts:
        ax.annotate(f"{p['max_tokens']} tok", (p["work_s_per_request"], 100 * p["gain"]), fontsize=7)
    ax.axhline(3, color="grey", lw=0.8, ls=":", label="3% (PR #24989)")
    ax.set_xscale("log")
    ax.set_xlabel("work per request (s, 0.11.0)")
    ax.set_ylabel("gain over 0.10.2+#24866 (%)")
    ax.legend(fontsize=8)
    save(fig, out_dir, "throughput_sweep")
    return fig
