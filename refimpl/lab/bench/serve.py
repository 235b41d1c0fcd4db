"""``refimpl bench serve``: Whisper serving by encoder-length row, on real speech (seeded); designs
fresh (Result "throughput"), workload, paired (specs.ServeSpec). hf-generate: TTFT = E2E. The loop
and its per-step telemetry: serve_loop.py, telemetry.py; the machine around each block: device_state.py."""
from __future__ import annotations

import time
from typing import Any, Optional

import numpy as np
import torch

from refimpl.config import ModelConfig, resolve_device
from refimpl.engine.core import StepTimings
from refimpl.engine.llm_engine import LLMEngine
from refimpl.lab.bench.common import set_single_thread
from refimpl.lab.bench.device_state import (
    alloc_retries,
    gpu_state,
    gpu_telemetry_source,
    pin_engine_thread,
    restore_affinity,
)
from refimpl.lab.bench.schema import Result
from refimpl.lab.bench.serve_loop import PERCENTILES, WorkItem, latency_summary, make_workload, serve_engine
from refimpl.lab.bench.serve_loop import served as _served
from refimpl.lab.bench.specs import HF, ServeSpec
from refimpl.lab.env import result_env
from refimpl.lab.stats import MIN_PAIRS, median, paired, summarize
from refimpl.multimodal import MULTIMODAL_REGISTRY as REG
from refimpl.sampling_params import SamplingParams
from refimpl.tokenizer import whisper_decoder_prompt
from refimpl.worker.forward_events import ForwardEvents
from refimpl.worker.hf_reference import hf_greedy_generate
from refimpl.worker.model_loader import get_model, shared_weights

__all__ = ["PERCENTILES", "METRICS", "TELEMETRY", "WorkItem", "make_workload", "latency_summary", "build_engine",
           "serve_engine", "serve_hf", "Servers", "executor", "run_once", "gains", "abba_sums",
           "engine_over_generate", "enough", "result"]

SERVED = ("num_requests", "num_output_tokens", "wall_s", "requests_per_s", "output_tokens_per_s")
METRICS = {"fresh": ("requests_per_s", "output_tokens_per_s"), "workload": ("requests_per_s", "output_tokens_per_s", "cpu_s"),
           "paired": ("wall_s", "cpu_s")}
Resolved = Any  # a ServeSpec after resolve(): no field left None but num_gpu_blocks, rate, max_concurrency, output_len


def build_engine(spec: Resolved, label: str, **kw) -> LLMEngine:
    """The engine of a label: a variant name, or ``audios-per-step@N`` for N audios per step."""
    name, _, n = label.partition("@")
    return LLMEngine.from_args(spec.model, encoder_len_variant=name, device=spec.device,
                               max_num_seqs=spec.max_num_seqs, num_gpu_blocks=spec.num_gpu_blocks,
                               max_audios_per_step=int(n or 1), process_mode="inproc", **kw)


def serve_hf(model, processor, decoder_prompt: list[int], work: list[WorkItem], max_tokens: int,
             batch_size: int, stop_at_eos: bool = True) -> dict:
    """Serve ``work`` with generate() in static batches padded to the longest; ``batch_s`` per batch."""
    e2e, n_tok, batch_s = [], 0, []
    t0 = time.perf_counter()
    for b in range(0, len(work), batch_size):
        batch = work[b:b + batch_size]
        wait = batch[-1].arrival_s - (time.perf_counter() - t0)
        if wait > 0:
            time.sleep(wait)
        tb = time.perf_counter()
        items = [processor.apply("", {"audio": [(w.audio, 16000)]}).mm_kwargs["audio"][0] for w in batch]
        feats = torch.stack([x["input_features"] for x in items]).to(model.device, model.dtype)
        n_tok += sum(len(r) for r in hf_greedy_generate(model, feats, decoder_prompt, max_tokens, stop_at_eos=stop_at_eos))
        t = time.perf_counter()
        batch_s.append(t - tb)
        e2e += [t - t0 - w.arrival_s for w in batch]
    return _served(len(work), n_tok, time.perf_counter() - t0, batch_s=batch_s,
                   **latency_summary("ttft_s", e2e), **latency_summary("e2e_s", e2e))


