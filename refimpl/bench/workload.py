"""A realistic Whisper serving workload: EOS stops, mixed clip lengths, a seeded arrival schedule.

    refimpl bench workload --model whisper-tiny.en --variant 0.11.0 \
        --num-requests 200 --arrival poisson --rate 2.0 --output-json workload.json
    refimpl bench workload --engine hf ...   # transformers generate(), static batches
    refimpl bench workload --engine both --repeats 5 ...   # both in one process, E H H E ...

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

``--engine both`` builds both in this process and serves the same requests ``--repeats``
times each, in pairs ordered E H, H E, E H, ... (A B B A: a linear drift of the machine cancels
over two pairs). Each run also records its CPU seconds (``time.process_time``: user + system,
which the other load on a shared machine disturbs less than wall seconds). The Result's
``comparisons`` hold the engine over generate(), per pair, with a bootstrap 95% interval
(``refimpl.stats.paired``): requests/s (engine / generate()) and CPU seconds (generate() /
engine); never ``resolved`` below ``MIN_PAIRS`` pairs.

In Python: ``run(WorkloadSpec(engine="hf", num_requests=200))``; ``spec.command()`` is the
command line of that spec.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Callable, ClassVar, Optional

from refimpl.bench.cli_spec import CliSpec, arg, check_max_tokens
from refimpl.bench.common import set_single_thread
from refimpl.bench.gains import paired_comparisons
from refimpl.bench.schema import Result
from refimpl.bench.serve import WorkItem, latency_summary, make_workload, serve_engine, serve_hf
from refimpl.errors import ConfigError, UnknownVariantError
from refimpl.variants import ENCODER_LEN_VARIANTS, get_encoder_len_variant

MODELS = ("whisper-tiny.en", "whisper-tiny", "whisper-large-v3")
__all__ = ["WorkItem", "latency_summary", "make_workload", "serve_engine", "serve_hf",
           "WorkloadSpec", "preflight", "run", "run_order", "paired_comparisons", "main"]


@dataclass(frozen=True, kw_only=True)
class WorkloadSpec(CliSpec):
    """``refimpl bench workload``: one field per flag (see module doc). ``variant`` is the
    engine's (ignored by ``engine="hf"``, whose variant is ``hf-generate``)."""
    prog: ClassVar[str] = "refimpl bench workload"
    model: str = arg("whisper-tiny.en", choices=MODELS)
    engine: str = arg("refimpl", "refimpl, hf (generate()) or both (paired, E H H E)",
                      choices=("refimpl", "hf", "both"))
    variant: str = arg("0.11.0", f"one of {', '.join(ENCODER_LEN_VARIANTS)}")
    max_audios_per_step: int = arg(1, "audios encoded per step under audios-per-step", min=1)
    num_requests: int = arg(64, min=1)
    arrival: str = arg("all", choices=("all", "poisson"))
    rate: float = arg(1.0, "requests/s for --arrival poisson (> 0); refused with --arrival all")
    max_tokens: int = arg(96, "cap per request; EOS stops earlier", min=1)
    max_num_seqs: int = arg(16, "batch size (hf: static batch)", min=1)
    num_gpu_blocks: Optional[int] = arg(None, min=1)
    device: str = arg("cpu", choices=("auto", "cpu", "cuda"))
    warmup_requests: int = arg(4, "untimed requests served first (0: none)", min=0)
    repeats: int = arg(1, "measured runs per engine (--engine both: pairs)", min=1)
    seed: int = arg(0, min=0)

    def __post_init__(self):
        super().__post_init__()
        if self.variant not in ENCODER_LEN_VARIANTS:
            raise UnknownVariantError("variant", tuple(ENCODER_LEN_VARIANTS), f"unknown variant {self.variant!r}")
        if self.arrival == "poisson" and not self.rate > 0:
            raise ConfigError("rate", "> 0 requests/s for arrival 'poisson'", f"got {self.rate}")
        default_rate = type(self).__dataclass_fields__["rate"].default
        if self.arrival == "all" and self.rate != default_rate:
            raise ConfigError("rate", "only with arrival 'poisson' (arrival 'all' sends every "
                              "request at 0 s)", f"got rate {self.rate} with arrival 'all'")
        if self.engine == "hf" and self.variant != type(self).__dataclass_fields__["variant"].default:
            raise ConfigError("variant", "left out with engine 'hf' (generate() has no encoder-length "
                              "variant)", f"got {self.variant!r}")
        check_max_tokens("max_tokens", self.max_tokens, self.model)

    @property
    def label(self) -> str:
        """The variant name in the Result: the engine's variant, or ``hf-generate``."""
        return HF if self.engine == "hf" else self.variant

    @property
    def labels(self) -> list[str]:
        """Variant names in the Result: [label], or [engine's variant, ``hf-generate``] for both."""
        return [self.variant, HF] if self.engine == "both" else [self.label]

    def params(self) -> dict:
        """The Result's ``params``: ``variants`` (``labels``) and every other field."""
        d = super().params()
        del d["variant"]
        return {"variants": self.labels, **d}

    @classmethod
    def from_params(cls, params: dict) -> WorkloadSpec:
        """Inverse of ``params()`` (fields missing from older results keep their defaults)."""
        engine = params.get("engine", "refimpl")
        variant = {"variant": params["variants"][0]} if engine != "hf" and params.get("variants") else {}
        return super().from_params({**params, **variant})


