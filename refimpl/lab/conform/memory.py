"""The probe's peak resident memory per setting, predicted before anything is installed, and the
guard that refuses a grid this machine cannot hold.

A prediction, from the kit's own memory model: the release row's StartupPlan for the setting
(its lookups and profile dummy, the processing cache, the hasher's copies) priced by
``startup_memory.peaks`` with the default ``MemoryRates`` and the probe's own base. The probe
loads no weights, allocates no KV cache and stops at the encoder, so only the passes count: the
moments of the plan's steps (a lookup-only setting: its lookups), without the KV cache.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Optional

import psutil

from refimpl.config import VllmConfig
from refimpl.engine.startup_memory import MemoryRates, peaks
from refimpl.engine.startup_plan import StartupPlan
from refimpl.errors import InsufficientMemoryError
from refimpl.lab.conform.grid import WHISPER, Setting

GiB = 1 << 30
# resident bytes of the probe's interpreter before a pass (torch, vLLM, transformers imported):
# with it, every Qwen setting of vLLM 0.9.0's run (results/conformance/vllm-0.9.0) measured below
# its prediction, by 0.12 to 0.89 GiB (median 0.57): a guard's estimate, on the safe side
PROBE_BASE = 3 * GiB // 2


def predicted_peak(s: Setting, row: str, rates: Optional[MemoryRates] = None) -> tuple[int, str]:
    """(bytes, the moment) the probe of setting ``s`` peaks at under the release row ``row`` (a
    start-up row name). Whisper settings: the base (the probe builds configs only)."""
    from refimpl.lab.conform.compare import _mc, _sc  # the comparison's configs of a setting
    r = rates or replace(MemoryRates(), base=PROBE_BASE)
    if s["model"] == WHISPER:
        return r.base, "start"
    plan = StartupPlan.build(VllmConfig(_mc(s), _sc(s)), row)
    moments = [(name, held) for name, held in peaks(plan, r)
               if name.startswith("#") and not (s.get("lookup_only") and "profile_run" in name and "#3" in name)]
    if not moments:
        return r.base, "start"
    name, held = max(moments, key=lambda m: sum(v for k, v in m[1].items() if k != "KV cache"))
    return sum(v for k, v in held.items() if k != "KV cache"), name


def check_grid(settings: list[Setting], row: str, total: Optional[int] = None) -> dict[str, int]:
    """{setting id: predicted peak bytes}. Raises InsufficientMemoryError naming the first setting
    whose predicted peak exceeds this machine's RAM (``total``, default psutil's), before anything
    is installed or probed (``--quick`` leaves the long lookup-only settings out)."""
    total = psutil.virtual_memory().total if total is None else total
    out = {s["id"]: predicted_peak(s, row)[0] for s in settings}
    over = [(sid, b) for sid, b in out.items() if b > total]
    if over:
        sid, need = max(over, key=lambda x: x[1])
        raise InsufficientMemoryError(
            "setting", f"a probe peak within this machine's {total / GiB:.1f} GiB of RAM",
            f"the setting {sid!r} of vLLM {row}'s probe would peak at about {need / GiB:.1f} GiB "
            f"(predicted; {len(over)} setting(s) over): run with --quick, or on a larger machine")
    return out

