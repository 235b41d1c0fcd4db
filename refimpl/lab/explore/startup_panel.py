"""The explorer's start-up panel (notebooks/00_explore.ipynb, through explorer_panels.ExploreStudy): a
thin layer over refimpl/lab/explore/explorer.py. ``ExplorerPanel``: one control per ``Settings``
field; each change redraws the answer and the chart (every chart row's seconds and peak RSS), and
its seconds go to ``timings``. Each setting is answered once (``explore`` per row, kept by setting:
a row already in the chart costs nothing when picked; ``computed`` counts the answers made); the
chart's picture is kept per setting and reference row. ``_box`` / ``_column`` lay out every panel's
controls.
"""
from __future__ import annotations

import html
import io
import time
from dataclasses import fields, replace
from typing import Any, Optional

import ipywidgets as W

from refimpl.config import SUPPORTED_MODELS
from refimpl.lab.explore.cost_model import Calibration
from refimpl.lab.explore.explorer import LOCAL, ROWS, Outputs, Settings, explore, render
from refimpl.lab.explore.explorer_chart import CHART_ROWS, RowSeconds, ladder, ladder_figure, ladder_table

STYLE = {"description_width": "230px"}  # the longest label ("limit_mm_per_prompt video") whole


KEPT = 256  # settings (and pictures) a panel keeps answered before it starts afresh


def _box(c: W.Widget) -> W.Widget:
    c.style, c.layout = STYLE, W.Layout(width="480px")
    return c


def _column(controls: dict[str, W.Widget]) -> W.VBox:
    """The controls one under the other, never squeezed by the output beside them."""
    return W.VBox(list(controls.values()), layout=W.Layout(min_width="490px", flex="0 0 auto"))


def settings_key(s: Settings) -> tuple:
    """``s`` as a hashable key (its item limits as sorted pairs)."""
    values = (getattr(s, f.name) for f in fields(s))
    return tuple(tuple(sorted(v.items())) if isinstance(v, dict) else v for v in values)