class Servers:
    """Each label's engine (or generate()) built once, all on one copy of the weights
    (``shared_weights``), the calling thread pinned to one CPU (``pin_engine_thread``; ``close``
    restores it); a step serves the timed work, or the warm-up (``round`` None). Designs: fresh
    (``run_once`` in a fresh process: the first ``warmup_requests`` of the work, processor cache on,
    ``ignore_eos``), workload (its own warm-up requests, arrivals), paired (a whole block as warm-up,
    gc off while timed). With ``max_concurrency`` C a closed loop, the warm-up at least C requests
    (a full batch); with ``output_len`` L every request decodes exactly L tokens (``ignore_eos``)."""

    def __init__(self, spec: Resolved):
        self.threads, self.spec, self.affinity = set_single_thread(), spec, pin_engine_thread()
        self.device = resolve_device(spec.device or "auto")
        self.engines: dict[str, LLMEngine] = {}
        self.work = make_workload(spec.num_requests, 0, spec.rate)
        n_warm = max(spec.warmup_requests or 0, spec.max_concurrency or 0)
        self.warm = (self.work if spec.design == "paired" else self.work[:spec.warmup_requests]
                     if spec.design == "fresh" else make_workload(n_warm, 1000))
        self.params = SamplingParams(max_tokens=spec.max_tokens,
                                     ignore_eos=spec.design == "fresh" or spec.output_len is not None)
        with shared_weights():
            self.serve = {label: self._hf() if label == HF else self._engine(label) for label in spec.variants or ()}

    def _engine(self, label: str):
        spec = self.spec
        engine = self.engines[label] = build_engine(spec, label, disable_mm_preprocessor_cache=spec.design != "fresh")
        cuda = str(getattr(getattr(engine, "vllm_config", None), "device", "cpu")).startswith("cuda")
        return lambda work: serve_engine(engine, work, self.params, gc_off=spec.design == "paired",
                                         concurrency=spec.max_concurrency, events=ForwardEvents() if cuda else None)

    def _hf(self):
        mc = ModelConfig(self.spec.model, device=self.spec.device)
        model, proc = get_model(mc), REG.create_processor(mc, disable_cache=True)
        dec, p = whisper_decoder_prompt(self.spec.model), self.params
        return lambda work: serve_hf(model, proc, dec, work, p.max_tokens, self.spec.max_num_seqs, not p.ignore_eos)

    def block(self, label: str, work: list[WorkItem]) -> dict:
        """Serve ``work`` with ``label``: its record, with the GPU state at the block's start and end
        (``gpu``, None off CUDA), the allocator's retries in it (``alloc_retries``, None off CUDA) and
        ``engine_affinity``; ``cpu_s`` of this process where the server does not say."""
        g0, a0 = gpu_state(self.device), alloc_retries(self.device)
        c0 = time.process_time()
        rec = self.serve[label](work)
        rec.setdefault("cpu_s", time.process_time() - c0)
        a1 = alloc_retries(self.device)
        return rec | {"gpu": None if g0 is None else {"start": g0, "end": gpu_state(self.device)},
                      "alloc_retries": None if a0 is None or a1 is None else a1 - a0, "engine_affinity": self.affinity}

    def __call__(self, step) -> dict:
        work = self.warm if step.round is None else self.work
        if not work:
            return {}
        drop = ("outputs", "batch_s") + (() if self.spec.design == "paired" else ("tokens",))
        return {k: v for k, v in self.block(step.label, work).items() if k not in drop}

    def close(self) -> None:
        """The thread's CPUs as before."""
        restore_affinity(self.affinity)


def executor(spec: Resolved) -> Servers:
    """The trial loop's executor of the A B B A designs (workload, paired): one Servers for all steps."""
    return Servers(spec)


TELEMETRY = ("gpu", "alloc_retries", "engine_affinity")


def run_once(spec: Resolved, label: str) -> dict:
    """One run of the fresh design in this process: a new engine (or generate()), one thread."""
    s = Servers(spec.replace(variants=(label,)))
    try:
        if s.warm:
            s.serve[label](s.warm)
        if label == HF:
            r = s.block(label, s.work)
            return {"engine": "hf", "variant": HF, "device": resolve_device(spec.device), **{k: r[k] for k in SERVED},
                    "registry_calls": 0, "registry_s_total": 0.0, "steps": len(r["batch_s"]),
                    "batch_time_ms_median": 1e3 * median(r["batch_s"]), "torch_num_threads": s.threads,
                    **{k: r[k] for k in TELEMETRY}}
        engine = s.engines[label]
        engine.engine_core.step_timings.clear()
        r = s.block(label, s.work)
    finally:
        s.close()
    steps = list(engine.engine_core.step_timings)
    return {"engine": "refimpl", "variant": label, "device": engine.vllm_config.device,
            **{k: r[k] for k in SERVED}, "registry_calls": r["registry_calls"], "registry_s_total": r["registry_s"],
            "steps": len(steps), "step_time_ms_median": 1e3 * median(t.total for t in steps),
            "step_split_s": {k: sum(getattr(t, k) for t in steps) for k in StepTimings.PARTS},
            "max_audios_per_step": engine.vllm_config.scheduler_config.max_audios_per_step,
            "num_gpu_blocks": engine.scheduler.kv_cache_manager.block_pool.num_gpu_blocks,
            "num_preemptions": sum(o.num_preemptions for o in r["outputs"]), "torch_num_threads": s.threads,
            **{k: r[k] for k in (*TELEMETRY, "step_records", "step_summary")}}


