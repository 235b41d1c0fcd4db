"""Benchmark: Whisper serving throughput by encoder-length source (vLLM PRs #24866, #24989).

    refimpl bench throughput --model whisper-tiny \
        --variant 0.10.2,0.10.2+#24866,0.11.0 --num-requests 64 --max-tokens 32 \
        --max-num-seqs 16 --repeats 3 --output-json throughput.json
    refimpl bench throughput --model whisper-tiny --engine hf ...   # transformers generate()

In Python: ``run(ThroughputSpec(...))`` or ``refimpl.bench.orchestrate.run_fresh(spec)``.
Fixed seed, an untimed warm-up batch. Requests carry real speech (refimpl/data/speech, varied
lengths up to 30 s) and decode ``max_tokens`` tokens each (``ignore_eos``, so every variant
does the same work); the engine serves them through ``LLMEngine.step()``, whose
``EngineCore.step()`` times its own parts (StepTimings). Per run: ``requests_per_s``,
``output_tokens_per_s``, ``num_requests``, ``num_output_tokens``, ``registry_calls`` and
``registry_s_total`` (get_encdec_max_encoder_len after start-up), ``steps``,
``step_time_ms_median``, ``step_split_s`` (seconds summed over steps: schedule / prepare /
model / sample / update), ``wall_s``. ``engine="hf"`` runs the same requests through
transformers' generate() in static batches of ``max_num_seqs`` (variant ``hf-generate``).
Variants: ``refimpl.variants.ENCODER_LEN_VARIANTS``.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import ClassVar, Optional

from refimpl.bench.bench_spec import BenchSpec, variants_arg
from refimpl.bench.cli_spec import arg, check_max_tokens
from refimpl.bench.common import set_single_thread
from refimpl.bench.memory import check_request_memory, request_bytes
from refimpl.bench.orchestrate import cli_main, run_in_process
from refimpl.bench.schema import Result
from refimpl.stats import median, summarize
from refimpl.variants import ENCODER_LEN_VARIANTS

MODELS = ("whisper-tiny", "whisper-large-v3")
HF_VARIANT = "hf-generate"


@dataclass(frozen=True, kw_only=True)
class ThroughputSpec(BenchSpec):
    """``refimpl bench throughput``: one field per flag (requests, tokens, sequences).
    ``--engine hf`` measures variant ``hf-generate``: ``--variant`` left out or
    ``hf-generate``. Raises ConfigError (field ``variants``) for any other variant with
    ``engine='hf'``, or ``hf-generate`` without it."""
    bench: ClassVar[str] = "throughput"
    prog: ClassVar[str] = "refimpl bench throughput"
    model: str = arg("whisper-tiny", choices=MODELS)
    engine: str = arg("refimpl", choices=("refimpl", "hf"))
    variants: tuple[str, ...] = variants_arg(("0.11.0",), (*ENCODER_LEN_VARIANTS, HF_VARIANT))
    num_requests: int = arg(64, min=1)
    max_tokens: int = arg(32, "output tokens per request", min=1)
    max_num_seqs: int = arg(16, "batch size (hf: static batch)", min=1)
    num_gpu_blocks: Optional[int] = arg(None, min=1)
    max_audios_per_step: int = arg(1, "audios encoded per step under the audios-per-step "
                                   "what-if; the other variants keep 1", min=1)
    scale: str = arg("auto", choices=("auto", "full", "small"))
    warmup_requests: int = arg(4, min=0)
    seed: int = arg(0, min=0)

    def __post_init__(self):
        super().__post_init__()
        from refimpl.errors import ConfigError
        if (self.engine == "hf") != (self.variants == (HF_VARIANT,)):
            raise ConfigError("variants", f"{HF_VARIANT} (or --variant left out) exactly when "
                              "engine='hf'", f"engine {self.engine!r} with variants {self.variants}")
        check_max_tokens("max_tokens", self.max_tokens, self.model)

    @classmethod
    def from_flags(cls, fields: dict) -> ThroughputSpec:
        """``--engine hf`` without ``--variant`` measures hf-generate; an explicit other
        ``--variant`` is refused by ``__post_init__``."""
        default = cls.__dataclass_fields__["variants"].default
        if fields["engine"] == "hf" and fields["variants"] == default:
            fields = {**fields, "variants": (HF_VARIANT,)}
        return cls(**fields)


Spec = ThroughputSpec


def _prompts(spec: ThroughputSpec) -> list[dict]:
    from refimpl.audio import make_request_audios
    return [{"multi_modal_data": {"audio": (a, 16000)}}
            for a in make_request_audios(spec.num_requests, seed=spec.seed)]


def run_engine(spec: ThroughputSpec, variant: str) -> dict:
    """Serve the requests with refimpl's LLMEngine, step by step; one run record."""
    from refimpl.engine.core import StepTimings
    from refimpl.engine.llm_engine import LLMEngine
    from refimpl.multimodal import MULTIMODAL_REGISTRY as reg
    from refimpl.sampling_params import SamplingParams
    from refimpl.variants import get_encoder_len_variant
    n_audios = spec.max_audios_per_step if get_encoder_len_variant(variant).encoder_batch else 1
    engine = LLMEngine.from_args(spec.model, encoder_len_variant=variant, device=spec.device,
                                 scale=spec.scale, max_num_seqs=spec.max_num_seqs,
                                 num_gpu_blocks=spec.num_gpu_blocks, seed=spec.seed,
                                 max_audios_per_step=n_audios,
                                 process_mode="inproc")  # reads the runner's and registry's counters
    prompts = _prompts(spec)
    params = SamplingParams(max_tokens=spec.max_tokens, temperature=0.0, ignore_eos=True)
    engine.generate(prompts[:spec.warmup_requests], params)  # untimed warm-up
    core = engine.engine_core
    reg.reset_stats()
    core.step_timings.clear()
    outputs = []
    t0 = time.perf_counter()
    for p in prompts:
        engine.add_request(None, p, params)
    while engine.has_unfinished_requests():
        outputs += engine.step()
    wall = time.perf_counter() - t0
    steps = list(core.step_timings)
    n_tok = sum(len(o.output_token_ids) for o in outputs)
    return {"engine": "refimpl", "variant": variant, "device": engine.vllm_config.device,
            "num_requests": len(outputs), "num_output_tokens": n_tok, "wall_s": wall,
            "requests_per_s": len(outputs) / wall, "output_tokens_per_s": n_tok / wall,
            "registry_calls": reg.stats.encdec_calls, "registry_s_total": reg.stats.encdec_s,
            "steps": len(steps), "step_time_ms_median": 1e3 * median(t.total for t in steps),
            "step_split_s": {k: sum(getattr(t, k) for t in steps) for k in StepTimings.PARTS},
            "max_audios_per_step": n_audios,
            "num_gpu_blocks": engine.scheduler.kv_cache_manager.block_pool.num_gpu_blocks,
            "num_preemptions": sum(o.num_preemptions for o in outputs)}