class ExplorerPanel:
    """Controls by Settings field (``controls``), the output ``html``, the chart (``chart``, its
    table ``ladder_html``), the latest ``outputs``, ``timings``: (control, seconds from the change
    to the redrawn output) per change; ``computed``: the settings answered (``explore`` calls)."""

    def __init__(self, settings: Optional[Settings] = None, calibration: Optional[Calibration] = None,
                 no_calibration: str = "", source: str = ""):
        settings = settings or Settings()
        self.calibration, self.no_calibration = calibration, no_calibration
        # which calibration the page reads and why (calibrations.default_calibration), its date and condition
        about = calibration.described if calibration is not None else no_calibration
        self.about = W.HTML(f'<p id="explorer-calibration"><i>{html.escape(about)}</i>'
                            + (f" ({html.escape(source)})" if source else "") + "</p>")
        self.timings: list[tuple[str, float]] = []
        lim = settings.limit_mm_per_prompt
        self.controls = {k: _box(c) for k, c in {
            "variant": W.Dropdown(options=ROWS, value=settings.variant, description="release row / variant"),
            "model": W.Dropdown(options=(*SUPPORTED_MODELS, LOCAL), value=settings.model, description="model"),
            # checked when the field is left (or on Enter), not at every keystroke
            "model_path": W.Text(value=settings.model_path or "", description="local HF directory",
                                 placeholder="config.json + preprocessor_config.json", continuous_update=False),
            "max_model_len": W.IntText(value=settings.max_model_len or 0, description="max_model_len (0: model's)"),
            "image": W.IntText(value=lim.get("image", 1), description="limit_mm_per_prompt image"),
            "video": W.IntText(value=lim.get("video", 1), description="limit_mm_per_prompt video"),
            "audio": W.IntText(value=lim.get("audio", 1), description="limit_mm_per_prompt audio"),
            "min_pixels": W.IntText(value=settings.min_pixels or 0, description="min_pixels (0: model's)"),
            "max_pixels": W.IntText(value=settings.max_pixels or 0, description="max_pixels (0: model's)"),
            "frames": W.IntText(value=settings.frames or 0, description="video frames cap (0: row's)"),
            "mm_processor_cache_gb": W.FloatText(value=settings.mm_processor_cache_gb,
                                                 description="processing cache (GiB)"),
            "reference": W.Dropdown(options=CHART_ROWS, value="0.8.5", description="chart: ratios to row"),
        }.items()}
        for name, c in self.controls.items():
            c.observe(lambda change, name=name: self.update(name), names="value")
        self.html, self.chart, self.ladder_html = W.HTML(), W.Image(format="png"), W.HTML()
        self._ladder_key: Optional[Settings] = None
        self.ladder: list[RowSeconds] = []
        self.computed = 0  # explore() answers made (a setting answered once, then kept)
        self._answers: dict[tuple, Outputs] = {}
        self._pictures: dict[tuple, bytes] = {}
        self.update(None)
        self.widget = W.VBox([self.about, W.HBox([_column(self.controls), self.html]), self.chart, self.ladder_html])

    def answer(self, s: Settings) -> Outputs:
        """``explore(s)`` with this panel's calibration, once per setting (a local directory's
        every time: its files may change between two looks)."""
        key = settings_key(s)
        if s.model_path or key not in self._answers:
            self.computed += 1
            o = explore(s, self.calibration, no_calibration=self.no_calibration)
            if s.model_path:
                return o
            if len(self._answers) >= KEPT:
                self._answers.clear()
            self._answers[key] = o
        return self._answers[key]

    def settings(self) -> Settings:
        c = {k: w.value for k, w in self.controls.items()}
        model = "qwen2.5-vl-3b" if c["model"] == LOCAL else c["model"]
        mods = ("audio",) if model.startswith("whisper") else ("image", "video")
        return Settings(c["variant"], model, (c["model_path"] or None) if c["model"] == LOCAL else None,
                        c["max_model_len"] or None, {m: c[m] for m in mods if c[m] != 1}, c["min_pixels"] or None,
                        c["max_pixels"] or None, c["frames"] or None, c["mm_processor_cache_gb"])

    def update(self, control: Optional[str]) -> Outputs:
        """Answer and redraw (the chart's reference row only redraws the chart); record the
        seconds from the change to the new HTML."""
        t0 = time.perf_counter()
        if control != "reference":
            self.outputs = self.answer(self.settings())
            self.html.value = render(self.outputs)
        self.draw_ladder()
        if control is not None:
            self.timings.append((control, time.perf_counter() - t0))
        return self.outputs

    def draw_ladder(self) -> None:
        """The chart of every row for these settings, seconds and peak RSS (rows answered through
        ``answer``; the picture drawn once per setting and reference row) and its table, or why
        there is none."""
        if self.calibration is None or self.outputs.error:
            self.chart.layout.display = "none"
            self.ladder_html.value = "" if self.outputs.error else f"<p><i>{self.no_calibration}: no chart</i></p>"
            return
        key = replace(self.settings(), variant="")
        ref = self.controls["reference"].value
        if key != self._ladder_key:
            self.ladder, self._ladder_key = ladder(key, self.calibration, explore_row=self.answer), key
        shown = (settings_key(key), ref)
        if key.model_path or shown not in self._pictures:
            buf = io.BytesIO()
            ladder_figure(self.ladder, self.calibration, ref).savefig(buf, format="png", dpi=80)
            if len(self._pictures) >= KEPT:
                self._pictures.clear()
            self._pictures[shown] = buf.getvalue()
        self.chart.value, self.chart.layout.display = self._pictures[shown], None
        self.ladder_html.value = ladder_table(self.ladder, self.calibration, ref)

    def set(self, **values: Any) -> Outputs:
        """Set controls as a person would, one change after the other; the latest Outputs."""
        for k, v in values.items():
            self.controls[k].value = v
        return self.outputs
