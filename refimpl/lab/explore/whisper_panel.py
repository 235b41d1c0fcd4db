"""The explorer's Whisper panel (notebooks/00_explore.ipynb, through explorer_panels.ExploreStudy): a
thin layer over refimpl/lab/studies/whisper_sites.py (the ~3%). ``WhisperPanel``: model, step time,
cost per registry call, requests, admission attempts -> each fix's gain and the
gain-against-step-time figure with the committed paired gains.
"""
from __future__ import annotations

import io
from typing import Optional

import ipywidgets as W

from refimpl.config import SUPPORTED_MODELS, get_config_dict
from refimpl.lab.explore.cost_model import Calibration
from refimpl.lab.explore.startup_panel import _box, _column
from refimpl.lab.studies import whisper_sites as ws


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
