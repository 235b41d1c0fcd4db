"""Benchmark: engine start-up time per phase, per variant (vLLM PR #17935).

    refimpl bench startup --model qwen2.5-vl-3b --variant no-cache,cache-reset,formula \
        --repeats 3 --max-model-len 32768 --output-json startup.json

Each repeat builds a VllmConfig and an EngineCore in a fresh process and records, per run:
``total_s``, ``phases`` (name -> s), ``hf_processor_calls``, ``hf_mm_passes``,
``passes_by_phase``, ``cache_hits``, ``cache_misses``, ``cache_bytes_before_reset``,
``cache_bytes_after_reset``, ``rss_before_reset``, ``rss_after_reset``, ``peak_rss_bytes``, ``parts_s`` (seconds building
dummy data, hashing items, in HF-processor calls)
(bytes), the encoder budget and max tokens per item. Top level: ``model``, ``variant``,
``device``, ``versions``, ``hardware``, ``median_total_s``.

``--process-mode mp`` starts the engine core in a child process (refimpl/engine/frontend.py)
and the front end asks for the reset, as vLLM V1's ``LLMEngine``; ``--reset-scope`` picks
what that reset clears (``v0.9.0``: not the child's processing cache; ``all``). The record
then adds ``process_mode``, ``reset_scope``, ``p0_cache_bytes_before_reset``,
``p0_cache_bytes_after_reset``, ``p0_rss_before_reset``, ``p0_rss_after_reset`` and the same
four ``p1_*`` fields (bytes; the unprefixed cache / RSS fields are P1's, measured before the
reset), ``startup_wall_s``, ``spawn_overhead_s`` and ``transport`` (see
``refimpl.bench.two_process``). The default stays ``inproc`` so the figures of notebook 01 and
README keep their meaning.
"""
from __future__ import annotations

import argparse
import time

from refimpl.bench.common import set_single_thread, write_json
from refimpl.bench.memory import check_memory
from refimpl.bench.orchestrate import add_common_args, drive, parse_variants
from refimpl.config import SUPPORTED_MODELS
from refimpl.variants import STARTUP_VARIANTS, get_startup_variant


def parse_limits(items: list[str]) -> dict[str, int]:
    """``["video=0", "image=2"]`` -> ``{"video": 0, "image": 2}``; ConfigError on a bad pair."""
    from refimpl.errors import ConfigError
    out = {}
    for it in items or []:
        for pair in it.split(","):
            k, sep, v = pair.partition("=")
            if not sep or not v.strip().lstrip("-").isdigit():
                raise ConfigError("limit_mm_per_prompt", "MODALITY=N", f"bad value {pair!r}")
            out[k.strip()] = int(v)
    return out


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="refimpl bench startup", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, choices=SUPPORTED_MODELS)
    p.add_argument("--max-model-len", type=int, default=None, help="tokens (default: the model's)")
    p.add_argument("--max-num-batched-tokens", type=int, default=8192)
    p.add_argument("--max-num-seqs", type=int, default=256)
    p.add_argument("--limit-mm-per-prompt", action="append", default=[], metavar="MODALITY=N")
    p.add_argument("--scale", default="auto", choices=("auto", "full", "small"))
    p.add_argument("--num-gpu-blocks", type=int, default=None)
    p.add_argument("--process-mode", default="inproc", choices=("inproc", "mp"),
                   help="engine core in this process, or in a child process (vLLM V1's mp)")
    p.add_argument("--reset-scope", default="v0.9.0", choices=("v0.9.0", "all"),
                   help="mp only: what reset_mm_cache clears in the engine-core process")
    add_common_args(p, tuple(STARTUP_VARIANTS), "cache-reset")
    return p


