"""The serving loop of ``refimpl bench serve``'s in-process engines: a workload of speech requests
served by arrival time (open loop) or at a fixed concurrency (closed loop: a new request as soon as
one finishes, as ``vllm bench serve --max-concurrency`` does), each step recorded by a
``telemetry.StepRecorder``. serve.py builds the engines and the designs around it."""
from __future__ import annotations

import gc
import time
from dataclasses import dataclass
from typing import Optional

import numpy as np

from refimpl.audio import make_request_audios
from refimpl.lab.bench.telemetry import StepRecorder
from refimpl.multimodal import MULTIMODAL_REGISTRY as REG
from refimpl.sampling_params import SamplingParams

__all__ = ["PERCENTILES", "WorkItem", "make_workload", "latency_summary", "served", "serve_engine"]

PERCENTILES = (50, 90, 99)


@dataclass
class WorkItem:
    """One request of a workload: arrival (s after the start), audio (float32, 16 kHz)."""
    arrival_s: float
    audio: np.ndarray


def make_workload(num_requests: int, seed: int = 0, rate: float | None = None, max_s: float = 30.0) -> list[WorkItem]:
    """Mixed-length speech; every request at 0 s, or exponential gaps of mean 1 / ``rate`` s."""
    audios = make_request_audios(num_requests, seed=seed, max_s=max_s)
    times = np.cumsum(np.random.default_rng(seed + 1).exponential(1.0 / rate, num_requests)) if rate \
        else np.zeros(num_requests)
    return [WorkItem(float(t), a) for t, a in zip(times, audios)]


def latency_summary(name: str, values: list[float]) -> dict[str, float]:
    arr = np.asarray(values, dtype=float)
    return {**{f"{name}_p{p}": float(np.percentile(arr, p)) for p in PERCENTILES}, f"{name}_mean": float(arr.mean())}


def served(n_req: int, n_tok: int, wall: float, **extra) -> dict:
    """A served block's record: requests, output tokens, wall s and their rates, then ``extra``."""
    return {"num_requests": n_req, "num_output_tokens": n_tok, "wall_s": wall, "requests_per_s": n_req / wall,
            "output_tokens_per_s": n_tok / wall, **extra}


def serve_engine(engine, work: list[WorkItem], params: SamplingParams, gc_off: bool = False,
                 concurrency: Optional[int] = None, events=None) -> dict:
    """Serve ``work`` with an in-process LLMEngine: each request added at its arrival time, or with
    ``concurrency`` C a closed loop (C requests in flight from the start, the next added as soon as
    one finishes, arrival times ignored; the last C drain). Returns rates, wall / CPU / registry s,
    calls, steps, TTFT and E2E percentiles (from each request's add), the per-step telemetry
    (``step_records`` columns and ``step_summary``; ``events``: a ForwardEvents for the device
    seconds on CUDA), ``tokens`` and ``outputs`` in ``work``'s order."""
    sched = engine.scheduler
    arrival: dict[str, float] = {}
    first: dict[str, float] = {}
    done: dict[str, tuple] = {}
    recorder = StepRecorder(engine, REG.stats, events)
    if gc_off:
        gc.collect()
        gc.disable()
    try:
        REG.reset_stats()
        i, steps, t0, c0 = 0, 0, time.perf_counter(), time.process_time()
        with recorder:
            while i < len(work) or engine.has_unfinished_requests():
                now = time.perf_counter() - t0
                while i < len(work) and (len(arrival) - len(done) < concurrency if concurrency
                                         else work[i].arrival_s <= now):
                    rid = engine.add_request(None, {"multi_modal_data": {"audio": (work[i].audio, 16000)}}, params)
                    arrival[rid], i = t0 + (now if concurrency else work[i].arrival_s), i + 1
                if not engine.has_unfinished_requests():
                    time.sleep(max(0.0, min(work[i].arrival_s - now, 0.05)))
                    continue
                finished, steps = recorder.step(), steps + 1
                t = time.perf_counter()
                for r in sched.running:  # the scheduler's ids are per submission; ours are the user's
                    if r.external_req_id not in first and r.num_output_tokens > 0:
                        first[r.external_req_id] = t
                for o in finished:
                    first.setdefault(o.request_id, t)
                    done[o.request_id] = (t, o)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    finally:
        if gc_off:
            gc.enable()
    outs = [done[r][1] for r in arrival]
    return served(len(outs), sum(len(o.output_token_ids) for o in outs), wall, cpu_s=cpu, steps=steps,
                  registry_s=REG.stats.encdec_s, registry_calls=REG.stats.encdec_calls,
                  **latency_summary("ttft_s", [first[r] - arrival[r] for r in arrival]),
                  **latency_summary("e2e_s", [done[r][0] - arrival[r] for r in arrival]),
                  **recorder.records(), tokens=[list(o.output_token_ids) for o in outs], outputs=outs)