def run_hf(spec: ThroughputSpec) -> dict:
    """The same requests through transformers' generate() in static batches of max_num_seqs."""
    import torch

    from refimpl.config import ModelConfig
    from refimpl.multimodal import MULTIMODAL_REGISTRY as reg
    from refimpl.tokenizer import whisper_decoder_prompt
    from refimpl.worker.hf_reference import hf_greedy_generate
    from refimpl.worker.model_loader import get_model
    mc = ModelConfig(spec.model, device=spec.device, scale=spec.scale, seed=spec.seed)
    model = get_model(mc)
    proc = reg.create_processor(mc, disable_cache=True)
    prompts, dec = _prompts(spec), whisper_decoder_prompt(spec.model)

    def features(prompt):
        out = proc.apply("", {"audio": [prompt["multi_modal_data"]["audio"]]})
        return out.mm_kwargs["audio"][0]["input_features"]

    def run_batch(batch):
        feats = torch.stack([features(p) for p in batch]).to(model.device, model.dtype)
        return hf_greedy_generate(model, feats, dec, spec.max_tokens)

    run_batch(prompts[:spec.warmup_requests])
    t0, n_tok, batch_s = time.perf_counter(), 0, []
    for i in range(0, len(prompts), spec.max_num_seqs):
        tb = time.perf_counter()
        n_tok += sum(len(t) for t in run_batch(prompts[i:i + spec.max_num_seqs]))
        batch_s.append(time.perf_counter() - tb)
    wall = time.perf_counter() - t0
    return {"engine": "hf", "variant": HF_VARIANT, "device": mc.device,
            "num_requests": len(prompts), "num_output_tokens": n_tok, "wall_s": wall,
            "requests_per_s": len(prompts) / wall, "output_tokens_per_s": n_tok / wall,
            "registry_calls": 0, "registry_s_total": 0.0, "steps": len(batch_s),
            "batch_time_ms_median": 1e3 * median(batch_s)}


