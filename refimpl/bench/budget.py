"""Benchmark: the reviewer's experiment on vLLM PR #17935 (seed 000).

    refimpl bench budget --model qwen2.5-vl-3b --variant 0.8.5,0.9.0 --calls 2 \
        --output-json budget.json

Times ``calls`` successive ``compute_encoder_budget`` calls in one process (``calls_s``:
seconds per call, ``passes``: HF-processor passes with multimodal data per call;
``page_faults``: minor/major page faults per call from getrusage; ``parts_s``: seconds per
call building dummy data, hashing items and in HF-processor calls; ``peak_rss_bytes``).
Every variant of refimpl.variants.STARTUP_VARIANTS runs with its version's mechanics. With
``0.9.0`` call 1 pays hashing, per-item splitting and the extra text-only HF call and
is slower than call 1 of ``0.8.5``; call 2 is a cache hit. In Python:
``run(BudgetSpec(...))`` or ``refimpl.bench.orchestrate.run_fresh(spec)``. As the start-up
bench, each run has numpy's huge-page madvise off unless ``--numpy-hugepage on`` (the seed's
bimodal call 1 came from it; see refimpl/bench/startup.py) and is preceded by a memory check.
"""
from __future__ import annotations

import resource
import time
from dataclasses import dataclass
from typing import ClassVar

from refimpl.bench.bench_spec import variants_arg
from refimpl.bench.cli_spec import arg
from refimpl.bench.memory import set_numpy_hugepage, thp_state
from refimpl.bench.orchestrate import cli_main, run_in_process
from refimpl.bench.schema import Result
from refimpl.bench.startup import PARTS, StartupSpec, make_vllm_config
from refimpl.stats import summarize
from refimpl.variants import STARTUP_VARIANTS, get_startup_variant

VARIANTS = tuple(STARTUP_VARIANTS)


@dataclass(frozen=True, kw_only=True)
class BudgetSpec(StartupSpec):
    """``refimpl bench budget``: the start-up engine fields plus ``calls`` per process. The
    calls run in the measuring process, so ``process_mode`` and ``reset_scope`` stay fields
    (in the Result's params) but are no flags."""
    bench: ClassVar[str] = "budget"
    prog: ClassVar[str] = "refimpl bench budget"
    variants: tuple[str, ...] = variants_arg(("0.8.5", "0.9.0"), VARIANTS)
    calls: int = arg(2, "successive calls in one process", min=1)
    process_mode: str = "inproc"
    reset_scope: str = "v0.9.0"


Spec = BudgetSpec


def run_once(spec: BudgetSpec, variant: str) -> dict:
    """``spec.calls`` compute_encoder_budget calls in this process; seconds and passes per call."""
    from refimpl.bench.common import set_single_thread
    threads = set_single_thread()
    set_numpy_hugepage(spec.numpy_hugepage == "on")
    from refimpl.core.encoder_cache_manager import compute_encoder_budget
    from refimpl.multimodal import MULTIMODAL_REGISTRY as reg
    cfg = make_vllm_config(spec)
    v = get_startup_variant(variant)
    cfg.model_config.mm_switches = v.mm_switches
    reg.reset_stats()
    calls_s, passes, budgets, faults, parts = [], [], [], [], []
    for _ in range(spec.calls):
        ru0, st0 = resource.getrusage(resource.RUSAGE_SELF), reg.stats.as_dict()
        p0, t0 = reg.stats.hf_mm_passes, time.perf_counter()
        budgets.append(compute_encoder_budget(cfg.model_config, cfg.scheduler_config, reg,
                                              disable_cache=not v.cache_during_profiling,
                                              use_formula=v.uses_formula(cfg.model_config.model)))
        calls_s.append(time.perf_counter() - t0)
        passes.append(reg.stats.hf_mm_passes - p0)
        ru, st = resource.getrusage(resource.RUSAGE_SELF), reg.stats.as_dict()
        faults.append({"minflt": ru.ru_minflt - ru0.ru_minflt, "majflt": ru.ru_majflt - ru0.ru_majflt})
        parts.append({k: st[k] - st0[k] for k in PARTS})
    return {"variant": variant, "device": cfg.device, "torch_num_threads": threads,
            "max_model_len": cfg.model_config.max_model_len,
            "limit_mm_per_prompt": cfg.model_config.limit_mm_per_prompt,
            "calls_s": calls_s, "passes": passes, "budgets": budgets,
            "page_faults": faults, "parts_s": parts, "thp": thp_state(),
            "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "cache_hits": reg.stats.cache_hits, "cache_misses": reg.stats.cache_misses,
            "hf_processor_calls": reg.stats.hf_processor_calls}


def preflight(spec: BudgetSpec) -> None:
    """Refuse before any run when memory cannot hold the worst variant (InsufficientMemoryError)."""
    from refimpl.bench.memory import check_memory
    check_memory(make_vllm_config(spec).model_config,
                 [get_startup_variant(v) for v in spec.variants], spec.max_num_batched_tokens)


def summarize_runs(runs: list[dict]) -> dict:
    """``call_<i>_s`` (seconds of call i, 1-based) summarized over the runs."""
    n = min(len(r["calls_s"]) for r in runs)
    return {f"call_{i + 1}_s": summarize(r["calls_s"][i] for r in runs) for i in range(n)}


def headline(res: Result, variant: str) -> str:
    s = res.variants[variant]["summary"]
    calls = ", ".join(f"{k[:-2].replace('_', ' ')}: {m['median']:.2f} s" for k, m in s.items())
    return f"{calls} (median of {next(iter(s.values()))['n']} runs)"


def run(spec: BudgetSpec) -> Result:
    """Every variant of ``spec`` in this process (see refimpl.bench.orchestrate)."""
    return run_in_process(spec)


def main(argv: list[str] | None = None) -> int:
    return cli_main(BudgetSpec, argv)


if __name__ == "__main__":
    raise SystemExit(main())