def make_vllm_config(args: argparse.Namespace, **extra):
    """VllmConfig from the parsed flags (shared with the budget benchmark)."""
    from refimpl.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
    mc = ModelConfig(args.model, max_model_len=args.max_model_len, device=args.device,
                     scale=args.scale, limit_mm_per_prompt=parse_limits(args.limit_mm_per_prompt))
    sc = SchedulerConfig(max_num_batched_tokens=args.max_num_batched_tokens,
                         max_num_seqs=args.max_num_seqs)
    return VllmConfig(mc, sc, CacheConfig(num_gpu_blocks=args.num_gpu_blocks), **extra)


def run_once(args: argparse.Namespace) -> dict:
    """One start-up in this process; returns the per-run record described in the module doc."""
    threads = set_single_thread()
    from refimpl.engine.core import EngineCore
    t0 = time.perf_counter()
    cfg = make_vllm_config(args)
    config_s = time.perf_counter() - t0
    extra: dict = {}
    if getattr(args, "process_mode", "inproc") == "mp":
        from refimpl.bench.two_process import two_process_record
        rep, extra = two_process_record(cfg, args.variant, args.reset_scope)
        stats = extra.pop("p1_registry_stats")  # the profiling passes ran in the child
    else:
        engine = EngineCore(cfg, args.variant)
        rep, stats = engine.report, engine.mm_registry.stats.as_dict()
    phases = {"config": config_s, **rep.phases}
    return extra | {
        "variant": args.variant, "model": args.model, "device": cfg.device, "torch_num_threads": threads,
        "scale": cfg.model_config.scale, "max_model_len": cfg.model_config.max_model_len,
        "limit_mm_per_prompt": cfg.model_config.limit_mm_per_prompt,
        "total_s": sum(phases.values()), "phases": phases,
        "hf_processor_calls": rep.hf_processor_calls, "hf_mm_passes": rep.hf_mm_passes,
        "passes_by_phase": rep.passes_by_phase,
        "cache_hits": rep.cache_hits, "cache_misses": rep.cache_misses,
        "cache_bytes_before_reset": rep.cache_bytes_before_reset,
        "cache_bytes_after_reset": rep.cache_bytes_after_reset,
        "rss_before_reset": rep.rss_before_reset, "rss_after_reset": rep.rss_after_reset,
        "peak_rss_bytes": rep.peak_rss_bytes,
        "parts_s": {k: stats[k] for k in ("dummy_s", "hash_s", "hf_processor_s")},
        "encoder_compute_budget": rep.encoder_compute_budget,
        "encoder_cache_size": rep.encoder_cache_size,
        "max_tokens_per_item": rep.max_tokens_per_item, "num_gpu_blocks": rep.num_gpu_blocks,
    }


def worker_argv(args: argparse.Namespace) -> list[str]:
    argv = ["--model", args.model, "--device", args.device, "--scale", args.scale,
            "--max-num-batched-tokens", str(args.max_num_batched_tokens),
            "--max-num-seqs", str(args.max_num_seqs)]
    if args.max_model_len:
        argv += ["--max-model-len", str(args.max_model_len)]
    if args.num_gpu_blocks:
        argv += ["--num-gpu-blocks", str(args.num_gpu_blocks)]
    for lim in args.limit_mm_per_prompt:
        argv += ["--limit-mm-per-prompt", lim]
    return argv + ["--process-mode", args.process_mode, "--reset-scope", args.reset_scope]


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    variants = parse_variants(args.variant, tuple(STARTUP_VARIANTS))
    if args.worker:
        write_json(args.output_json, run_once(args))
        return 0
    check_memory(make_vllm_config(args).model_config, [get_startup_variant(v) for v in variants],
                 args.max_num_batched_tokens)  # before any run: refuse rather than be killed
    res = drive("refimpl.bench.startup", args, worker_argv(args), variants,
                lambda r: r["total_s"], "median_total_s", {"model": args.model}, run_once)
    for v, r in (res.get("by_variant") or {res["variant"]: res}).items():
        print(f"startup {args.model} {v}: median {r['median_total_s']:.2f} s over "
              f"{len(r['runs'])} runs on {res['device']} ({res['hardware']['name']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
