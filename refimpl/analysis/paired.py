"""Paired gains of the throughput study (notebook 02): tables and figures of ``refimpl bench
paired`` Results.

Each comparison of a paired Result (``Result.comparisons``) is a variant's gain over another,
measured in identical blocks A B B A, with a 95% paired-bootstrap interval and the cost
model's prediction. Tables and figures here take the live Results and, beside them, stored
ones (``refimpl.analysis.stored_results``) as a comparison. The runs are in
refimpl/analysis/serving.py.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import matplotlib.pyplot as plt

from refimpl.analysis import md_table, save
from refimpl.bench.schema import Result


def _resolved(c: dict) -> str:
    from refimpl.stats import MIN_PAIRS
    if c.get("pairs", c["rounds"]) < MIN_PAIRS:
        return f"no (< {MIN_PAIRS} pairs)"
    return "yes" if c["resolved"] else "no (holds 0)"


def _pct(x: float) -> str:
    return f"{100 * x:+.2f}%"


def paired_table(results: Sequence[Result], stored: Sequence[tuple[str, Result]] = (),
                 metric: str = "cpu_s", pairing: str = "round") -> str:
    """Markdown: each comparison's gain with its 95% CI, half-width, pairs, the cost model,
    the design (rounds, seconds) and where it was measured ("here" or a stored file)."""
    rows = []
    for where, r in [("here", r) for r in results] + list(stored):
        for c in r.comparisons:
            if c["metric"] != metric or c.get("pairing", "round") != pairing:
                continue
            rows.append([c["variant"], c["over"], _pct(c["gain"]), f"[{_pct(c['low'])}, {_pct(c['high'])}]",
                         f"{100 * c['half_width']:.2f} pp", _resolved(c),
                         c.get("pairs", c["rounds"]), _pct(c["cost_model_gain"]),
                         f"{r.params['benchmark_s']:.0f}" if "benchmark_s" in r.params else "-", where,
                         r.hardware_name])
    return md_table(["variant", "over", f"gain ({metric})", "95% CI", "half-width", "resolved",
                     "pairs", "cost model", "timed s", "measured", "hardware"], rows)


def paired_figure(results: Sequence[Result], stored: Sequence[tuple[str, Result]], out_dir: Path,
                  name: str, metric: str = "cpu_s"):
    """Gains with 95% CIs (filled: measured here; hollow: stored runs) and the cost model (x)."""
    fig, ax = plt.subplots(figsize=(7, 3.6))
    labels: list[str] = []
    for group, hollow in [([(None, r) for r in results], False), (stored, True)]:
        for _path, r in group:
            for c in (c for c in r.comparisons if c["metric"] == metric and c.get("pairing", "round") == "round"):
                lab = f"{c['variant']} / {c['over']}"
                if lab not in labels:
                    labels.append(lab)
                x = labels.index(lab) + (0.15 if hollow else -0.15)
                ax.errorbar(x, 100 * c["gain"], yerr=[[100 * (c["gain"] - c["low"])], [100 * (c["high"] - c["gain"])]],
                            fmt="o", mfc="white" if hollow else None, capsize=3, color="C1" if hollow else "C0")
                if c.get("cost_model_gain"):
                    ax.plot(x, 100 * c["cost_model_gain"], "kx")
    ax.plot([], [], "o", color="C0", label="measured here (95% CI)")
    ax.plot([], [], "o", color="C1", mfc="white", label="stored runs, results/ (95% CI)")
    ax.plot([], [], "kx", label="cost model")
    ax.axhline(0, color="grey", lw=0.6)
    ax.set_xticks(range(len(labels)), labels, fontsize=7)
    ax.set_ylabel(f"paired gain, {metric.replace('_s', ' seconds')} (%)")
    ax.legend(fontsize=7)
    return save(fig, out_dir, name)


def encoder_batch_figure(res: Result, out_dir: Path, metric: str = "cpu_s"):
    """Gain of audios-per-step@N over 0.11.0 against N, 95% CIs, and steps per block."""
    rows = [c for c in res.comparisons if c["metric"] == metric and c.get("pairing", "round") == "round"]
    ns = [int(c["variant"].split("@")[1]) for c in rows]
    fig, ax = plt.subplots(figsize=(6, 3.4))
    ax.errorbar(ns, [100 * c["gain"] for c in rows], fmt="o-", capsize=3,
                yerr=[[100 * (c["gain"] - c["low"]) for c in rows], [100 * (c["high"] - c["gain"]) for c in rows]])
    for n, c in zip(ns, rows):
        steps = sorted(x["steps"] for x in res.runs(c["variant"]))[len(res.runs(c["variant"])) // 2]
        ax.annotate(f"{steps} steps", (n, 100 * c["gain"]), fontsize=7, xytext=(4, 4), textcoords="offset points")
    ax.axhline(0, color="grey", lw=0.6)
    ax.set_xscale("log", base=2)
    ax.set_xticks(ns, [str(n) for n in ns])
    ax.set_xlabel("N = max audios encoded per step")
    ax.set_ylabel(f"gain over 0.11.0, {metric} (%)")
    return save(fig, out_dir, "encoder_batch_sweep")


def model_curve_figure(results: Sequence[Result], stored: Sequence[tuple[str, Result]], out_dir: Path,
                       metric: str = "cpu_s"):
    """Gain against model step time (refimpl.analysis.model_curve): the cost-model curve with
    ``c`` measured here, the paired points measured here, the stored CPU runs (hollow), and GPU
    points only from stored GPU results (none is estimated)."""
    from refimpl.analysis.model_curve import plot_gain_vs_step_time, points

    def pts(r: Result) -> list[dict]:
        if any("steps" not in x for v in r.variants for x in r.runs(v)):
            return []  # an older result without steps per block
        return [{**p, "hardware": r.hardware_name} for p in points(r, metric)
                if p["over"] in ("0.10.2", "0.10.2+#24866")]
    here = [p for r in results for p in pts(r)]
    other = [(r.env.get("device"), p) for _, r in stored for p in pts(r)]
    out_dir.mkdir(parents=True, exist_ok=True)
    fig = plot_gain_vs_step_time(here, [p for d, p in other if d == "cuda"], out_dir / "gain_vs_step_time.png",
                                 stored_points=[p for d, p in other if d != "cuda"])
    fig.savefig(out_dir / "gain_vs_step_time.svg")
    return fig
