"""The explorer page's "cost model against the committed measurements" section, light: folded,
paged by committed Result, and computed only when shown.

``ComparisonPanel(calibration)`` starts closed (an ``Accordion``) and predicts nothing; opening it
predicts the first page's Results only (``page_size`` committed start-up / budget Results of the
calibration's machine, refimpl/lab/explore/cost_check.py ``compare``) and shows their rows and
their ratios to 0.8.5; "next" / "previous" predict the page they show (each page once). The
within-goal summary of every Result (all their predictions) comes on its button. ``computed``
lists the Result paths predicted so far. ``folded_comparison`` is the whole comparison as
markdown, the two long tables folded (``refimpl report`` records it whole).
"""
from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Optional

import ipywidgets as W
from IPython.display import Markdown, display

from refimpl.lab.explore import cost_check
from refimpl.lab.explore.cost_check import Row
from refimpl.lab.explore.cost_model import Calibration


def folded_comparison(table: str, ratio_table: str, summary: str, n_rows: int, n_ratios: int) -> str:
    """The comparison as markdown: the within-goal summary open, the two long tables folded
    (HTML ``<details>``, opened by a click) so the page does not start with a few hundred rows."""
    def fold(title: str, body: str) -> str:
        return f"<details><summary>{title}</summary>\n\n{body}\n\n</details>"
    return "\n\n".join([summary,
                        fold(f"Predicted against measured, {n_rows} rows (click to open)", table),
                        fold(f"Each row's start-up over 0.8.5's, per committed ladder, {n_ratios} rows (ratios "
                             "drift less between days than seconds; click to open)", ratio_table)])


class ComparisonPanel:
    """Prediction against measurement, ``page_size`` committed Results a page, nothing predicted
    before the section is opened (see the module docstring). ``widget``: the closed section."""

    def __init__(self, calibration: Calibration, page_size: int = 3, sources: Optional[list[Path]] = None):
        self.calibration, self.page_size = calibration, page_size
        self.sources = cost_check.sources(calibration) if sources is None else list(sources)
        self.pages = max(1, math.ceil(len(self.sources) / page_size))
        self.page: Optional[int] = None  # the page shown (None: not opened yet)
        self.computed: list[Path] = []
        self._rows: dict[int, list[Row]] = {}
        self.summary_lines: Optional[list[str]] = None
        self.text = ""  # the page shown, as markdown
        self.where, self.summary, self.table = W.HTML(), W.HTML(), W.Output()
        self.prev, self.next = W.Button(description="previous Results"), W.Button(description="next Results")
        self.summary_button = W.Button(description=f"within-goal summary of all {len(self.sources)} Results",
                                       layout=W.Layout(width="auto"))
        self.prev.on_click(lambda _: self.show((self.page or 0) - 1))
        self.next.on_click(lambda _: self.show((self.page or 0) + 1))
        self.summary_button.on_click(lambda _: self.summarize())
        body = W.VBox([W.HBox([self.prev, self.where, self.next, self.summary_button]), self.summary, self.table])
        title = (f"Predicted against measured: {len(self.sources)} committed Results of {calibration.hardware}, "
                 f"{page_size} a page (click to open)")
        self.widget = W.Accordion(children=[body], titles=(title,), selected_index=None)
        self.widget.observe(lambda change: self.show(self.page or 0) if change["new"] == 0 else None,
                            names="selected_index")

    def rows(self, page: int) -> list[Row]:
        """The prediction rows of ``page``'s Results (predicted once, then kept)."""
        if page not in self._rows:
            paths = self.sources[page * self.page_size:(page + 1) * self.page_size]
            self._rows[page] = cost_check.compare(self.calibration, paths)
            self.computed += paths
        return self._rows[page]

    def show(self, page: int) -> None:
        """Predict (if not yet) and show ``page`` (clamped to the pages there are)."""
        self.page = min(max(page, 0), self.pages - 1)
        rows = self.rows(self.page)
        ratios = cost_check.ratio_rows(rows)
        first = self.page * self.page_size
        self.where.value = (f"&nbsp;Results {first + 1}-{min(first + self.page_size, len(self.sources))} of "
                            f"{len(self.sources)} (page {self.page + 1} of {self.pages}), {len(rows)} rows&nbsp;")
        self.prev.disabled, self.next.disabled = self.page == 0, self.page == self.pages - 1
        self.text = (cost_check.comparison_table(rows, self.calibration)
                     + "\n\n**Each row's start-up over 0.8.5's** "
                     "(ratios drift less between days than seconds)\n\n"
                     + cost_check.comparison_table(ratios, self.calibration))
        self.table.clear_output()
        with self.table:
            display(Markdown(self.text))

    def summarize(self) -> list[str]:
        """Within-goal lines over every Result (predicts the pages not yet shown)."""
        rows = [r for page in range(self.pages) for r in self.rows(page)]
        self.summary_lines = cost_check.within_goal(rows + cost_check.ratio_rows(rows), self.calibration)
        self.summary.value = "<ul>" + "".join(f"<li>{html.escape(line)}</li>" for line in self.summary_lines) + "</ul>"
        return self.summary_lines
