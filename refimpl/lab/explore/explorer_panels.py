"""The explorer's widgets (notebooks/00_explore.ipynb, standalone with voila): thin layers over
refimpl/lab/explore/explorer.py (start-up) and refimpl/lab/studies/whisper_sites.py (the ~3%).

``ExplorerPanel``: one control per ``Settings`` field; each change redraws the answer and the
chart (every chart row's seconds and peak RSS), and its seconds go to ``timings``. Each setting is
answered once (``explore`` per row, kept by setting: a row already in the chart costs nothing when
picked; ``computed`` counts the answers made); the chart's picture is kept per setting and
reference row. ``WhisperPanel``: model, step time, cost per registry call, requests, admission
attempts -> each fix's gain and the gain-against-step-time figure with the committed paired gains.
``ExploreStudy``: the notebook's one object (its MODE, the calibration it uses, the values it
records in ``<out_dir>/values_explore.json``); the comparison section is
refimpl/lab/explore/explorer_comparison.py.
"""
from __future__ import annotations

import html
import io
import json
import time
from dataclasses import asdict, fields, replace
from pathlib import Path
from typing import Any, Optional

import ipywidgets as W
from IPython.display import Markdown, display

from refimpl.config import SUPPORTED_MODELS, get_config_dict
from refimpl.errors import ConfigError
from refimpl.lab.bench import calibrate, trial
from refimpl.lab.bench.specs import CalibrateSpec
from refimpl.lab.env import hardware_folder, this_machine
from refimpl.lab.explore import cost_check
from refimpl.lab.explore.calibrations import default_calibration
from refimpl.lab.explore.cost_model import Calibration
from refimpl.lab.explore.explorer import LOCAL, ROWS, Outputs, Settings, explore, render
from refimpl.lab.explore.explorer_chart import CHART_ROWS, RowSeconds, ladder, ladder_figure, ladder_table
from refimpl.lab.explore.explorer_comparison import ComparisonPanel, folded_comparison
from refimpl.lab.studies import REFERENCE, RESULTS_DIR
from refimpl.lab.studies import whisper_sites as ws
from refimpl.variants import RELEASE_ROWS

MODES = ("stored", "quick", "full")
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


class WhisperPanel:
    """The per-site model of the Whisper registry calls (whisper_sites) as controls and a figure."""

    def __init__(self, calibration: Optional[Calibration] = None, points: Optional[list[dict]] = None):
        self.calibration = calibration
        self.points = ws.measured_points() if points is None else points
        self.ref = ws.reference(self.points)
        whisper = [m for m in SUPPORTED_MODELS if m.startswith("whisper")]
        self.controls = {k: _box(c) for k, c in {
            "model": W.Dropdown(options=whisper, value="whisper-tiny.en", description="model"),
            "step": W.Dropdown(options=("measured here", "typed in"), value="measured here", description="step time"),
            "step_ms": W.FloatText(value=round(1e3 * self.ref["step_s"], 1) if self.ref else 10.0,
                                   description="step time (ms)"),
            "call_ms": W.FloatText(value=0.0, description="cost per registry call (ms)"),
            "requests": W.IntText(value=int(self.ref["requests"]) if self.ref else 8, description="requests"),
            "attempts": W.FloatText(value=self.ref["attempts_per_request"] if self.ref else 1.0,
                                    description="admission attempts / request"),
            "max_tokens": W.IntText(value=int(self.ref["max_tokens"]) if self.ref else 16,
                                    description="tokens per request"),
            "max_num_seqs": W.IntText(value=int(self.ref["max_num_seqs"]) if self.ref else 8, description="max_num_seqs"),
            "startup": W.Checkbox(value=False, description="count start-up calls (runner, KV check)"),
        }.items()}
        self.gains: dict[str, float] = {}
        self.note, self.html, self.image = W.HTML(), W.HTML(), W.Image(format="png")
        self.controls["call_ms"].value = round(1e3 * self.measured_call_s("whisper-tiny.en")[0], 2)
        for name, c in self.controls.items():
            c.observe(lambda change, name=name: self.update(name), names="value")
        self.update(None)
        self.widget = W.VBox([W.HBox([_column(self.controls), W.VBox([self.html, self.note])]), self.image])

    def measured_call_s(self, model: str) -> tuple[float, str]:
        """(seconds per registry call of ``model``, where it was measured): the committed paired
        run's when it served ``model`` (the reference point's, else the narrowest-interval one of any
        machine, a GPU's included: the cost behind the measured gains on the figure), else the
        calibration's, else a typed-in 10 ms."""
        if self.ref is not None and self.ref["model"] == model:
            return self.ref["registry_call_s"], f"measured while serving, {self.ref['source']}"
        served = [p for p in self.points if p["model"] == model and p["registry_call_s"]]  # a GPU run's, say
        if served:
            p = min(served, key=lambda p: p["high"] - p["low"])
            return p["registry_call_s"], f"measured while serving, {p['source']} ({p['hardware']})"
        own = self.calibration.rates.models.get(model) if self.calibration is not None else None
        if own is not None and own.registry_call_s is not None and self.calibration is not None:
            return own.registry_call_s, f"calibration of {self.calibration.hardware}, {self.calibration.date}"
        return 0.01, "nothing measured: typed in"

    def model(self) -> ws.SiteModel:
        c = {k: w.value for k, w in self.controls.items()}
        step = self.ref["step_s"] if c["step"] == "measured here" and self.ref else c["step_ms"] / 1e3
        startup = 2 + get_config_dict(c["model"])["decoder_layers"] if c["startup"] else 0  # runner + KV check
        return ws.SiteModel(c["call_ms"] / 1e3, step, max(1, c["requests"]), c["attempts"], max(1, c["max_tokens"]),
                            max(1, c["max_num_seqs"]), startup)

    def update(self, control: Optional[str]) -> dict[str, float]:
        if control == "model":
            self.controls["call_ms"].value = round(1e3 * self.measured_call_s(self.controls["model"].value)[0], 2)
            return self.gains
        m = self.model()
        self.gains = m.gains()
        rows = "".join(f"<tr><td>{fix}</td><td>{m.calls(fix):g}</td><td id='whisper-gain-{fix[1:]}'>"
                       f"{100 * g:.2f}%</td></tr>" for fix, g in self.gains.items())
        self.html.value = (f"<b>Model</b>: {m.steps} steps of {1e3 * m.step_s:.1f} ms for {m.requests} requests; "
                           f"{1e3 * m.registry_call_s:.2f} ms per registry call "
                           f"({self.measured_call_s(self.controls['model'].value)[1]})"
                           f"<table><tr><th>fix</th><th>calls removed</th><th>gain (model)</th></tr>{rows}</table>")
        self.note.value = f"<p>{ws.seed_sentence(self.points)}</p><p>{ws.kit_sentence(self.points)}</p>"
        buf = io.BytesIO()
        ws.gain_figure(m, self.points).savefig(buf, format="png", dpi=90)
        self.image.value = buf.getvalue()
        return self.gains


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
