"""Notebook 01's start-up figures: the ladder (seconds and peak RSS per row), the phases per row, the
reviewer's experiment per call. Each titled with the model, size, runs and provenance of its Result."""
from __future__ import annotations

from pathlib import Path

from refimpl.lab.bench.schema import Result
from refimpl.lab.stats import median, summarize
from refimpl.lab.studies import figure, provenance, save
from refimpl.lab.studies import startup_tables as T
from refimpl.lab.studies.startup_regime import size


def _title(res: Result, what: str, names: list[str]) -> str:
    """'<what>, <model>' / size and runs each (and the variants without runs) / provenance."""
    left_out = [v for v in res.variants if v not in names]
    n = {len(r["runs"]) for r in res.variants.values() if r["runs"]}
    runs = f"{'-'.join(map(str, sorted(n)))} runs each" if n else "no runs"
    return (f"{what}, {res.params['model']}\n{size(res)}; {runs}"
            + (f"; no runs of {', '.join(left_out)}" if left_out else "") + f"\n{provenance(res)}")


def ladder_figure(res: Result, out_dir: Path, name: str = "startup_ladder"):
    """Start-up s (HF passes on each bar) and peak RSS GiB per variant, median with min-max."""
    names, time_key = T.measured(res), T.time_key(res)
    fig, axes = figure(11, 4.4, 2)
    for ax, key, scale, label, color in ((axes[0], time_key, 1, T.TIME_LABEL[time_key], "tab:blue"),
                                         (axes[1], "peak_rss_bytes", 2**30, "peak RSS GiB", "tab:gray")):
        ax.set_ylabel(f"{label} (median, min-max)")
        if not names:
            ax.text(0.5, 0.5, "no runs", ha="center", va="center", transform=ax.transAxes)
            continue
        st = [summarize([x[key] / scale for x in res.runs(v)]) for v in names]
        bars = ax.bar(names, [s["median"] for s in st], capsize=3, color=color,
                      yerr=[[s["median"] - s["min"] for s in st], [s["max"] - s["median"] for s in st]])
        ax.tick_params(axis="x", rotation=30)
        for t in ax.get_xticklabels():
            t.set_ha("right")
        if scale == 1:
            ax.bar_label(bars, [f"{res.runs(v)[0]['hf_mm_passes']} HF\npasses" for v in names],
                         label_type="center", color="white", fontsize=8)
    fig.suptitle(_title(res, "Start-up per variant", names), fontsize=10)
    return save(fig, out_dir, name)


def phases_figure(res: Result, out_dir: Path):
    """Median seconds per start-up phase, one horizontal stacked bar per variant."""
    names = T.measured(res)
    fig, ax = figure(9, 1.6 + 0.4 * len(names))
    left = [0.0] * len(names)
    for ph in T.PHASE_ORDER:
        vals = [median(run["phases"].get(ph, 0.0) for run in res.runs(v)) for v in names]
        if any(vals):
            ax.barh(names, vals, left=left, label=ph)
            left = [a + b for a, b in zip(left, vals)]
    ax.invert_yaxis()
    ax.set_xlabel("seconds (median per phase)")
    fig.legend(loc="outside right upper", fontsize=8)
    ax.set_title(_title(res, "Start-up phases", names), fontsize=9)
    return save(fig, out_dir, "startup_phases")


def budget_figure(res: Result, out_dir: Path):
    """Seconds of each budget call per variant (median, min-max); variants without runs named."""
    fig, ax = figure(8, 3.8)
    names = T.measured(res)
    width = 0.8 / max(len(names), 1)
    n = max((len(res.runs(v)[0]["calls_s"]) for v in names), default=0)
    for i, v in enumerate(names):
        calls = list(zip(*[run["calls_s"] for run in res.runs(v)]))
        meds = [median(c) for c in calls]
        ax.bar([k + i * width for k in range(n)], meds, width, label=v, capsize=3,
               yerr=[[m - min(c) for m, c in zip(meds, calls)], [max(c) - m for m, c in zip(meds, calls)]])
    ax.set_xticks([k + width * (len(names) - 1) / 2 for k in range(n)], [f"call {k + 1}" for k in range(n)])
    if names:
        fig.legend(loc="outside right upper")
    else:
        ax.text(0.5, 0.5, "no runs", ha="center", va="center", transform=ax.transAxes)
    ax.set_ylabel("seconds (median, min-max)")
    ax.set_title(_title(res, "compute_encoder_budget calls", names), fontsize=9)
    return save(fig, out_dir, "budget_calls")
