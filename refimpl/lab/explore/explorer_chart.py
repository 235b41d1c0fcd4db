"""The explorer's picture: every release row (and ours) for the current settings, predicted
start-up seconds stacked by part on the left and predicted peak RSS on the right, one bar per row
on a shared row axis, each bar ending with its ratio to a reference row, and the committed
measurement (seconds and peak RSS) beside it where a run used these very settings. Answers "which
release made start-up cheaper, in time and in memory, for my settings?"; ratios hold across days
better than seconds (the VM drifts up to 2x).
"""
from __future__ import annotations

import html
from dataclasses import dataclass, replace
from typing import Callable, Optional

from matplotlib.figure import Figure

from refimpl.lab.explore.cost_model import Calibration
from refimpl.lab.explore.explorer import Outputs, Settings, explore
from refimpl.variants import RELEASE_ROWS

CHART_ROWS = (*RELEASE_ROWS, "refimpl", "shape-only")
# the chart's parts -> the cost model's seconds (hf_processor_s holds the text-only calls)
CHART_PARTS = {"dummy data": ("dummy_s",), "hashing": ("hash_s",),
               "HF processor (build, calls, split)": ("processor_build_s", "hf_processor_s", "split_s"),
               "encoder forward (profile run)": ("encoder_s",),
               "runner, weights, text dummy run, KV cache": ("model_s", "import_s"),
               "reset_mm_cache": ("reset_s",)}
COLORS = ("#9ecae1", "#e6550d", "#756bb1", "#31a354", "#bdbdbd", "#636363")
RSS_COLOR = "#fdae6b"
GiB = 1 << 30


@dataclass
class RowSeconds:
    """One row's predicted seconds by chart part, its total and its predicted peak RSS (bytes), and
    the committed run's medians at these settings (None: no such run); ``failure``: where the
    row's start-up fails."""
    row: str
    parts: dict[str, float]
    total_s: float
    measured_s: Optional[float] = None
    failure: Optional[str] = None
    peak_rss_bytes: float = 0.0
    measured_rss_bytes: Optional[float] = None


def row_of(o: Outputs) -> Optional[RowSeconds]:
    """The chart's row from one ``explore`` answer (None without a prediction)."""
    if o.prediction is None:
        return None
    sec, meas = o.prediction.seconds, o.measured or {}
    parts = {name: sum(sec.get(k, 0.0) for k in keys) for name, keys in CHART_PARTS.items()}
    return RowSeconds(o.settings.variant, parts, o.prediction.total_s, meas.get("total_s"),
                      o.plan.failure if o.plan else None, o.prediction.peak_rss_bytes, meas.get("peak_rss_bytes"))


def ladder(s: Settings, calibration: Calibration, rows: tuple[str, ...] = CHART_ROWS,
           explore_row: Optional[Callable[[Settings], Outputs]] = None) -> list[RowSeconds]:
    """Each row's prediction for ``s`` (its variant replaced by the row's); refused settings give
    none. ``explore_row``: how one row's settings are answered (default ``explore`` with
    ``calibration``; the page passes its per-setting cache)."""
    answer = explore_row or (lambda x: explore(x, calibration))
    out = [row_of(answer(replace(s, variant=row))) for row in rows]
    return [r for r in out if r is not None]


def ratio(rows: list[RowSeconds], reference: str, measured: bool = False,
          metric: str = "seconds") -> dict[str, Optional[float]]:
    """Each row's seconds (``metric="rss"``: peak RSS) over the reference row's, predicted or
    measured (None where either is missing)."""
    def value(r: RowSeconds) -> Optional[float]:
        if metric == "rss":
            return r.measured_rss_bytes if measured else r.peak_rss_bytes
        return r.measured_s if measured else r.total_s
    ref = next((r for r in rows if r.row == reference), None)
    base = None if ref is None else value(ref)
    return {r.row: None if not base or value(r) is None else value(r) / base for r in rows}  # type: ignore[operator]


def _labels(ax, y: list[int], ends: list[float], notes: list[str]) -> None:
    """Each bar's note just past its end (the bar or its measured point), room kept for it."""
    top = max(ends + [1e-9])
    for yy, end, note in zip(y, ends, notes):
        ax.text(end + 0.015 * top, yy, note, va="center", fontsize=7)
    ax.set_xlim(0, top * 1.55)


