"""Where the ~3% lives: a per-site model of Whisper's registry calls (vLLM 0.10.2) and their fixes.

In 0.10.2 ``get_encdec_max_encoder_len`` (one uncached HF Whisper pass, ``c`` seconds) is called
by the cross-attention metadata builder once per engine step (fixed by PR #24866), and by the
scheduler once per admission attempt of an encoder-decoder request plus the runner and the KV
check at start-up (fixed by PR #24989). Serving ``N`` requests in ``S`` steps of ``s`` seconds
(the step without registry calls), with ``a`` admission attempts per request and ``u`` start-up
calls counted in the window:

    time after both fixes  T  = S s
    #24989 (on 0.10.2 + #24866) saves (N a + u) c       gain = (N a + u) c / T
    #24866 (on 0.10.2)          saves S c               gain = S c / (T + (N a + u) c)

a gain being time before / time after - 1, as the paired bench reports it. ``S`` for requests that
each decode ``max_tokens`` with one audio encoded per step (the 0.10.2 encoder budget) and up to
``max_num_seqs`` running: max(N + max_tokens - 1, ceil(N max_tokens / max_num_seqs)).
``measured_points`` reads those quantities and the measured gains from the committed paired
Results (results/<hardware>/paired_*.json); ``seed_sentence`` and ``kit_sentence`` state them.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional

import numpy as np

from refimpl.lab.bench.schema import Result
from refimpl.lab.env import REPO_ROOT

FIXES = {"#24866": ("0.10.2", "0.10.2+#24866"), "#24989": ("0.10.2+#24866", "0.11.0")}  # fix: (over, variant)
SEED_GAIN = 0.03  # the seed's "about 3%" for PR #24989


@dataclass(frozen=True)
class SiteModel:
    """The per-site model's inputs: seconds per registry call and per step, requests, admission
    attempts per request, decode tokens per request, running requests, start-up calls counted."""
    registry_call_s: float
    step_s: float
    requests: int = 8
    attempts_per_request: float = 1.0
    max_tokens: int = 16
    max_num_seqs: int = 8
    startup_calls: int = 0

    @property
    def steps(self) -> int:
        n, t = self.requests, self.max_tokens
        return max(n + t - 1, math.ceil(n * t / self.max_num_seqs))

    def calls(self, fix: str) -> float:
        """Registry calls in the window that ``fix`` removes."""
        return self.steps if fix == "#24866" else self.requests * self.attempts_per_request + self.startup_calls

    def gain(self, fix: str) -> float:
        """Throughput gain of ``fix`` over the row before it (``FIXES``)."""
        after = self.steps * self.step_s + (self.calls("#24989") * self.registry_call_s if fix == "#24866" else 0)
        return self.calls(fix) * self.registry_call_s / after

    def gains(self) -> dict[str, float]:
        return {fix: self.gain(fix) for fix in FIXES}

    def step_s_for(self, fix: str, gain: float) -> float:
        """The step seconds at which ``fix`` gains ``gain``."""
        extra = self.calls("#24989") * self.registry_call_s if fix == "#24866" else 0.0
        return (self.calls(fix) * self.registry_call_s / gain - extra) / self.steps


def _median(values) -> float:
    return float(statistics.median(values))


def measured_points(paths: Optional[list[Path]] = None, metric: str = "wall_s") -> list[dict]:
    """Per committed paired comparison of a fix (``FIXES``): the gain with its 95% interval, and
    the measured model inputs: registry seconds per call (the earlier row's), calls per block
    and per step, admission attempts per request, step seconds (the later row's wall / steps),
    requests per block; ``hardware`` (results/ folder) and ``gpu``."""
    out = []
    for p in paths if paths is not None else sorted((REPO_ROOT / "results").glob("*/paired_*.json")):
        res = Result.load(p)
        for c in res.comparisons:
            fix = next((f for f, pair in FIXES.items() if pair == (c["over"], c["variant"])), None)
            if fix is None or c["metric"] != metric or c.get("pairing", "round") != "round":
                continue
            a, b = res.runs(c["over"]), res.runs(c["variant"])
            if not all("steps" in r for r in a + b):
                continue
            n = int(res.params.get("block_requests") or res.params["num_requests"])
            calls = sum(r["registry_calls"] for r in a)
            sched = _median(r["registry_calls"] for r in res.runs("0.10.2+#24866")) \
                if "0.10.2+#24866" in res.variants else float("nan")
            out.append({"fix": fix, "gain": c["gain"], "low": c["low"], "high": c["high"],
                        "registry_call_s": sum(r["registry_s"] for r in a) / calls if calls else 0.0,
                        "calls_per_block": _median(r["registry_calls"] for r in a),
                        "steps": _median(r["steps"] for r in b), "requests": n,
                        "attempts_per_request": sched / n, "step_s": _median(r[metric] / r["steps"] for r in b),
                        "max_tokens": res.params.get("max_tokens"), "max_num_seqs": res.params.get("max_num_seqs"),
                        "model": res.params.get("model"), "hardware": Path(p).parent.name, "gpu": bool(res.env.get("hardware", {}).get("gpu")),
                        "source": str(Path(p).relative_to(REPO_ROOT)) if Path(p).is_relative_to(REPO_ROOT) else str(p)})
    return out


def model_of(point: dict) -> SiteModel:
    """The SiteModel of a measured point (its own call cost, step time and block)."""
    return SiteModel(point["registry_call_s"], point["step_s"], int(point["requests"]),
                     point["attempts_per_request"], int(point["max_tokens"]), int(point["max_num_seqs"]))


def reference(points: list[dict], fix: str = "#24989") -> Optional[dict]:
    """The quiet-machine point of ``fix`` with the narrowest interval (none from a ``-shared`` folder)."""
    quiet = [p for p in points if p["fix"] == fix and not p["hardware"].endswith("-shared")]
    return min(quiet, key=lambda p: p["high"] - p["low"], default=None)


def seed_sentence(points: list[dict]) -> str:
    """Which measured quantities give the seed's ~3% for #24989, at which step time."""
    p = reference(points)
    if p is None:
        return "No paired run of #24989 is committed, so the model has no measured call cost."
    m = model_of(p)
    at = m.step_s_for("#24989", SEED_GAIN)
    return (f"With the committed cost per registry call ({1e3 * m.registry_call_s:.1f} ms, {p['hardware']}, "
            f"`{p['source']}`), "
            f"{m.attempts_per_request:g} admission attempt per request ({m.calls('#24989'):g} scheduler calls for "
            f"{m.requests} requests) and {m.steps} steps for those requests, #24989 gains "
            f"{100 * SEED_GAIN:.0f}% (the seed's \"about 3%\") at a step time of {1e3 * at:.0f} ms; at that "
            f"run's {1e3 * m.step_s:.0f} ms per step the model gives {100 * m.gain('#24989'):.1f}% "
            f"and that committed paired run measured {100 * p['gain']:.1f}% [{100 * p['low']:.1f}, {100 * p['high']:.1f}].")


def kit_sentence(points: list[dict]) -> str:
    """The kit's measured #24866 gain, said to be a different fix from the seed's."""
    p = reference(points, "#24866")
    if p is None:
        return "No paired run of #24866 is committed."
    return (f"The kit's {100 * p['gain']:+.2f}% for #24866 on this CPU ({p['hardware']}, {p['source']}) is a "
            f"different fix: #24866 removed the metadata builder's call at every step ({p['steps']:g} calls per "
            f"block), while the seed's ~3% is #24989's, the scheduler's call per admission attempt and the "
            f"runner's ({p['attempts_per_request'] * p['requests']:g} calls per block).")


def gain_curve(model: SiteModel, step_s: np.ndarray) -> dict[str, np.ndarray]:
    """Each fix's gain over ``step_s`` (seconds), the other inputs of ``model`` held."""
    return {fix: np.array([replace(model, step_s=float(s)).gain(fix) for s in step_s]) for fix in FIXES}


def gain_figure(model: SiteModel, points: list[dict], title: str = ""):
    """Gain of each fix against step time (log axes): the model's curves at ``model``'s inputs, the
    measured paired gains with their 95% intervals at their step times (hollow: a -shared folder,
    squares: a GPU run), the legend outside the axes. Returns the matplotlib Figure."""
    from matplotlib.figure import Figure
    fig = Figure(figsize=(8.5, 4.2))
    ax = fig.add_subplot()
    s = np.logspace(-3, 0.5, 120)
    colors = {"#24866": "C0", "#24989": "C1"}
    for fix, g in gain_curve(model, s).items():
        ax.plot(s, 100 * g, color=colors[fix], label=f"model {fix}: {model.calls(fix):g} calls x "
                f"{1e3 * model.registry_call_s:.1f} ms / serving time")
    for p in points:
        ax.errorbar(p["step_s"], 100 * p["gain"], yerr=[[100 * (p["gain"] - p["low"])], [100 * (p["high"] - p["gain"])]],
                    fmt="s" if p["gpu"] else "o", capsize=3, color=colors[p["fix"]],
                    mfc="white" if p["hardware"].endswith("-shared") else colors[p["fix"]],
                    label=f"measured {p['fix']} ({p['hardware']})")
    ax.axhline(100 * SEED_GAIN, color="grey", lw=0.8, ls=":", label="the seed's ~3% (#24989)")
    if not any(p["gpu"] for p in points):
        ax.text(0.01, 0.02, "no GPU run committed", transform=ax.transAxes, fontsize=8, style="italic")
    ax.set(xscale="log", yscale="log", xlabel="model step time (s)", ylabel="throughput gain (%)",
           title=title or f"Whisper registry-call fixes: {model.requests} requests, {model.max_tokens} tokens each")
    ax.set_ylim(0.1, 1000)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    fig.subplots_adjust(left=0.09, right=0.6, bottom=0.13, top=0.9)
    return fig
