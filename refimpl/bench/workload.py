"""A realistic Whisper serving workload: EOS stops, mixed clip lengths, a seeded arrival schedule.

    refimpl bench workload --model whisper-tiny.en --variant scheduler-config \
        --num-requests 200 --arrival poisson --rate 2.0 --output-json workload.json
    refimpl bench workload --engine hf ...   # transformers generate(), static batches

Requests carry real speech of mixed length (``audio.make_request_audios``: 1 to 30 s built from
the shipped clips, fixed seed) and stop at EOS (no ``ignore_eos``) or at ``--max-tokens``.
Arrivals: ``all`` at t = 0, or ``poisson`` at ``--rate`` requests/s (exponential gaps from a
seeded generator). vLLM's ``benchmarks/benchmark_serving.py`` measures the same figures
(request rate, Poisson arrivals, TTFT, E2E). Reported per run: requests/s, output tokens/s,
TTFT and end-to-end latency percentiles (p50 / p90 / p99, seconds from arrival).

The HF baseline batches requests as a user of ``generate()`` would: in arrival order, up to
``--max-num-seqs`` at a time, a batch starting when its last request has arrived and the
previous batch is done, every sequence running until the whole batch has stopped (padded to
the longest). Its first token is only returned with the batch, so TTFT equals E2E there.
One process, torch on one thread, an untimed warm-up on separate requests.

In Python: ``run(WorkloadSpec(engine="hf", num_requests=200))``; ``spec.command()`` is the
command line of that spec.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import ClassVar, Optional

import numpy as np

from refimpl.bench.cli_spec import CliSpec, arg, check_max_tokens
from refimpl.bench.common import set_single_thread
from refimpl.bench.schema import Result
from refimpl.errors import ConfigError, UnknownVariantError
from refimpl.variants import ENCODER_LEN_VARIANTS, get_encoder_len_variant

MODELS = ("whisper-tiny.en", "whisper-tiny", "whisper-large-v3")
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
        for r in sched.running:
            if r.request_id not in first and r.num_output_tokens > 0:
                first[r.request_id] = t
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


@dataclass(frozen=True, kw_only=True)
class WorkloadSpec(CliSpec):
    """``refimpl bench workload``: one field per flag (see module doc). ``variant`` is the
    engine's (ignored by ``engine="hf"``, whose variant is ``hf-generate``)."""
    prog: ClassVar[str] = "refimpl bench workload"
    model: str = arg("whisper-tiny.en", choices=MODELS)
    engine: str = arg("refimpl", choices=("refimpl", "hf"))
    variant: str = arg("scheduler-config", f"one of {', '.join(ENCODER_LEN_VARIANTS)}")
    max_audios_per_step: int = arg(1, "audios encoded per step under encoder-batch", min=1)
    num_requests: int = arg(64, min=1)
    arrival: str = arg("all", choices=("all", "poisson"))
    rate: float = arg(1.0, "requests/s for --arrival poisson (> 0)")
    max_tokens: int = arg(96, "cap per request; EOS stops earlier", min=1)
    max_num_seqs: int = arg(16, "batch size (hf: static batch)", min=1)
    num_gpu_blocks: Optional[int] = arg(None, min=1)
    device: str = arg("cpu", choices=("auto", "cpu", "cuda"))
    warmup_requests: int = arg(4, "untimed requests served first (0: none)", min=0)
    seed: int = arg(0, min=0)

    def __post_init__(self):
        super().__post_init__()
        if self.variant not in ENCODER_LEN_VARIANTS:
            raise UnknownVariantError("variant", tuple(ENCODER_LEN_VARIANTS), f"unknown variant {self.variant!r}")
        if self.arrival == "poisson" and not self.rate > 0:
            raise ConfigError("rate", "> 0 requests/s for arrival 'poisson'", f"got {self.rate}")
        check_max_tokens("max_tokens", self.max_tokens, self.model)

    @property
    def label(self) -> str:
        """The variant name in the Result: the engine's variant, or ``hf-generate``."""
        return "hf-generate" if self.engine == "hf" else self.variant

    def params(self) -> dict:
        """The Result's ``params``: ``variants`` ([label]) and every other field."""
        d = super().params()
        del d["variant"]
        return {"variants": [self.label], **d}

    @classmethod
    def from_params(cls, params: dict) -> WorkloadSpec:
        """Inverse of ``params()`` (fields missing from older results keep their defaults)."""
        engine = params.get("engine", "refimpl")
        variant = {"variant": params["variants"][0]} if engine != "hf" and params.get("variants") else {}
        return super().from_params({**params, **variant})


Spec = WorkloadSpec


def run(spec: WorkloadSpec) -> Result:
    """One measured run in this process (see module doc); a Result (refimpl.bench.schema)."""
    from refimpl.env import collect_env
    from refimpl.stats import summarize
    threads = set_single_thread()
    work = make_workload(spec.num_requests, spec.seed, spec.arrival, spec.rate)
    warm = make_workload(spec.warmup_requests, spec.seed + 1000)
    if spec.engine == "hf":
        from refimpl.config import ModelConfig
        from refimpl.multimodal import MULTIMODAL_REGISTRY
        from refimpl.tokenizer import whisper_decoder_prompt
        from refimpl.worker.model_loader import get_model
        mc = ModelConfig(spec.model, device=spec.device)
        model, proc = get_model(mc), MULTIMODAL_REGISTRY.create_processor(mc, disable_cache=True)
        dec = whisper_decoder_prompt(spec.model)
        if warm:
            serve_hf(model, proc, dec, warm, spec.max_tokens, spec.max_num_seqs)
        res = serve_hf(model, proc, dec, work, spec.max_tokens, spec.max_num_seqs)
    else:
        from refimpl.engine.llm_engine import LLMEngine
        n = spec.max_audios_per_step if get_encoder_len_variant(spec.variant).encoder_batch else 1
        engine = LLMEngine.from_args(spec.model, encoder_len_variant=spec.variant, device=spec.device,
                                     max_num_seqs=spec.max_num_seqs, num_gpu_blocks=spec.num_gpu_blocks,
                                     max_audios_per_step=n, process_mode="inproc",
                                     disable_mm_preprocessor_cache=True)
        if warm:
            serve_engine(engine, warm, spec.max_tokens)
        res = serve_engine(engine, work, spec.max_tokens)
    env = {**collect_env(), "device": spec.device, "in_process": True, "torch_num_threads": threads}
    summary = {k: summarize([res[k]]) for k in ("requests_per_s", "output_tokens_per_s")}
    return Result("workload", env, spec.params(), {spec.label: {"runs": [res], "summary": summary}})


def main(argv: list[str] | None = None) -> int:
    spec, output_json = WorkloadSpec.from_argv(argv)
    out = run(spec)
    variant = next(iter(out.variants))
    r = out.runs(variant)[0]
    print(f"workload {spec.model} {variant}: {r['requests_per_s']:.3f} req/s, "
          f"{r['output_tokens_per_s']:.1f} tok/s, TTFT p50/p90/p99 {r['ttft_s_p50']:.2f}/"
          f"{r['ttft_s_p90']:.2f}/{r['ttft_s_p99']:.2f} s, E2E p50/p90/p99 {r['e2e_s_p50']:.2f}/"
          f"{r['e2e_s_p90']:.2f}/{r['e2e_s_p99']:.2f} s ({r['num_requests']} requests, "
          f"{r['num_output_tokens']} tokens, {spec.arrival})")
    if output_json:
        out.write(output_json)
    return 0
