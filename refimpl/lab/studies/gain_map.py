"""A prediction, not a measurement: each registry-call fix's gain over concurrency C and output
length L, from a measured cost per registry call c and step time T (notebook 02, section 2).

The model is whisper_sites.SiteModel, read as a closed loop: ``requests`` requests (default 1024, the
loop's steady state) served at C running, L tokens each, one audio encoded per step (the 0.10.2 to
0.12 release rows), so steps = max(N + L - 1, ceil(N L / C)). #24866 removes one call per step, #24989
one per admission attempt (``attempts_per_request``), each c seconds, over the steps at T seconds. T
is held at its measured value at every C (the model's assumption: a larger batch makes a step longer,
which lowers every gain drawn here), so the map says where, for that c / T, the ~3% falls.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import numpy as np

from refimpl.lab.studies.whisper_sites import FIXES, SEED_GAIN, SiteModel

__all__ = ["CLOSED_LOOP_REQUESTS", "CONCURRENCY", "OUTPUT_LEN", "predicted_gains", "prediction_figure",
           "seed_gain_boundary"]

CLOSED_LOOP_REQUESTS = 1024
CONCURRENCY = tuple(2 ** i for i in range(9))           # C: 1 .. 256 running requests
OUTPUT_LEN = tuple(2 ** i for i in range(1, 11))        # L: 2 .. 1024 tokens per request


def predicted_gains(call_s: float, step_s: float, concurrency: Sequence[int] = CONCURRENCY,
                    output_len: Sequence[int] = OUTPUT_LEN, *, attempts_per_request: float = 1.0,
                    requests: int = CLOSED_LOOP_REQUESTS) -> dict[str, np.ndarray]:
    """{fix: gains (len(output_len), len(concurrency))} of each fix of whisper_sites.FIXES at c =
    ``call_s`` and T = ``step_s`` seconds (fractions: 0.03 is 3%). Raises ValueError for a non-positive
    c, T, C, L or request count."""
    if call_s <= 0 or step_s <= 0 or requests <= 0 or min(concurrency) <= 0 or min(output_len) <= 0:
        raise ValueError("call_s, step_s, requests, concurrency and output_len must be positive "
                         f"(got {call_s}, {step_s}, {requests}, {min(concurrency)}, {min(output_len)})")
    base = SiteModel(call_s, step_s, requests=requests, attempts_per_request=attempts_per_request)
    return {fix: np.array([[replace(base, max_tokens=int(L), max_num_seqs=int(C)).gain(fix) for C in concurrency]
                           for L in output_len]) for fix in FIXES}


def seed_gain_boundary(gains: np.ndarray, concurrency: Sequence[int] = CONCURRENCY,
                       output_len: Sequence[int] = OUTPUT_LEN, gain: float = SEED_GAIN) -> dict[int, tuple[int, int]]:
    """Where ``gain`` (default the seed's ~3%) falls on the grid: per C, (L at or above ``gain``, the next
    L, below it), for the Cs whose column crosses it. ``gains``: one fix's array of ``predicted_gains``."""
    out = {}
    for j, C in enumerate(concurrency):
        col = gains[:, j]
        cross = np.nonzero((col[:-1] >= gain) & (col[1:] < gain))[0]
        if cross.size:
            out[int(C)] = (int(output_len[cross[0]]), int(output_len[cross[0] + 1]))
    return out


def prediction_figure(call_s: float, step_s: float, *, measured: Sequence[dict] = (), source: str = "",
                      concurrency: Sequence[int] = CONCURRENCY, output_len: Sequence[int] = OUTPUT_LEN):
    """One panel per fix: the predicted gain (%, colour, log scale) over C (x) and L (y), the ~3% contour
    drawn and labelled, and ``measured`` paired points ({"fix", "C", "L", "gain", "low", "high"}) marked
    with their measured gain beside (a paired block is no closed loop: its C is its batch, its L its
    token cap). The title says it is a prediction and from which c and T. Returns the Figure."""
    from matplotlib.colors import LogNorm
    from matplotlib.figure import Figure
    gains = predicted_gains(call_s, step_s, concurrency, output_len)
    fig = Figure(figsize=(10, 4.4))
    axes = fig.subplots(1, len(gains), sharey=True)
    x, y = np.log2(concurrency), np.log2(output_len)
    lo = max(1e-4, min(float(g.min()) for g in gains.values()))
    norm = LogNorm(vmin=100 * lo, vmax=100 * max(float(g.max()) for g in gains.values()))
    for ax, (fix, g) in zip(axes, gains.items()):
        mesh = ax.pcolormesh(x, y, 100 * np.maximum(g, lo), norm=norm, shading="nearest", cmap="viridis")
        if g.min() < SEED_GAIN < g.max():
            cs = ax.contour(x, y, 100 * g, levels=[100 * SEED_GAIN], colors="white", linewidths=1.6)
            ax.clabel(cs, fmt={100 * SEED_GAIN: f"~{100 * SEED_GAIN:.0f}%"}, fontsize=8)
        for p in (p for p in measured if p["fix"] == fix):
            ax.plot(np.log2(p["C"]), np.log2(p["L"]), "r*", ms=11)
            ax.annotate(f"measured {100 * p['gain']:+.1f}% [{100 * p['low']:+.1f}, {100 * p['high']:+.1f}]",
                        (np.log2(p["C"]), np.log2(p["L"])), xytext=(6, 4), textcoords="offset points",
                        color="red", fontsize=7)
        ax.set_xticks(x, [str(c) for c in concurrency], fontsize=7)
        ax.set_yticks(y, [str(n) for n in output_len], fontsize=7)
        ax.set(xlabel="concurrency C (running requests)", title=f"{fix}: {FIXES[fix][1]} over {FIXES[fix][0]}")
    axes[0].set_ylabel("output length L (tokens per request)")
    fig.colorbar(mesh, ax=list(axes), label="predicted gain (%)")
    fig.suptitle(f"PREDICTION (not a measurement): gain = calls x c / (steps x T) at c = {1e3 * call_s:.2f} ms, "
                 f"T = {1e3 * step_s:.1f} ms held at every C" + (f"\nc and T measured in {source}" if source else ""),
                 fontsize=9)
    return fig