Spec = WorkloadSpec
HF = "hf-generate"


def _servers(spec: WorkloadSpec) -> dict[str, Callable[[list[WorkItem]], dict]]:
    """label -> serve(work) for the engines ``spec`` asks for, built in this process."""
    out: dict[str, Callable[[list[WorkItem]], dict]] = {}
    if spec.engine in ("refimpl", "both"):
        from refimpl.engine.llm_engine import LLMEngine
        n = spec.max_audios_per_step if get_encoder_len_variant(spec.variant).encoder_batch else 1
        engine = LLMEngine.from_args(spec.model, encoder_len_variant=spec.variant, device=spec.device,
                                     max_num_seqs=spec.max_num_seqs, num_gpu_blocks=spec.num_gpu_blocks,
                                     max_audios_per_step=n, process_mode="inproc",
                                     disable_mm_preprocessor_cache=True)
        out[spec.variant] = lambda work: serve_engine(engine, work, spec.max_tokens)
    if spec.engine in ("hf", "both"):
        from refimpl.config import ModelConfig
        from refimpl.multimodal import MULTIMODAL_REGISTRY
        from refimpl.tokenizer import whisper_decoder_prompt
        from refimpl.worker.model_loader import get_model
        mc = ModelConfig(spec.model, device=spec.device)
        model, proc = get_model(mc), MULTIMODAL_REGISTRY.create_processor(mc, disable_cache=True)
        dec = whisper_decoder_prompt(spec.model)
        out[HF] = lambda work: serve_hf(model, proc, dec, work, spec.max_tokens, spec.max_num_seqs)
    return out


def preflight(spec: WorkloadSpec, available: Optional[int] = None) -> None:
    """Refuse before anything runs (InsufficientMemoryError, field ``num_requests``, limit the
    available bytes: ``available``, default psutil's) when the requests' audios (measured and
    warm-up), the refimpl engine's log-mel features of every measured request and, on the CPU,
    the engine itself (``refimpl.memory.check_serving_memory``) exceed the memory available
    (refimpl.bench.memory.check_request_memory, as ``bench throughput``)."""
    from refimpl.bench.memory import check_request_memory, request_bytes
    from refimpl.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
    engine = spec.engine != "hf"
    mc = ModelConfig(spec.model, device=spec.device)
    configs = [VllmConfig(mc, SchedulerConfig(max_num_seqs=spec.max_num_seqs),
                          CacheConfig(num_gpu_blocks=spec.num_gpu_blocks))] if engine and mc.device == "cpu" else []
    req = request_bytes(spec.model, spec.num_requests, engine) + request_bytes(spec.model, spec.warmup_requests, False)
    check_request_memory(spec.num_requests, req, engine, configs, available)


def run_order(labels: list[str], repeats: int) -> list[str]:
    """Measured runs in order: pair i runs ``labels`` forwards when i is even, backwards when
    odd (A B B A ...); one label: ``repeats`` times."""
    return [x for i in range(repeats) for x in (labels if i % 2 == 0 else labels[::-1])]


