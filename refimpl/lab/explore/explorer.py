"""The explorer: what start-up costs for your settings in each start-up row, in well under a second.

``explore(Settings, calibration)`` is pure (settings -> ``Outputs``): no HF-processor pass and
nothing of the dummy data's size allocated; it reads the rows' worst cases
(refimpl/multimodal/worst_case.py), the pass walk and the prices of the cost model
(refimpl/lab/explore/cost_model.py). ``render`` turns ``Outputs`` into the HTML the page shows.
The ipywidgets layer is refimpl/lab/explore/explorer_panels.py (notebooks/00_explore.ipynb,
standalone with voila).
"""
from __future__ import annotations

import html
import statistics
import time
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from typing import Any, Optional

from refimpl.config import VllmConfig
from refimpl.config.checks import check_count, check_mm_processor_kwargs
from refimpl.config.model import get_preprocessor_dict
from refimpl.engine.startup_plan import StartupPlan
from refimpl.errors import ConfigError, RefimplError
from refimpl.lab.bench.schema import Result
from refimpl.lab.env import REPO_ROOT
from refimpl.lab.explore.cost_model import Calibration, Prediction
from refimpl.lab.explore.prediction import predict_startup, setting_config
from refimpl.lab.model_dir import local_model
from refimpl.multimodal.hash_paths import HASH_COPIES
from refimpl.variants import RELEASE_ROWS, STARTUP_VARIANTS, get_startup_variant

GiB, MiB = 1 << 30, 1 << 20
ROWS = (*RELEASE_ROWS, *(n for n in STARTUP_VARIANTS if n not in RELEASE_ROWS))  # releases first
LOCAL = "local HF directory"
STYLE = ("<style>.explorer-table{border-collapse:collapse;margin:2px 0 10px}.explorer-table th,.explorer-table td"
         "{padding:1px 8px;border-bottom:1px solid #ddd;text-align:left}</style>")


@dataclass(frozen=True)
class Settings:
    """The explorer's controls. ``model_path``: a local HF directory (config.json and
    preprocessor_config.json) used instead of ``model``; ``frames``: the dummy video's frame
    cap (None: the row's); pixels and cache size as vLLM's settings (None: the model's)."""
    variant: str = "0.9.0"
    model: str = "qwen2.5-vl-3b"
    model_path: Optional[str] = None
    max_model_len: Optional[int] = None
    limit_mm_per_prompt: dict = field(default_factory=dict)
    min_pixels: Optional[int] = None
    max_pixels: Optional[int] = None
    frames: Optional[int] = None
    mm_processor_cache_gb: float = 4.0


@dataclass
class Outputs:
    """What the page shows for one ``Settings``; ``error`` instead when the settings are refused."""
    settings: Settings
    elapsed_s: float = 0.0
    error: Optional[str] = None
    model: str = ""
    reproduces: str = ""
    max_tokens_per_item: dict = field(default_factory=dict)
    encoder_budget: tuple = (0, 0)
    plan: Optional[StartupPlan] = None
    prediction: Optional[Prediction] = None
    calibration: Optional[str] = None  # its label with date and condition (Calibration.described), or why there is none
    measured: Optional[dict] = None  # a committed run of these very settings

    def hf_passes_by_phase(self) -> dict[str, int]:
        return self.plan.hf_passes_by_phase() if self.plan else {}

    def summary(self) -> dict[str, Any]:
        """The values a test or the notebook's values file holds (JSON-ready)."""
        out: dict[str, Any] = {"settings": asdict(self.settings), "error": self.error, "elapsed_s": self.elapsed_s}
        if self.plan is None:
            return out
        p = self.prediction
        return out | {
            "model": self.model, "max_tokens_per_item": self.max_tokens_per_item,
            "encoder_budget": list(self.encoder_budget), "hf_passes_by_phase": self.hf_passes_by_phase(),
            "hf_processor_calls": self.plan.hf_processor_calls, "failure": self.plan.failure,
            "cache_bytes_before_reset": self.plan.cache_bytes_before_reset,
            "reset_frees": {k: list(v) for k, v in self.plan.reset_frees().items()},
            "calibration": self.calibration, "measured": self.measured,
            "predicted": None if p is None else {"label": p.label, "total_s": p.total_s, "seconds": p.seconds,
                                                 "peak_rss_bytes": p.peak_rss_bytes, "peak_rss": p.peak_rss}}