def ladder_figure(rows: list[RowSeconds], calibration: Calibration, reference: str = "0.8.5") -> Figure:
    """Two panels on one row axis (top to bottom in ladder order): left, horizontal bars of
    predicted start-up seconds stacked by CHART_PARTS; right, predicted peak RSS (GiB). A black
    diamond marks each committed measurement of these settings; each bar ends with its value and
    its ratio to ``reference``."""
    fig = Figure(figsize=(11, 0.34 * len(rows) + 2.2), layout="constrained")
    ax, mem = fig.subplots(1, 2, sharey=True, width_ratios=(3, 2))
    y = list(range(len(rows)))[::-1]
    left = [0.0] * len(rows)
    for (name, _), color in zip(CHART_PARTS.items(), COLORS):
        width = [r.parts[name] for r in rows]
        ax.barh(y, width, left=left, color=color, label=name, height=0.7)
        left = [a + b for a, b in zip(left, width)]
    gib = [r.peak_rss_bytes / GiB for r in rows]
    mem.barh(y, gib, color=RSS_COLOR, height=0.7, label="peak RSS (predicted)")
    label = "measured (committed run, these settings)"
    for axis, pairs in ((ax, [(yy, r.measured_s) for yy, r in zip(y, rows)]),
                        (mem, [(yy, None if r.measured_rss_bytes is None else r.measured_rss_bytes / GiB)
                               for yy, r in zip(y, rows)])):
        pts = [(yy, m) for yy, m in pairs if m is not None]
        if pts:
            axis.scatter([m for _, m in pts], [yy for yy, _ in pts], marker="D", s=18, color="black", zorder=3,
                         label=label)
    sec_x, rss_x = ratio(rows, reference), ratio(rows, reference, metric="rss")
    fails = [" (fails)" if r.failure else "" for r in rows]
    _labels(ax, y, [max(r.total_s, r.measured_s or 0.0) for r in rows],
            [f"{r.total_s:.1f} s" + (f", {sec_x[r.row]:.2f}x" if sec_x[r.row] is not None else "") + f
             for r, f in zip(rows, fails)])
    _labels(mem, y, [max(g, (r.measured_rss_bytes or 0.0) / GiB) for g, r in zip(gib, rows)],
            [f"{g:.2f} GiB" + (f", {rss_x[r.row]:.2f}x" if rss_x[r.row] is not None else "")
             for g, r in zip(gib, rows)])
    ax.set_yticks(y, [r.row for r in rows])
    ax.set_xlabel(f"start-up seconds (ratio to {reference})")
    mem.set_xlabel(f"peak RSS, GiB (ratio to {reference})")
    fig.suptitle(f"Start-up per row, {calibration.label}", fontsize=9)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2, frameon=False)
    mem.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=1, frameon=False)
    return fig


def ladder_table(rows: list[RowSeconds], calibration: Calibration, reference: str = "0.8.5") -> str:
    """The chart's numbers as an HTML table: predicted s and peak RSS (the calibration's date),
    each ratio to the reference row, and the measured ones where a committed run used these settings."""
    pred, meas = ratio(rows, reference), ratio(rows, reference, measured=True)
    rss, meas_rss = ratio(rows, reference, metric="rss"), ratio(rows, reference, measured=True, metric="rss")
    cell = lambda x, f: "" if x is None else format(x, f)  # noqa: E731
    gib = lambda x: None if x is None else x / GiB  # noqa: E731
    body = "".join(
        f"<tr><td>{html.escape(r.row)}</td><td>{r.total_s:.1f}</td><td>{cell(pred[r.row], '.2f')}</td>"
        f"<td>{cell(r.measured_s, '.1f')}</td><td>{cell(meas[r.row], '.2f')}</td>"
        f"<td>{r.peak_rss_bytes / GiB:.2f}</td><td>{cell(rss[r.row], '.2f')}</td>"
        f"<td>{cell(gib(r.measured_rss_bytes), '.2f')}</td><td>{cell(meas_rss[r.row], '.2f')}</td></tr>" for r in rows)
    head = "".join(f"<th>{h}</th>" for h in (
        "row", f"predicted s (calibration of {html.escape(calibration.date)})", f"predicted / {reference}",
        "measured s", f"measured / {reference}", "predicted peak RSS GiB", f"predicted / {reference}",
        "measured peak RSS GiB", f"measured / {reference}"))
    return (f'<table id="explorer-ladder" class="explorer-table"><thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table>")
