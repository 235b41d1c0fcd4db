"""The serving loops of the benches: for the workload bench (refimpl/bench/workload.py) the
requests, the in-process engine fed at each request's arrival time, and transformers'
generate() in static batches, with latency percentiles (design in workload.py's docstring);
for the paired bench (refimpl/bench/paired.py) one timed block of requests served to completion.
"""
from __future__ import annotations

import gc
import sys
import time
from dataclasses import dataclass

import numpy as np

PERCENTILES = (50, 90, 99)


@dataclass
class WorkItem:
    """One request of the workload: arrival (s after the start), audio (float32, 16 kHz)."""
    arrival_s: float
    audio: np.ndarray


def make_workload(num_requests: int, seed: int = 0, arrival: str = "all", rate: float = 1.0,
                  max_s: float = 30.0) -> list[WorkItem]:
    """``num_requests`` requests with mixed-length speech and a seeded arrival schedule.

    arrival "all": every request at 0 s; "poisson": exponential gaps of mean 1 / ``rate`` s.
    Raises ValueError for an unknown arrival kind or rate <= 0.
    """
    from refimpl.audio import make_request_audios
    if arrival not in ("all", "poisson"):
        raise ValueError(f"arrival must be 'all' or 'poisson', got {arrival!r}")
    if arrival == "poisson" and not rate > 0:
        raise ValueError(f"rate must be > 0 requests/s, got {rate}")
    audios = make_request_audios(num_requests, seed=seed, max_s=max_s)
    rng = np.random.default_rng(seed + 1)
    times = np.cumsum(rng.exponential(1.0 / rate, num_requests)) if arrival == "poisson" \
        else np.zeros(num_requests)
    return [WorkItem(float(t), a) for t, a in zip(times, audios)]


def latency_summary(name: str, values: list[float]) -> dict[str, float]:
    """``{name_p50, name_p90, name_p99, name_mean}`` in seconds."""
    arr = np.asarray(values, dtype=float)
    out = {f"{name}_p{p}": float(np.percentile(arr, p)) for p in PERCENTILES}
    out[f"{name}_mean"] = float(arr.mean())
    return out


def serve_engine(engine, work: list[WorkItem], max_tokens: int) -> dict:
    """Serve ``work`` with an in-process LLMEngine, adding each request at its arrival time.

    Returns requests/s, output tokens/s, TTFT / E2E percentiles (s), steps, wall_s.
    """
    from refimpl.sampling_params import SamplingParams
    params = SamplingParams(max_tokens=max_tokens)
    sched = engine.scheduler
    arrival, first, done = {}, {}, {}
    n_tok, steps, i = 0, 0, 0
    t0 = time.perf_counter()
    while i < len(work) or engine.has_unfinished_requests():
        now = time.perf_counter() - t0
        while i < len(work) and work[i].arrival_s <= now:
            rid = str(i)
            engine.add_request(rid, {"multi_modal_data": {"audio": (work[i].audio, 16000)}}, params)
            arrival[rid] = t0 + work[i].arrival_s
            i += 1
        if not engine.has_unfinished_requests():
            time.sleep(max(0.0, min(work[i].arrival_s - now, 0.05)))
            continue
        finished = engine.step()
        steps += 1
        t = time.perf_counter()
        for r in sched.running:  # the scheduler's ids are per submission; ours are the user's
            if r.external_req_id not in first and r.num_output_tokens > 0:
                first[r.external_req_id] = t
        for o in finished:
            first.setdefault(o.request_id, t)
            done[o.request_id] = t
            n_tok += len(o.output_token_ids)
    wall = time.perf_counter() - t0
    return {"num_requests": len(done), "num_output_tokens": n_tok, "wall_s": wall, "steps": steps,
            "requests_per_s": len(done) / wall, "output_tokens_per_s": n_tok / wall,
            **latency_summary("ttft_s", [first[r] - arrival[r] for r in done]),
            **latency_summary("e2e_s", [done[r] - arrival[r] for r in done])}


def serve_hf(model, processor, decoder_prompt: list[int], work: list[WorkItem], max_tokens: int,
             batch_size: int) -> dict:
    """Serve ``work`` with transformers' generate() in static batches (see module doc)."""
    import torch

    from refimpl.worker.hf_reference import hf_greedy_generate
    e2e, n_tok = [], 0
    t0 = time.perf_counter()
    for b in range(0, len(work), batch_size):
        batch = work[b:b + batch_size]
        wait = batch[-1].arrival_s - (time.perf_counter() - t0)
        if wait > 0:
            time.sleep(wait)
        feats = torch.stack([processor.apply("", {"audio": [(w.audio, 16000)]}).mm_kwargs["audio"][0]
                             ["input_features"] for w in batch]).to(model.device, model.dtype)
        rows = hf_greedy_generate(model, feats, decoder_prompt, max_tokens, stop_at_eos=True)
        t = time.perf_counter() - t0
        n_tok += sum(len(r) for r in rows)
        e2e += [t - w.arrival_s for w in batch]
    wall = time.perf_counter() - t0
    return {"num_requests": len(work), "num_output_tokens": n_tok, "wall_s": wall,
            "requests_per_s": len(work) / wall, "output_tokens_per_s": n_tok / wall,
            **latency_summary("ttft_s", e2e), **latency_summary("e2e_s", e2e)}


