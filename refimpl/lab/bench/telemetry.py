"""Per-step telemetry of an in-process engine while it serves (issue 42): what each
``LLMEngine.step()`` was and cost, gathered on the host beside the step, never inside it.

Each step: its kind (``step_kind`` of the step's first SchedulerOutput: prefill, mixed, decode, or
None when it scheduled nothing), ``num_running_reqs`` (vLLM's SchedulerStats name: the scheduler's
running list right after that schedule), host wall seconds of ``engine.step()``, the registry's
``get_encdec_max_encoder_len`` seconds inside it, and on CUDA the forward's device seconds from the
runner's ``forward_events`` (refimpl/worker/forward_events.py; None on the CPU). Gathering adds no
op to the step (no tensor touched; tests/lab/bench/test_serve_telemetry.py counts them with
DispatchCounter); the device seconds are read after the served block, outside its timing.
"""
from __future__ import annotations

from collections import Counter
from time import perf_counter
from typing import Any, Optional

import numpy as np

__all__ = ["STEP_KINDS", "COLUMNS", "step_kind", "StepRecorder", "summarize_steps"]

STEP_KINDS = ("prefill", "mixed", "decode")
COLUMNS = ("kind", "num_running_reqs", "wall_s", "forward_s", "registry_s")


def step_kind(so) -> Optional[str]:
    """"decode" (every scheduled request one token, none new), "prefill" (only new requests),
    "mixed" (new and running requests together); None for a step that schedules nothing."""
    if not so.num_scheduled_tokens:
        return None
    new = {r.req_id for r in so.scheduled_new_reqs}
    if not new:
        return "decode" if all(n == 1 for n in so.num_scheduled_tokens.values()) else "mixed"
    return "prefill" if new >= set(so.num_scheduled_tokens) else "mixed"


class StepRecorder:
    """Wraps one engine's steps while attached: ``step()`` in place of ``engine.step()``.

    ``engine``: an in-process LLMEngine (or a stand-in with ``step``; a scheduler without
    ``schedule`` gives kind None); ``stats``: the registry's ProcessingStats (``encdec_s``);
    ``events``: a ForwardEvents set as the runner's ``forward_events`` (CUDA), else None."""

    def __init__(self, engine, stats, events=None) -> None:
        self.engine, self.stats, self.events = engine, stats, events
        self.columns: dict[str, list] = {k: [] for k in COLUMNS}
        self._event_of_step: list[Optional[int]] = []
        self._seen: list = []
        self._sched = getattr(engine, "scheduler", None)
        self._runner: Any = None

    def __enter__(self) -> "StepRecorder":
        sched = self._sched
        if sched is not None and hasattr(sched, "schedule"):
            schedule, seen = sched.schedule, self._seen

            def observed():                      # records the step's plan; changes nothing
                so = schedule()
                seen.append((so, len(sched.running)))
                return so
            sched.schedule = observed
        if self.events is not None:
            self._runner = self.engine.model_runner.whisper_runner
            self._runner.forward_events = self.events
        return self

    def __exit__(self, *exc) -> None:
        if self._sched is not None and "schedule" in vars(self._sched):
            del self._sched.schedule              # the class's method again
        if self._runner is not None:
            self._runner.forward_events = None

    def step(self) -> list:
        """``engine.step()``, recorded."""
        seen, stats, events = self._seen, self.stats, self.events
        n_events = events.num_recorded if events is not None else 0
        reg0 = stats.encdec_s
        t0 = perf_counter()
        out = self.engine.step()
        wall = perf_counter() - t0
        c = self.columns
        so, running = seen[0] if seen else (None, 0)
        c["kind"].append(step_kind(so) if so is not None else None)
        c["num_running_reqs"].append(running)
        c["wall_s"].append(wall)
        c["registry_s"].append(stats.encdec_s - reg0)
        self._event_of_step.append(n_events if events is not None and events.num_recorded > n_events else None)
        seen.clear()
        return out

    def records(self) -> dict[str, Any]:
        """The columns (one entry per step; seconds rounded to 1 us) and their ``summarize_steps``;
        ``forward_s`` None on the CPU (no CUDA events), else None for a step that ran no model."""
        c: dict[str, Any] = dict(self.columns)
        if self.events is None:
            c["forward_s"] = None
        else:
            secs = self.events.seconds()
            c["forward_s"] = [None if i is None else secs[i] for i in self._event_of_step]
        for k in ("wall_s", "registry_s", "forward_s"):
            if c[k] is not None:
                c[k] = [None if x is None else round(x, 6) for x in c[k]]
        return {"step_records": c, "step_summary": summarize_steps(c)}


def summarize_steps(columns: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per step kind (seconds to 1 us): ``steps``, ``wall_s_median`` / ``wall_s_total``, ``registry_s_total``,
    ``forward_s_median`` / ``forward_s_total`` (None without device times), ``num_running_reqs_median``."""
    kinds = columns["kind"]
    out: dict[str, dict[str, Any]] = {}
    for kind, n in Counter(k for k in kinds if k is not None).items():
        idx = [i for i, k in enumerate(kinds) if k == kind]
        wall = [columns["wall_s"][i] for i in idx]
        fwd = None if columns["forward_s"] is None else [columns["forward_s"][i] for i in idx
                                                         if columns["forward_s"][i] is not None]
        out[kind] = {"steps": n, "wall_s_median": _s(np.median(wall)), "wall_s_total": _s(sum(wall)),
                     "registry_s_total": _s(sum(columns["registry_s"][i] for i in idx)),
                     "forward_s_median": _s(np.median(fwd)) if fwd else None,
                     "forward_s_total": _s(sum(fwd)) if fwd else None,
                     "num_running_reqs_median": float(np.median([columns["num_running_reqs"][i] for i in idx]))}
    return out


def _s(x) -> float:
    return round(float(x), 6)  # seconds to 1 us, as the columns