def run(spec: WorkloadSpec, progress: Optional[Callable[[str], None]] = None) -> Result:
    """``spec.repeats`` measured runs per engine in this process, after an untimed warm-up
    of each (see module doc); a Result (refimpl.bench.schema). ``progress(line)`` is called
    after each run. Raises InsufficientMemoryError (field ``num_requests``) before anything
    runs when the requests and the engine cannot fit (:func:`preflight`).

    Nothing finished is lost, as in the fresh-process benches (refimpl.bench.orchestrate):
    Ctrl-C (KeyboardInterrupt) returns the runs finished so far (``--engine both``: whole
    pairs only) with ``params["interrupted"]`` True; any other exception propagates with that
    Result as ``e.partial_result`` (``orchestrate.partial_result(e)``), ``params["failed"]``
    naming the run and the error ("<run>: <error type>: <message>")."""
    preflight(spec)
    threads = set_single_thread()
    runs: dict[str, list[dict]] = {k: [] for k in spec.labels}
    now = "building the engines"
    try:
        work = make_workload(spec.num_requests, spec.seed, spec.arrival, spec.rate)
        warm = make_workload(spec.warmup_requests, spec.seed + 1000)
        servers = _servers(spec)
        for label, serve in servers.items():
            now = f"{label} warm-up"
            if warm:
                serve(warm)
        for label in run_order(list(servers), spec.repeats):
            now = f"{label} repeat {len(runs[label]) + 1}/{spec.repeats}"
            c0 = time.process_time()
            res = servers[label](work)
            res["cpu_s"] = time.process_time() - c0
            runs[label].append(res)
            if progress:
                progress(f"{label}: {res['requests_per_s']:.3f} req/s, {res['cpu_s']:.1f} CPU s")
    except KeyboardInterrupt:
        print("interrupted: keeping the runs finished so far", file=sys.stderr)
        return _result(spec, runs, threads, interrupted=True)
    except Exception as e:
        e.partial_result = _result(  # type: ignore[attr-defined]
            spec, runs, threads, failed=f"{now}: {type(e).__name__}: {e}")
        raise
    return _result(spec, runs, threads)


def _result(spec: WorkloadSpec, runs: dict[str, list[dict]], threads: int, *,
            interrupted: bool = False, failed: Optional[str] = None) -> Result:
    """The Result of ``runs``; ``params`` add ``interrupted`` and ``failed`` (as
    orchestrate.build_result). With ``--engine both`` only whole pairs are kept; a variant
    without runs has an empty summary and the Result ``missing: ["runs"]``."""
    from refimpl.env import collect_env
    from refimpl.stats import summarize
    n = min(len(v) for v in runs.values())
    runs = {k: v[:n] for k, v in runs.items()} if spec.engine == "both" else runs
    env = {**collect_env(), "device": spec.device, "in_process": True, "torch_num_threads": threads}
    variants = {k: {"runs": v, "summary": {m: summarize([x[m] for x in v])
                                           for m in ("requests_per_s", "output_tokens_per_s", "cpu_s")} if v else {}}
                for k, v in runs.items()}
    comparisons = paired_comparisons(runs, spec.variant, HF) if spec.engine == "both" and n else []
    return Result("workload", env, {**spec.params(), "interrupted": interrupted, "failed": failed}, variants,
                  comparisons=comparisons, missing=[] if all(runs.values()) else ["runs"])


def main(argv: list[str] | None = None) -> int:
    """``refimpl bench workload``; exit status as the other benches (orchestrate.cli_main):
    0; 130 after Ctrl-C; when a run fails, the finished runs are written (``params["failed"]``)
    and the status is 2 for a refimpl error, else 1."""
    from refimpl.bench.orchestrate import failed_run_status
    spec, output_json = WorkloadSpec.from_argv(argv)
    try:
        out = run(spec, progress=lambda line: print(line, flush=True))
    except Exception as e:
        return failed_run_status(e, spec.prog, output_json)
    for variant in out.variants:
        for r in out.runs(variant):
            print(f"workload {spec.model} {variant}: {r['requests_per_s']:.3f} req/s, "
                  f"{r['output_tokens_per_s']:.1f} tok/s, TTFT p50/p90/p99 {r['ttft_s_p50']:.2f}/"
                  f"{r['ttft_s_p90']:.2f}/{r['ttft_s_p99']:.2f} s, E2E p50/p90/p99 {r['e2e_s_p50']:.2f}/"
                  f"{r['e2e_s_p90']:.2f}/{r['e2e_s_p99']:.2f} s ({r['num_requests']} requests, "
                  f"{r['num_output_tokens']} tokens, {r['cpu_s']:.1f} CPU s, {spec.arrival})")
    for c in out.comparisons:
        print(f"{c['variant']} over {c['over']}, {c['metric']}: {c['ratio']:.3f}x "
              f"[{c['low']:.3f}, {c['high']:.3f}] ({c['pairs']} pair{'' if c['pairs'] == 1 else 's'}"
              f"{', resolved' if c['resolved'] else ', not resolved'})")
    if output_json:
        out.write(output_json)
    return 130 if out.params["interrupted"] else 0