def serve_block(engine, audios: list, params, gc_mode: str = "collect-disable") -> dict:
    """Serve one block of requests to completion; wall / CPU / registry seconds, tokens.

    ``gc_mode`` "collect-disable": ``gc.collect()`` before the block, collector off during it
    (re-enabled after, also on error); "default": the collector as Python runs it."""
    from refimpl.multimodal import MULTIMODAL_REGISTRY as reg
    if gc_mode == "collect-disable":
        gc.collect()
        gc.disable()
    try:
        return _timed_block(engine, audios, params, reg)
    finally:
        if gc_mode == "collect-disable":
            gc.enable()


def _timed_block(engine, audios: list, params, reg) -> dict:
    reg.reset_stats()
    w0, c0 = time.perf_counter(), time.process_time()
    ids = [engine.add_request(None, {"multi_modal_data": {"audio": (a, 16000)}}, params) for a in audios]
    done, steps = {}, 0
    while engine.has_unfinished_requests():
        steps += 1
        for o in engine.step():
            done[o.request_id] = o
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    return {"wall_s": wall, "cpu_s": cpu, "registry_s": reg.stats.encdec_s,
            "registry_calls": reg.stats.encdec_calls, "steps": steps,
            "tokens": [list(done[i].output_token_ids) for i in ids]}


def block_order(variants: list[str], rnd: int) -> list[str]:
    """Round ``rnd``'s order: forward on even rounds, reversed on odd (A B, B A, A B, ...)."""
    return list(variants) if rnd % 2 == 0 else list(reversed(variants))


def run_paired(engines: dict, audios: list, params, rounds: int, progress=None,
               max_s: float = float("inf"), budget_s: float | None = None,
               gc_mode: str = "collect-disable") -> dict:
    """Up to ``rounds`` rounds of one block per variant in alternating order; per-variant lists.
    Stops after the round during which ``max_s`` wall seconds have passed. ``budget_s``
    (fixed-time design): a round starts only if the elapsed seconds plus the mean round so
    far stay within ``budget_s``, so the timed rounds end inside the budget.

    An interrupt (SIGINT, e.g. ``timeout --signal=INT``) ends the rounds, keeping the whole
    rounds finished before it. Any other exception of a block propagates with those rounds as
    ``e.paired_rounds`` (this function's dict, plus ``failed``: "round <r>: <type>: <message>").

    Returns {variant: {"wall_s": [...], "cpu_s": [...], "registry_s": [...],
    "registry_calls": [...], "steps": [...]}} indexed by round, plus "tokens_identical" (every block of every
    variant produced the same tokens as the first block) and "interrupted".
    """
    variants = list(engines)
    out: dict[str, dict[str, list]] = {
        v: {"wall_s": [], "cpu_s": [], "registry_s": [], "registry_calls": [], "steps": []} for v in variants}
    ref, identical, interrupted, t0 = None, True, False, time.perf_counter()
    try:
        for rnd in range(rounds):
            elapsed = time.perf_counter() - t0
            if elapsed > max_s or (budget_s is not None and rnd and elapsed * (rnd + 1) / rnd > budget_s):
                break
            blocks = {v: serve_block(engines[v], audios, params, gc_mode) for v in block_order(variants, rnd)}
            for v, b in blocks.items():  # a round counts only when all its blocks ran
                ref = ref or b["tokens"]
                identical &= b["tokens"] == ref
                for k in out[v]:
                    out[v][k].append(b[k])
            if progress:
                progress(rnd)
    except KeyboardInterrupt:
        interrupted = True
        print("interrupted: keeping the rounds finished so far", file=sys.stderr)
    except Exception as e:
        e.paired_rounds = {  # type: ignore[attr-defined]
            "by_variant": out, "tokens_identical": identical, "benchmark_s": time.perf_counter() - t0,
            "interrupted": False, "failed": f"round {len(out[variants[0]]['wall_s']) + 1}: {type(e).__name__}: {e}"}
        raise
    return {"by_variant": out, "tokens_identical": identical, "benchmark_s": time.perf_counter() - t0,
            "interrupted": interrupted}
