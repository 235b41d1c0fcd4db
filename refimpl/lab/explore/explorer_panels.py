"""The explorer's widgets (notebooks/00_explore.ipynb, standalone with voila): thin layers over
refimpl/lab/explore/explorer.py (start-up) and refimpl/lab/studies/whisper_sites.py (the ~3%).

``ExplorerPanel`` (startup_panel.py): one control per ``Settings`` field, the answer and the chart
redrawn on each change. ``WhisperPanel`` (whisper_panel.py): each fix's gain against step time.
``ExploreStudy``: the notebook's one object (its MODE, the calibration it uses, the values it
records in ``<out_dir>/values_explore.json``); the comparison section is
refimpl/lab/explore/explorer_comparison.py.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Optional

import ipywidgets as W
from IPython.display import Markdown, display

from refimpl.errors import ConfigError
from refimpl.lab.bench import calibrate, trial
from refimpl.lab.bench.specs import CalibrateSpec
from refimpl.lab.env import hardware_folder, this_machine
from refimpl.lab.explore import cost_check
from refimpl.lab.explore.calibrations import default_calibration
from refimpl.lab.explore.cost_model import Calibration
from refimpl.lab.explore.explorer import Settings, explore
from refimpl.lab.explore.explorer_comparison import ComparisonPanel, folded_comparison
from refimpl.lab.explore.startup_panel import KEPT, STYLE, ExplorerPanel, settings_key
from refimpl.lab.explore.whisper_panel import WhisperPanel
from refimpl.lab.studies import REFERENCE, RESULTS_DIR
from refimpl.lab.studies import whisper_sites as ws
from refimpl.variants import RELEASE_ROWS

__all__ = ["KEPT", "MODES", "STYLE", "ExplorerPanel", "ExploreStudy", "WhisperPanel", "settings_key"]

MODES = ("stored", "quick", "full")


class ExploreStudy:
    """The notebook's one object: ``mode`` stored (the newest calibration of this machine that a
    committed same-day check validated, else its calibration.json, else the reference machine's, the
    same way: refimpl/lab/explore/calibrations.py; ``values["calibration_from"]`` says which and why),
    quick (a one-process calibration here, small arrays) or full (``refimpl bench calibrate``); both
    measured ones write ``<out_dir>/calibration.json``. ``calibration``: a calibration.json stored
    mode reads instead."""
    values_name = "values_explore.json"

    def __init__(self, mode: str = "stored", quick: Optional[bool] = None, out_dir: str | Path = "reports/latest",
                 calibration: Optional[str | Path] = None):
        self.mode = mode if quick is None else "quick" if quick else "full"
        self.calibration_path = calibration
        if self.mode not in MODES:
            raise ConfigError("mode", MODES, f"unknown mode {self.mode!r}")
        self.out_dir = Path(out_dir)
        self.values: dict[str, Any] = {"mode": self.mode, "machine": hardware_folder(this_machine())}
        self.calibration = self._calibration()
        self.values["calibration"] = self.calibration.label if self.calibration else None

    def _calibration(self) -> Optional[Calibration]:
        if self.mode == "stored":
            if self.calibration_path:
                cal: Optional[Calibration] = Calibration.load(self.calibration_path)
                self.values["calibration_from"] = f"the calibration asked for ({self.calibration_path})"
            else:  # the newest one a committed same-day check validated, else calibration.json; the reference's
                cal, self.values["calibration_from"] = default_calibration(self.values["machine"], REFERENCE, RESULTS_DIR)
            if cal is not None:
                self.values["calibration_described"] = cal.described
            return cal
        spec = CalibrateSpec(repeats=1, size_mib=32) if self.mode == "quick" else CalibrateSpec()
        out = self.out_dir / "calibration.json"
        t0 = time.perf_counter()
        res = trial.run(spec, in_process=self.mode == "quick", out=out, check=True)
        self.values["calibration_s"] = time.perf_counter() - t0
        print("\n".join(calibrate.lines(res)))
        return Calibration.from_result(res, str(out))

    @property
    def why_none(self) -> str:
        return f"no calibration for this machine (results/{self.values['machine']}/calibration.json)"

    def explorer(self, settings: Optional[Settings] = None) -> ExplorerPanel:
        self.panel = ExplorerPanel(settings, self.calibration, self.why_none, self.values.get("calibration_from", ""))
        return self.panel

    def whisper(self) -> WhisperPanel:
        self.whisper_panel = WhisperPanel(self.calibration)
        return self.whisper_panel

    def exercise(self) -> dict[str, float]:
        """Change each control of the explorer once from where it stands, as a person would, then
        back; record each change's response time (s, to the redrawn output) in ``values``."""
        p = self.panel
        changes = {"variant": "0.8.5", "model": "whisper-tiny", "max_model_len": 50000, "image": 0, "video": 2,
                   "min_pixels": 56 * 56, "max_pixels": 1280 * 28 * 28, "frames": 8, "mm_processor_cache_gb": 1.0}
        times = {}
        for k, v in changes.items():
            before = p.controls[k].value
            p.set(**{k: v})
            times[k] = p.timings[-1][1]
            p.set(**{k: before})
        self.values["response_s"] = times
        return times

    def rows(self) -> dict[str, dict]:
        """The explorer at the model's defaults for every release row and ours."""
        out = {v: explore(Settings(variant=v), self.calibration).summary() for v in (*RELEASE_ROWS, "refimpl", "shape-only")}
        self.values["rows"] = out
        return out

    def comparison_panel(self, page_size: int = 3) -> W.Widget:
        """The page's comparison section: closed, paged by committed Result, nothing predicted
        until it is opened (``self.comparison_section``, explorer_comparison.ComparisonPanel), or
        why there is none."""
        if self.calibration is None:
            return W.HTML(f"<p><i>{self.why_none}: no prediction to check.</i></p>")
        self.comparison_section = ComparisonPanel(self.calibration, page_size)
        return self.comparison_section.widget

    def comparison(self) -> Optional[str]:
        """The whole prediction-against-measurement comparison, every committed Result predicted
        and recorded in ``values`` (``refimpl report``; the page shows ``comparison_panel``): the
        within-goal summary, then the two tables folded. The table (markdown), or None without a
        calibration."""
        if self.calibration is None:
            display(Markdown(f"*{self.why_none}: no prediction to check.*"))
            return None
        rows = cost_check.compare(self.calibration)
        ratios = cost_check.ratio_rows(rows)
        self.values["comparison"] = [dict(r.__dict__, error=r.error) for r in rows + ratios]
        table = cost_check.comparison_table(rows, self.calibration)
        ratio_table = cost_check.comparison_table(ratios, self.calibration)
        summary = "\n".join(f"- {x}" for x in cost_check.within_goal(rows + ratios, self.calibration))
        display(Markdown(folded_comparison(table, ratio_table, summary, len(rows), len(ratios))))
        return table

    def record(self) -> Path:
        """Write ``values`` (with the Whisper panel's gains and sentences) to ``<out_dir>/values_explore.json``."""
        if hasattr(self, "whisper_panel"):
            wp = self.whisper_panel
            self.values["whisper"] = {"gains": wp.gains, "model": asdict(wp.model()),
                                      "seed": ws.seed_sentence(wp.points), "kit": ws.kit_sentence(wp.points)}
        self.out_dir.mkdir(parents=True, exist_ok=True)
        path = self.out_dir / self.values_name
        path.write_text(json.dumps(self.values, indent=1, default=str))
        return path
