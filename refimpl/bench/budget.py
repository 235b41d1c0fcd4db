"""Benchmark: the reviewer's experiment on vLLM PR #17935 (seed 000).

    refimpl bench budget --model qwen2.5-vl-3b --variant no-cache,cache-reset --calls 2 \
        --output-json budget.json

Times ``--calls`` successive ``compute_encoder_budget`` calls in one fresh process
(``calls_s``: seconds per call, ``passes``: HF-processor passes with multimodal data per
call; ``page_faults``: minor/major page faults per call from getrusage; ``parts_s``: seconds
per call building dummy data, hashing items and in HF-processor calls; ``peak_rss_bytes``).
Every variant of refimpl.variants.STARTUP_VARIANTS runs with its version's mechanics. With
``cache-reset`` call 1 pays hashing, per-item splitting and the extra text-only
HF call and is slower than call 1 of ``no-cache``; call 2 is a cache hit. Each repeat is a
fresh process; variants interleaved.
"""
from __future__ import annotations

import argparse
import resource
import time

from refimpl.bench.common import set_single_thread, write_json
from refimpl.bench.memory import check_memory
from refimpl.bench.orchestrate import drive, parse_variants
from refimpl.bench.startup import build_parser as startup_parser
from refimpl.bench.startup import make_vllm_config, worker_argv
from refimpl.stats import median
from refimpl.variants import STARTUP_VARIANTS, get_startup_variant

VARIANTS = tuple(STARTUP_VARIANTS)


def build_parser() -> argparse.ArgumentParser:
    p = startup_parser()
    p.prog, p.description = "refimpl bench budget", __doc__
    p.add_argument("--calls", type=int, default=2, help="successive calls in one process")
    p.set_defaults(variant="no-cache,cache-reset")
    return p


def run_once(args: argparse.Namespace) -> dict:
    """``calls`` compute_encoder_budget calls in this process; returns seconds and passes per call."""
    threads = set_single_thread()
    from refimpl.core.encoder_cache_manager import compute_encoder_budget
    from refimpl.multimodal import MULTIMODAL_REGISTRY as reg
    cfg = make_vllm_config(args)
    v = get_startup_variant(args.variant)
    cfg.model_config.mm_switches = v.mm_switches
    reg.reset_stats()
    calls_s, passes, budgets, faults, parts = [], [], [], [], []
    for _ in range(args.calls):
        ru0, st0 = resource.getrusage(resource.RUSAGE_SELF), reg.stats.as_dict()
        p0, t0 = reg.stats.hf_mm_passes, time.perf_counter()
        budgets.append(compute_encoder_budget(cfg.model_config, cfg.scheduler_config, reg,
                                              disable_cache=not v.cache_during_profiling,
                                              use_formula=v.max_tokens_by_formula))
        calls_s.append(time.perf_counter() - t0)
        passes.append(reg.stats.hf_mm_passes - p0)
        ru, st = resource.getrusage(resource.RUSAGE_SELF), reg.stats.as_dict()
        faults.append({"minflt": ru.ru_minflt - ru0.ru_minflt, "majflt": ru.ru_majflt - ru0.ru_majflt})
        parts.append({k: st[k] - st0[k] for k in ("dummy_s", "hash_s", "hf_processor_s")})
    return {"variant": args.variant, "model": args.model, "device": cfg.device, "torch_num_threads": threads,
            "max_model_len": cfg.model_config.max_model_len,
            "limit_mm_per_prompt": cfg.model_config.limit_mm_per_prompt,
            "calls_s": calls_s, "passes": passes, "budgets": budgets,
            "page_faults": faults, "parts_s": parts, "peak_rss_bytes": ru.ru_maxrss * 1024,
            "cache_hits": reg.stats.cache_hits, "cache_misses": reg.stats.cache_misses,
            "hf_processor_calls": reg.stats.hf_processor_calls}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    variants = parse_variants(args.variant, VARIANTS)
    if args.worker:
        write_json(args.output_json, run_once(args))
        return 0
    check_memory(make_vllm_config(args).model_config, [get_startup_variant(v) for v in variants],
                 args.max_num_batched_tokens)  # before any run: refuse rather than be killed
    res = drive("refimpl.bench.budget", args, worker_argv(args) + ["--calls", str(args.calls)],
                variants, lambda r: r["calls_s"][0], "median_call1_s", {"model": args.model}, run_once)
    for v, r in (res.get("by_variant") or {res["variant"]: res}).items():
        per_call = list(zip(*[run["calls_s"] for run in r["runs"]]))
        meds = ", ".join(f"call {i + 1}: {median(c):.2f} s" for i, c in enumerate(per_call))
        print(f"budget {args.model} {v}: {meds} (median of {len(r['runs'])} processes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
