"""The explorer's picture: predicted start-up seconds of every release row (and ours) for the
current settings, stacked by part, each row's ratio to a reference row, and the committed
measurement where a run used these very settings. Answers "which release made start-up cheaper
for my settings?"; ratios hold across days better than seconds (the VM drifts up to 2x).
"""
from __future__ import annotations

import html
from dataclasses import dataclass, replace
from typing import Optional

from matplotlib.figure import Figure

from refimpl.lab.explore.cost_model import Calibration
from refimpl.lab.explore.explorer import Settings, explore
from refimpl.variants import RELEASE_ROWS

CHART_ROWS = (*RELEASE_ROWS, "refimpl", "shape-only")
# the chart's parts -> the cost model's seconds (hf_processor_s holds the text-only calls)
CHART_PARTS = {"dummy data": ("dummy_s",), "hashing": ("hash_s",),
               "HF processor (build, calls, split)": ("processor_build_s", "hf_processor_s", "split_s"),
               "encoder forward (profile run)": ("encoder_s",),
               "runner, weights, text dummy run, KV cache": ("model_s", "import_s"),
               "reset_mm_cache": ("reset_s",)}
COLORS = ("#9ecae1", "#e6550d", "#756bb1", "#31a354", "#bdbdbd", "#636363")


@dataclass
class RowSeconds:
    """One row's predicted seconds by chart part, its total, and the committed run's median
    seconds at these settings (None: no such run); ``failure``: where the row's start-up fails."""
    row: str
    parts: dict[str, float]
    total_s: float
    measured_s: Optional[float] = None
    failure: Optional[str] = None


def ladder(s: Settings, calibration: Calibration, rows: tuple[str, ...] = CHART_ROWS) -> list[RowSeconds]:
    """Each row's prediction for ``s`` (its variant replaced by the row's); refused settings give none."""
    out = []
    for row in rows:
        o = explore(replace(s, variant=row), calibration)
        if o.prediction is None:
            continue
        sec = o.prediction.seconds
        parts = {name: sum(sec.get(k, 0.0) for k in keys) for name, keys in CHART_PARTS.items()}
        out.append(RowSeconds(row, parts, o.prediction.total_s, (o.measured or {}).get("total_s"),
                              o.plan.failure if o.plan else None))
    return out


def ratio(rows: list[RowSeconds], reference: str, measured: bool = False) -> dict[str, Optional[float]]:
    """Each row's seconds over the reference row's (predicted, or measured: None where either is missing)."""
    ref = next((r for r in rows if r.row == reference), None)
    base = None if ref is None else ref.measured_s if measured else ref.total_s
    return {r.row: None if not base or (measured and r.measured_s is None) else
            (r.measured_s if measured else r.total_s) / base for r in rows}  # type: ignore[operator]


def ladder_figure(rows: list[RowSeconds], calibration: Calibration, reference: str = "0.8.5") -> Figure:
    """Horizontal bars, one per row (top to bottom in ladder order), stacked by CHART_PARTS; a
    black diamond at each committed measurement of these settings; each bar ends with its total
    and its ratio to ``reference``."""
    fig = Figure(figsize=(9.5, 0.42 * len(rows) + 2.3), layout="constrained")
    ax = fig.add_subplot()
    y = list(range(len(rows)))[::-1]
    left = [0.0] * len(rows)
    for (name, _), color in zip(CHART_PARTS.items(), COLORS):
        width = [r.parts[name] for r in rows]
        ax.barh(y, width, left=left, color=color, label=name, height=0.7)
        left = [a + b for a, b in zip(left, width)]
    meas = [(yy, r.measured_s) for yy, r in zip(y, rows) if r.measured_s is not None]
    if meas:
        ax.scatter([m for _, m in meas], [yy for yy, _ in meas], marker="D", color="black", zorder=3,
                   label="measured (committed run, these settings)")
    ratios, top = ratio(rows, reference), max([r.total_s for r in rows] + [m for _, m in meas] + [1.0])
    for yy, r in zip(y, rows):
        x = ratios[r.row]
        note = f" {r.total_s:.1f} s" + (f", {x:.2f}x {reference}" if x is not None else "") + \
            (" (start-up fails)" if r.failure else "")
        ax.text(max(r.total_s, r.measured_s or 0.0) + 0.015 * top, yy, note, va="center", fontsize=8)
    ax.set_yticks(y, [r.row for r in rows])
    ax.set_xlim(0, top * 1.4)
    ax.set_xlabel("start-up seconds")
    ax.set_title(f"Start-up per row, {calibration.label}", fontsize=9)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=3, frameon=False)
    return fig


def ladder_table(rows: list[RowSeconds], calibration: Calibration, reference: str = "0.8.5") -> str:
    """The chart's numbers as an HTML table: predicted s (the calibration's date), ratio to the
    reference row, measured s and its ratio where a committed run used these settings."""
    pred, meas = ratio(rows, reference), ratio(rows, reference, measured=True)
    cell = lambda x, f: "" if x is None else format(x, f)  # noqa: E731
    body = "".join(
        f"<tr><td>{html.escape(r.row)}</td><td>{r.total_s:.1f}</td><td>{cell(pred[r.row], '.2f')}</td>"
        f"<td>{cell(r.measured_s, '.1f')}</td><td>{cell(meas[r.row], '.2f')}</td></tr>" for r in rows)
    return (f'<table id="explorer-ladder" class="explorer-table"><thead><tr><th>row</th>'
            f"<th>predicted s (calibration of {html.escape(calibration.date)})</th><th>predicted / {reference}</th>"
            f"<th>measured s</th><th>measured / {reference}</th></tr></thead><tbody>{body}</tbody></table>")
