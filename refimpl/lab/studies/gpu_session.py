"""The rules of the GPU session's ~3% A/B (issue 48, W4), written before the run and applied by
``scripts/gpu_session.sh`` between its sections:

- **the output length** (``plan``): W2's registry call (s per call, one thread) and W3's decode step on
  0.11.0 at concurrency 4 (median host wall s) give PR #24989's predicted gain at L = 224 tokens with
  ``whisper_sites.SiteModel`` (the calls it removes: one per admission; the steps: the closed loop's).
  Inside 2-4%: L stays 224; outside: the L in [128, 440] whose prediction is nearest 3%.
- **the pass rule** (``verdict``): the direct gain (wall s, paired by round) agrees with the gain from
  its parts (``gain_parts.parts_gain_of``: removed calls x cost / steps x step time) within 1 point;
  else the telemetry beside it (per variant: decode forward and host wall medians, SM clocks and
  throttle reasons at each block's start and end, allocator retries) is what says why.

``python -m refimpl.lab.studies.gpu_session plan W2.json W3_C4.json OUT.json`` prints L;
``python -m refimpl.lab.studies.gpu_session verdict W4.json OUT.json`` prints pass / fail.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Optional

import numpy as np

from refimpl.lab.bench.schema import Result
from refimpl.lab.studies.gain_parts import parts_gain_of
from refimpl.lab.studies.whisper_sites import SiteModel

__all__ = ["W4_VARIANTS", "W4_CONCURRENCY", "W4_REQUESTS", "W4_OUTPUT_LEN", "OUTPUT_LEN_RANGE", "BAND", "TARGET",
           "AGREE", "predicted_gain", "choose_output_len", "plan", "verdict", "main"]

W4_VARIANTS = ("0.10.2+#24866", "0.11.0")  # PR #24989's pair (whisper_sites.FIXES)
W4_CONCURRENCY, W4_REQUESTS, W4_OUTPUT_LEN = 4, 8, 224  # C in flight, requests per block, L tokens each
OUTPUT_LEN_RANGE = (128, 440)  # where L may move to
BAND, TARGET = (0.02, 0.04), 0.03  # predicted gains that keep L; the prediction a moved L aims at
AGREE = 0.01  # the pass rule: |direct - from its parts| at most 1 point


def predicted_gain(call_s: float, step_s: float, output_len: int, concurrency: int = W4_CONCURRENCY,
                   num_requests: int = W4_REQUESTS) -> float:
    """PR #24989's predicted gain (a fraction) for one block: ``num_requests`` requests of
    ``output_len`` tokens at ``concurrency``, one registry call (``call_s`` s) per admission removed,
    each step ``step_s`` s (whisper_sites.SiteModel)."""
    return SiteModel(call_s, step_s, requests=num_requests, max_tokens=output_len,
                     max_num_seqs=concurrency).gain("#24989")


def choose_output_len(call_s: float, step_s: float, **kw: Any) -> tuple[int, float]:
    """(L, its predicted gain): 224 if its prediction is inside BAND, else the L in OUTPUT_LEN_RANGE
    nearest TARGET (the shortest of equals)."""
    g = predicted_gain(call_s, step_s, W4_OUTPUT_LEN, **kw)
    if BAND[0] <= g <= BAND[1]:
        return W4_OUTPUT_LEN, g
    lo, hi = OUTPUT_LEN_RANGE
    best = min(range(lo, hi + 1), key=lambda n: abs(predicted_gain(call_s, step_s, n, **kw) - TARGET))
    return best, predicted_gain(call_s, step_s, best, **kw)


def _median_of(runs: list[dict], kind: str, key: str) -> Optional[float]:
    vals = [r["step_summary"][kind].get(key) for r in runs if (r.get("step_summary") or {}).get(kind)]
    vals = [v for v in vals if v is not None]
    return float(np.median(vals)) if vals else None


def plan(registry: Result, step: Result) -> dict[str, Any]:
    """The W4 plan from W2's Result (``refimpl probe registry-call``) and W3's run at concurrency 4
    (a workload Result on 0.11.0): the inputs, the prediction at 224 and the L chosen. Raises
    KeyError naming what is missing (no decode step recorded, no one-thread registry calls)."""
    call_s = float(registry.variants["registry-1-thread"]["summary"]["s"]["median"])
    step_s = _median_of(step.runs(W4_VARIANTS[1]), "decode", "wall_s_median")
    if step_s is None:
        raise KeyError("the W3 Result at concurrency 4 recorded no decode step (step_summary['decode'])")
    n, g = choose_output_len(call_s, step_s)
    return {"call_s": call_s, "decode_step_s": step_s, "concurrency": W4_CONCURRENCY, "num_requests": W4_REQUESTS,
            "predicted_gain_at_224": predicted_gain(call_s, step_s, W4_OUTPUT_LEN), "output_len": n,
            "predicted_gain": g, "band": list(BAND), "target": TARGET, "range": list(OUTPUT_LEN_RANGE),
            "prediction": True}


def _telemetry(runs: list[dict]) -> dict[str, Any]:
    gpu = [r["gpu"] for r in runs if r.get("gpu")]
    return {"decode_wall_s_median": _median_of(runs, "decode", "wall_s_median"),
            "decode_forward_s_median": _median_of(runs, "decode", "forward_s_median"),
            "sm_clock_mhz": [[g[e].get("sm_clock_mhz") for e in ("start", "end")] for g in gpu],
            "throttle_reasons": sorted({str(g[e].get("throttle_reasons")) for g in gpu for e in ("start", "end")}),
            "alloc_retries": sum(r.get("alloc_retries") or 0 for r in runs)}


def verdict(w4: Result) -> dict[str, Any]:
    """The pass rule on W4's paired Result: the direct gain (wall s, by round) with its 95% interval,
    the gain from its parts with its interval, ``agree`` (within AGREE), ``stopped_early`` and each
    variant's telemetry. Raises KeyError when the Result has no such comparison or no parts."""
    direct = next((c for c in w4.comparisons if c["metric"] == "wall_s" and c["pairing"] == "round"), None)
    parts = parts_gain_of(w4, direct) if direct else None
    if direct is None or parts is None:
        raise KeyError("the W4 Result has no wall_s comparison by round with its registry counters and steps")
    iv = parts.interval
    return {"direct": {k: direct[k] for k in ("variant", "over", "gain", "low", "high", "half_width", "pairs")},
            "parts": {"gain": iv.estimate, "low": iv.low, "high": iv.high, "calls": parts.calls,
                      "call_s": parts.call_s, "steps": parts.steps, "step_s": parts.step_s},
            "points_apart": 100 * abs(direct["gain"] - iv.estimate), "agree": abs(direct["gain"] - iv.estimate) <= AGREE,
            "stopped_early": w4.params.get("stopped_early"), "rounds_run": w4.params.get("rounds_run"),
            "telemetry": {v: _telemetry(w4.runs(v)) for v in w4.variants}}


def main(argv: list[str]) -> int:
    """``plan W2 W3 OUT`` (prints L) | ``verdict W4 OUT`` (prints pass / fail); 0, 2 on bad arguments."""
    if argv[:1] == ["plan"] and len(argv) == 4:
        out = plan(Result.load(argv[1]), Result.load(argv[2]))
        Path(argv[3]).write_text(json.dumps(out, indent=1) + "\n")
        print(out["output_len"])
        return 0
    if argv[:1] == ["verdict"] and len(argv) == 3:
        out = verdict(Result.load(argv[1]))
        Path(argv[2]).write_text(json.dumps(out, indent=1) + "\n")
        print(("pass" if out["agree"] else "fail") + f": direct {100 * out['direct']['gain']:+.2f} points, from its "
              f"parts {100 * out['parts']['gain']:+.2f} ({out['points_apart']:.2f} apart)")
        return 0
    print("usage: python -m refimpl.lab.studies.gpu_session plan W2.json W3_C4.json OUT.json | "
          "verdict W4.json OUT.json", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