def run_once(spec: ThroughputSpec, variant: str) -> dict:
    """One measured run in this process (engine or HF baseline), pinned to one thread on CPU."""
    threads = set_single_thread()
    rec = run_hf(spec) if spec.engine == "hf" else run_engine(spec, variant)
    return {**rec, "torch_num_threads": threads}


def preflight(spec: ThroughputSpec, available: Optional[int] = None) -> None:
    """Refuse before any run (InsufficientMemoryError) when the engine's weights, KV cache and
    dense-once cross K/V copies cannot fit in the memory available on the CPU
    (``refimpl.memory.check_serving_memory``), or
    when those plus the requests' audios and features (:func:`request_bytes`, held in host
    memory whatever the device) exceed it: field ``num_requests``, limit the available bytes
    (``available``, default psutil's). A ``num_gpu_blocks`` too small for one request is a
    ConfigError here too (``refimpl.memory.check_num_gpu_blocks``)."""
    from refimpl.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
    from refimpl.memory import check_num_gpu_blocks
    mc = ModelConfig(spec.model, device=spec.device, scale=spec.scale, seed=spec.seed)
    engine = spec.engine == "refimpl"
    vc = VllmConfig(mc, SchedulerConfig(max_num_seqs=spec.max_num_seqs), CacheConfig(num_gpu_blocks=spec.num_gpu_blocks))
    if engine:
        check_num_gpu_blocks(vc)
    check_request_memory(spec.num_requests, request_bytes(spec.model, spec.num_requests, engine), engine,
                         [vc] if engine and mc.device == "cpu" else [], available)


def summarize_runs(runs: list[dict]) -> dict:
    """requests/s, output tokens/s and the registry's share of wall time, summarized."""
    return {"requests_per_s": summarize(r["requests_per_s"] for r in runs),
            "output_tokens_per_s": summarize(r["output_tokens_per_s"] for r in runs),
            "registry_share": summarize(r["registry_s_total"] / r["wall_s"] for r in runs)}


def headline(res: Result, variant: str) -> str:
    s, p = res.variants[variant]["summary"]["requests_per_s"], res.params
    return (f"median {s['median']:.2f} req/s [{s['min']:.2f}, {s['max']:.2f}] over {s['n']} runs, "
            f"{p['num_requests']} requests x {p['max_tokens']} tokens, batch {p['max_num_seqs']}")


def run(spec: ThroughputSpec) -> Result:
    """Every variant of ``spec`` in this process (see refimpl.bench.orchestrate)."""
    return run_in_process(spec)


def main(argv: list[str] | None = None) -> int:
    return cli_main(ThroughputSpec, argv)


if __name__ == "__main__":
    raise SystemExit(main())