def vllm_config(s: Settings) -> VllmConfig:
    """The small-scale CPU config of ``s`` (nothing loaded; a local directory as the start-up bench
    reads it: refimpl.lab.model_dir). Raises ConfigError naming the field."""
    model = local_model(s.model_path) if s.model_path else s.model
    kw: dict[str, Any] = {}
    for k in ("min_pixels", "max_pixels"):
        if getattr(s, k) is not None:
            if model.startswith("whisper"):
                raise ConfigError(k, "Qwen2.5-VL only", f"{model} has no {k}")
            kw[k] = getattr(s, k)
    check_mm_processor_kwargs(model, kw, get_preprocessor_dict(model))  # ModelConfig's own rules
    if s.frames is not None:
        check_count("frames", s.frames, 1)
    return setting_config(model, max_model_len=s.max_model_len, limit_mm_per_prompt=s.limit_mm_per_prompt,
                          mm_processor_kwargs=kw, model_path=s.model_path, mm_processor_cache_gb=s.mm_processor_cache_gb)


def _median(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


@lru_cache(maxsize=4)
def _measured_index(hardware: str) -> dict[tuple, dict]:
    """(model, max_model_len, variant) -> the committed start-up run's medians at default settings."""
    out: dict[tuple, dict] = {}
    for p in sorted((REPO_ROOT / "results" / hardware).glob("startup_*.json")):
        res = Result.load(p)
        if res.params.get("limit_mm_per_prompt") or res.params.get("mm_processor_kwargs") or \
                res.params.get("process_mode", "inproc") != "inproc":
            continue
        for v, d in res.variants.items():
            runs = d["runs"]
            if runs:
                key = (res.params["model"], runs[0]["max_model_len"], v)
                out[key] = {"total_s": _median(runs, "total_s"), "peak_rss_bytes": _median(runs, "peak_rss_bytes"),
                            "source": str(p.relative_to(REPO_ROOT)), "runs": len(runs)}
    return out


def explore(s: Settings, calibration: Optional[Calibration] = None, *, no_calibration: str = "") -> Outputs:
    """Everything the page shows for ``s`` (see the module docstring); refused settings give
    ``Outputs.error`` (the refimpl error's message), never an exception."""
    t0 = time.perf_counter()
    out = Outputs(s)
    try:
        vc = vllm_config(s)
        v = get_startup_variant(s.variant)
        if s.frames is not None:
            v = replace(v, mm=replace(v.mm, max_frames_per_video=s.frames))
        mc = vc.model_config
        out.model, out.reproduces = mc.model, v.reproduces
        out.plan = StartupPlan.build(vc, v)
        out.max_tokens_per_item, out.encoder_budget = out.plan.max_tokens_per_item, out.plan.encoder_budget
        if calibration is not None:  # the one prediction of a setting (refimpl.lab.explore.prediction)
            out.prediction, out.calibration = predict_startup(vc, v, calibration), calibration.described
            default = s.frames is None and not s.limit_mm_per_prompt and s.min_pixels is None and \
                s.max_pixels is None and s.mm_processor_cache_gb == 4.0 and not s.model_path
            if default:
                out.measured = _measured_index(calibration.hardware).get((mc.model, mc.max_model_len, v.name))
        else:
            out.calibration = no_calibration or "no calibration for this machine"
    except (RefimplError, ValueError) as e:
        out.error = f"{type(e).__name__}: {e}"
        out.plan = None
    out.elapsed_s = time.perf_counter() - t0
    return out


def _b(n: float) -> str:
    return f"{n / GiB:.2f} GiB" if n >= GiB / 10 else f"{n / MiB:.1f} MiB"


def _table(header: list[str], rows: list[list[Any]], tid: str) -> str:
    th = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f'<table id="{tid}" class="explorer-table"><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>'


def render(o: Outputs) -> str:
    """The page's HTML for ``o`` (ids ``explorer-*`` name its parts for tests and readers)."""
    took = f'<p id="explorer-elapsed">computed in {1e3 * o.elapsed_s:.0f} ms: no HF-processor pass, nothing allocated</p>'
    if o.error or o.plan is None:
        return f'<p id="explorer-error" style="color:#b00">refused: {html.escape(o.error or "")}</p>' + took
    p, plan = o.prediction, o.plan
    parts = [f"<h4>{html.escape(o.model)} under {html.escape(o.settings.variant)}: {html.escape(o.reproduces)}</h4>"]
    if plan.failure:
        parts.append(f'<p id="explorer-failure" style="color:#b00">start-up fails: {html.escape(plan.failure)}</p>')
    tok = ", ".join(f"{m} {n}" for m, n in o.max_tokens_per_item.items())
    parts.append(f'<p>tokens per item: <b id="explorer-tokens">{tok}</b>; encoder budget '
                 f'<b id="explorer-budget">{o.encoder_budget[0]}</b>, encoder cache size <b>{o.encoder_budget[1]}</b> '
                 f"tokens; profile run encodes {plan.encoder_items} item(s) at once</p>")
    items = [[s.name, i.modality, "(" + ", ".join(map(str, i.shape)) + ")", i.dtype, _b(i.nbytes), i.tokens, _b(i.processed_bytes)]
             for s in plan.steps for i in s.items]
    parts.append("<b>Dummy items each pass builds</b>" + (_table(
        ["pass", "modality", "shape", "dtype", "bytes", "tokens", "processed bytes"], items, "explorer-items")
        if items else "<p>none: every lookup answered by formula, no profile dummy</p>"))
    passes = o.hf_passes_by_phase()
    parts.append("<b>HF-processor passes by phase</b>" + _table(list(passes), [list(passes.values())], "explorer-passes"))
    copies = HASH_COPIES[plan.variant.mm.hash_byte_path]
    rows = [[s.phase, s.name, "shape-only" if s.built == "processed" else f"{sum(s.hits)}/{len(s.hits)}",
             len(s.hf_items), _b(s.hashed_bytes),
             _b(plan.hash_copy_bytes(s)),
             _b(sum(i.processed_bytes for i in s.hf_items)), _b(s.cache_after)] for s in plan.steps]
    parts.append(f"<b>Per pass</b> (hash byte path {plan.variant.mm.hash_byte_path}: copies per ndarray "
                 f"{copies['ndarray']}, per image {copies['image']})" + _table(
                     ["phase", "pass", "cache hits", "HF items", "bytes hashed", "bytes copied by hashing",
                      "HF output", "cache after"], rows, "explorer-steps"))
    resets = [[k, _b(b), _b(f)] for k, (b, f) in plan.reset_frees().items()]
    parts.append(f"<b>Processing cache at the end of start-up</b> (reset_at_end {plan.variant.reset_at_end}, reset "
                 f"scope {plan.variant.reset_scope})" + _table(["process", "cache bytes before the reset",
                                                               "the reset frees"], resets, "explorer-reset"))
    if p is None:
        parts.append(f'<p id="explorer-prediction"><i>{html.escape(o.calibration or "")}</i>: no predicted seconds '
                     "(refimpl bench calibrate writes results/&lt;hardware&gt;/calibration.json)</p>")
    else:
        meas = o.measured or {}
        total = f'<b id="explorer-total">{p.total_s:.1f} s</b>'
        peak = f'<b id="explorer-peak">{p.peak_rss_bytes / GiB:.2f} GiB</b>'
        beside = (f" (measured: {meas['total_s']:.1f} s and {meas['peak_rss_bytes'] / GiB:.2f} GiB, median of "
                  f"{meas['runs']} runs, {html.escape(meas['source'])})") if meas else " (no committed run of these settings)"
        secs = [[k, f"{x:.2f}"] for k, x in p.seconds.items() if x and k != "hf_text_only_s"]
        rss = [[k, _b(x)] for k, x in p.peak_rss.items()]
        parts.append(f'<p id="explorer-prediction"><i>{html.escape(o.calibration or p.label)}</i>: start-up {total}, peak RSS {peak} '
                     f"(at {html.escape(p.peak_at)}){beside}</p>"
                     + _table(["part (predicted)", "seconds"], secs, "explorer-seconds")
                     + _table(["held at the peak (predicted)", "bytes"], rss, "explorer-rss"))
    return STYLE + "".join(parts) + took
