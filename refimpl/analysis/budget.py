"""The reviewer's experiment on PR #17935: successive ``compute_encoder_budget`` calls.

Tables, the call-1 ratio and the figure of a ``refimpl bench budget`` Result (one fresh
process per repeat; ``calls_s``: seconds of each successive call). The run itself is
``refimpl.analysis.startup.run_budget``; call 1's parts are in
refimpl/analysis/startup_parts.py.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt

from refimpl.analysis import compare, md_table, save, spread
from refimpl.bench.schema import Result
from refimpl.stats import median, ratio_of_medians


def budget_figure(res: Result, out_dir: Path):
    """Bars of call 1 and call 2 of compute_encoder_budget per variant (median, min-max).
    Variants without runs (a partial result) are left out and named in the title."""
    fig, ax = plt.subplots(figsize=(6, 3.5))
    measured = {v: r for v, r in res.variants.items() if r["runs"]}
    left_out = [v for v in res.variants if v not in measured]
    width = 0.38
    n = max((len(r["runs"][0]["calls_s"]) for r in measured.values()), default=0)
    for i, (v, r) in enumerate(measured.items()):
        calls = list(zip(*[run["calls_s"] for run in r["runs"]]))
        meds = [median(c) for c in calls]
        err = [[m - min(c) for m, c in zip(meds, calls)], [max(c) - m for m, c in zip(meds, calls)]]
        ax.bar([k + i * width for k in range(len(meds))], meds, width, yerr=err, label=v, capsize=3)
    ax.set_xticks([k + width / 2 for k in range(n)], [f"call {k + 1}" for k in range(n)])
    if not measured:
        ax.text(0.5, 0.5, "no runs", ha="center", va="center", transform=ax.transAxes)
    ax.set_ylabel("seconds")
    ax.set_title(f"compute_encoder_budget, {res.params['model']} ({res.env['device']})"
                 + (f"; no runs of {', '.join(left_out)}" if left_out else ""), fontsize=9)
    if measured:
        ax.legend()
    save(fig, out_dir, "budget_calls")
    return fig


def call1_ratio(res: Result, num: str = "0.9.0", den: str = "0.8.5") -> dict:
    """Call 1 of ``num`` over call 1 of ``den``: ratio of medians with a 95% bootstrap interval
    (refimpl.stats.ratio_of_medians), its ``state`` (refimpl.analysis.compare: fewer than
    MIN_PAIRS runs a side is not resolved) and whether the two min-max ranges overlap.
    Raises ValueError when a side has fewer than 2 runs."""
    a, b = ([run["calls_s"][0] for run in res.runs(k)] for k in (num, den))
    ci = ratio_of_medians(a, b).as_dict()
    return {**ci, "state": compare(a, b, num, den)["state"],
            "ranges_overlap": not (min(a) > max(b) or min(b) > max(a)), "n": (len(a), len(b))}


def budget_table(res: Result) -> str:
    """Markdown: seconds of each successive call, median [min, max], and HF passes per call
    ("-" and "no runs" for a variant without runs)."""
    rows = []
    n = max((len(r["runs"][0]["calls_s"]) for r in res.variants.values() if r["runs"]), default=0)
    for v, r in res.variants.items():
        if not r["runs"]:  # a partial result: this variant has no run
            rows.append([v, *["-"] * n, "no runs"])
            continue
        calls = list(zip(*[run["calls_s"] for run in r["runs"]]))
        rows.append([v, *[spread(c) for c in calls], r["runs"][0]["passes"]])
    return md_table(["variant", *[f"call {i + 1} s: median [min, max]" for i in range(n)],
                     "HF mm passes per call"], rows)