def gains(by_variant: dict, metric: str = "cpu_s", against: str = "previous", pairing: str = "round") -> list[dict]:
    """Each variant's gain t(base) / t(this) - 1 over the previous (or first), 95% CI, cost model."""
    if pairing not in ("round", "abba"):
        raise ValueError(f"pairing must be 'round' or 'abba', got {pairing!r}")
    pick = abba_sums if pairing == "abba" else list
    variants, rows = list(by_variant), []
    for prev, cur in zip(variants[:-1] if against == "previous" else [variants[0]] * (len(variants) - 1), variants[1:]):
        a, b = by_variant[prev], by_variant[cur]
        iv, n = paired(pick(a[metric]), pick(b[metric]), kind="ratio"), len(pick(a[metric]))
        model = (np.median(a["registry_s"]) - np.median(b["registry_s"])) / np.median(b["wall_s"])  # wall s for both
        rows.append({"variant": cur, "over": prev, "metric": metric, "pairing": pairing, "gain": iv.estimate - 1,
                     "low": iv.low - 1, "high": iv.high - 1, "half_width": (iv.high - iv.low) / 2,
                     "resolved": iv.resolved and n >= MIN_PAIRS, "cost_model_gain": float(model),
                     "rounds": len(a[metric]), "pairs": n})
    return rows


def enough(spec: Resolved, runs: dict[str, list[dict]]) -> Optional[str]:
    """The paired design's precision stop (issue 48's W4): after whole A B B A rounds, once every
    variant has run at least ``stop_min_pairs`` rounds, the first gain's 95% half-width (wall s,
    pairing by round, in points) at most ``stop_half_width``: the reason, else None (also when the
    rule is off or the design is not paired)."""
    if spec.design != "paired" or spec.stop_half_width is None or not runs:
        return None
    n = {len(rs) for rs in runs.values()}
    if len(n) != 1 or (k := n.pop()) < spec.stop_min_pairs or k % 2:
        return None
    by = {v: {m: [r[m] for r in rs] for m in ("wall_s", "registry_s")} for v, rs in runs.items()}
    hw = 100 * gains(by, "wall_s", spec.against, "round")[0]["half_width"]
    return f"half-width {hw:.2f} points <= {spec.stop_half_width:g} after {k} pairs" \
        if hw <= spec.stop_half_width else None


def abba_sums(values: list[float]) -> list[float]:
    """Sums of consecutive rounds (0+1, 2+3, ...); an odd last round is dropped."""
    return [values[i] + values[i + 1] for i in range(0, len(values) - 1, 2)]


def engine_over_generate(runs: dict[str, list[dict]], variant: str) -> list[dict]:
    """Run i paired with run i: requests/s (engine / generate()), CPU s (generate() / engine)."""
    e, h, rows = runs[variant], runs[HF], []
    for metric, a, b in (("requests_per_s", e, h), ("cpu_s", h, e)):
        iv = paired([x[metric] for x in a], [x[metric] for x in b], kind="ratio")
        rows.append({"variant": variant, "over": HF, "metric": metric, "ratio": iv.estimate, "low": iv.low,
                     "high": iv.high, "pairs": len(a), "resolved": iv.resolved and len(a) >= MIN_PAIRS})
    return rows


def result(spec: ServeSpec, trial, in_process: bool) -> Result:
    """The Result of a trial: runs, summaries, comparisons; the engine thread's affinity (each run's
    ``engine_affinity``, the first) and where the GPU state came from (``gpu_telemetry``) in ``env``."""
    runs, params, comparisons = trial.runs, {**spec.params(), **trial.stop}, []
    affinity = [r.pop("engine_affinity") for rs in runs.values() for r in rs if "engine_affinity" in r]
    if spec.design == "paired":
        toks = [r.pop("tokens") for rs in runs.values() for r in rs]
        n = len(next(iter(runs.values())))
        runs = {v: [{"round": i, **r} for i, r in enumerate(rs)] for v, rs in runs.items()}
        params |= {"rounds_run": n, "benchmark_s": trial.timed_s, "tokens_identical": all(t == toks[0] for t in toks)}
        by = {v: {k: [r[k] for r in rs] for k in ("wall_s", "cpu_s", "registry_s")} for v, rs in runs.items()}
        comparisons = [r for pairing in ("round", "abba") if n >= (2 if pairing == "abba" else 1)
                       for m in ("cpu_s", "wall_s") for r in gains(by, m, spec.against, pairing)]
    engines = [v for v in runs if v != HF]
    if spec.design == "workload" and HF in runs and engines and runs[HF]:
        comparisons = engine_over_generate(runs, engines[0])
    variants = {v: {"runs": rs, "summary": {m: summarize(r[m] for r in rs) for m in METRICS[spec.design]} if rs else {}}
                for v, rs in runs.items()}
    for v in variants.values():
        if spec.design == "fresh" and v["runs"]:
            v["summary"]["registry_share"] = summarize(r["registry_s_total"] / r["wall_s"] for r in v["runs"])
        if spec.design == "paired" and v["runs"]:
            v["summary"]["tokens_identical"] = params["tokens_identical"]
    env = result_env(runs, spec.device, in_process or not spec.fresh)
    env |= {"engine_affinity": affinity[0] if affinity else None, "gpu_telemetry": gpu_telemetry_source(env["device"])}
    return Result(spec.bench, env, params, variants,
                  comparisons=comparisons, missing=[] if all(runs.values()) else ["runs"])

