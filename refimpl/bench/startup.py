"""Benchmark: engine start-up time per phase, per variant (vLLM PR #17935).

    refimpl bench startup --model qwen2.5-vl-3b --variant no-cache,cache-reset,formula \
        --repeats 3 --max-model-len 32768 --output-json startup.json

In Python: ``run(StartupSpec(variants=("no-cache", "cache-reset")))`` (in this process) or
``refimpl.bench.orchestrate.run_fresh(spec)`` (each repeat a fresh process). Each run builds a
VllmConfig and an EngineCore and records ``total_s``, ``phases`` (name -> s),
``hf_processor_calls``, ``hf_mm_passes``, ``passes_by_phase``, ``cache_hits``,
``cache_misses``, ``cpu_s`` (user + sys seconds of the start-up; in-process mode),
``cache_bytes_before_reset``, ``cache_bytes_after_reset``,
``rss_before_reset``, ``rss_after_reset``, ``peak_rss_bytes`` (bytes), ``parts_s`` (seconds
building dummy data, hashing items, in HF-processor calls, in text-only HF calls, splitting
outputs per item: ``PARTS``), the encoder budget and max tokens
per item. ``process_mode="mp"`` (``--process-mode mp``) starts the engine core in a child
process (refimpl/engine/frontend.py) and the front end asks for the reset, as vLLM V1's
``LLMEngine``; ``reset_scope`` picks what that reset clears (``v0.9.0``: not the child's
processing cache; ``all``). The record then adds ``process_mode``, ``reset_scope``,
``p0_cache_bytes_before_reset``, ``p0_cache_bytes_after_reset``, ``p0_rss_before_reset``,
``p0_rss_after_reset`` and the same four ``p1_*`` fields (bytes; the unprefixed cache / RSS
fields are P1's, measured before the reset), ``startup_wall_s``, ``spawn_overhead_s`` and
``transport`` (see ``refimpl.bench.two_process``). Before any run, ``preflight`` refuses a spec whose estimated peak memory exceeds
what is available (refimpl.bench.memory), and again before each run. Variants:
``refimpl.variants.STARTUP_VARIANTS``.

``numpy_hugepage`` (``--numpy-hugepage``, default ``off``): numpy asks the kernel for
transparent huge pages (madvise) on every array of 4 MiB or more. With the kernel's THP
``defrag`` in ``madvise`` mode, faulting in the multi-GiB int64 dummy video then sometimes
stalls in direct compaction: that was the source of the seed's bimodal call-1 times (about
22 s or about 35 s at 128k; ``NUMPY_MADVISE_HUGEPAGE=0`` removed the slow mode,
results/cpu-amd-epyc-2c-shared/budget_qwen2.5-vl-3b_nohugepage.json). So each measured
process runs with it off (the worker's environment and numpy's flag at the start of the run);
``on`` measures numpy's default. ``params.numpy_hugepage`` and ``env.thp`` record it.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import ClassVar, Optional

from refimpl.bench.bench_spec import BenchSpec, variants_arg
from refimpl.bench.cli_spec import arg, int_pairs
from refimpl.bench.common import set_single_thread
from refimpl.bench.memory import NUMPY_HUGEPAGE, set_numpy_hugepage, thp_state
from refimpl.bench.orchestrate import cli_main, run_in_process
from refimpl.bench.schema import Result
from refimpl.config import SUPPORTED_MODELS
from refimpl.stats import summarize
from refimpl.variants import STARTUP_VARIANTS, get_startup_variant

# Seconds per part of the multimodal work (refimpl.multimodal.registry.ProcessingStats):
# building dummy data, hashing, all HF calls, the text-only ones among them, per-item split.
PARTS = ("dummy_s", "hash_s", "hf_processor_s", "hf_text_only_s", "split_s")


@dataclass(frozen=True, kw_only=True)
class StartupSpec(BenchSpec):
    """``refimpl bench startup``: one field per flag (tokens, sequences, items per prompt)."""
    bench: ClassVar[str] = "startup"
    prog: ClassVar[str] = "refimpl bench startup"
    model: str = arg("qwen2.5-vl-3b", choices=SUPPORTED_MODELS, required=True)
    variants: tuple[str, ...] = variants_arg(("cache-reset",), tuple(STARTUP_VARIANTS))
    max_model_len: Optional[int] = arg(None, "tokens (default: the model's)", min=1)
    max_num_batched_tokens: int = arg(8192, min=1)
    max_num_seqs: int = arg(256, min=1)
    limit_mm_per_prompt: dict[str, int] = arg({}, "items of a modality per prompt (repeatable)",
                                              metavar="MODALITY=N")
    scale: str = arg("auto", choices=("auto", "full", "small"))
    num_gpu_blocks: Optional[int] = arg(None, min=1)
    process_mode: str = arg("inproc", "engine core in this process, or in a child process "
                            "(vLLM V1's mp)", choices=("inproc", "mp"))
    reset_scope: str = arg("v0.9.0", "mp only: what reset_mm_cache clears in the engine-core "
                           "process", choices=("v0.9.0", "all"))
    numpy_hugepage: str = arg("off", "numpy's transparent-huge-page madvise of large arrays in "
                              "the measured processes (off: the call-1 variance source; see "
                              "refimpl/bench/memory.py)", choices=NUMPY_HUGEPAGE)

    def worker_env(self) -> dict[str, str]:
        """``NUMPY_MADVISE_HUGEPAGE`` for each fresh worker (numpy reads it at import): "0"
        unless ``numpy_hugepage == "on"``. See refimpl.bench.memory.set_numpy_hugepage."""
        return {"NUMPY_MADVISE_HUGEPAGE": "1" if self.numpy_hugepage == "on" else "0"}


Spec = StartupSpec


def parse_limits(items: list[str]) -> dict[str, int]:
    """``["video=0", "image=2"]`` -> ``{"video": 0, "image": 2}``; ConfigError on a bad pair
    (what ``--limit-mm-per-prompt`` does; refimpl.bench.cli_spec.int_pairs)."""
    return int_pairs("limit_mm_per_prompt", items, "MODALITY=N")


def make_vllm_config(spec: StartupSpec, **extra):
    """VllmConfig of ``spec`` (shared with the budget benchmark)."""
    from refimpl.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
    mc = ModelConfig(spec.model, max_model_len=spec.max_model_len,  # type: ignore[arg-type]  # None: the model's
                     device=spec.device, scale=spec.scale,
                     limit_mm_per_prompt=dict(spec.limit_mm_per_prompt))
    sc = SchedulerConfig(max_num_batched_tokens=spec.max_num_batched_tokens,
                         max_num_seqs=spec.max_num_seqs)
    return VllmConfig(mc, sc, CacheConfig(num_gpu_blocks=spec.num_gpu_blocks), **extra)


def run_once(spec: StartupSpec, variant: str) -> dict:
    """One start-up of ``variant`` in this process; the run record of the module doc."""
    threads = set_single_thread()
    set_numpy_hugepage(spec.numpy_hugepage == "on")
    from refimpl.engine.core import EngineCore
    t0, c0 = time.perf_counter(), time.process_time()
    cfg = make_vllm_config(spec)
    config_s = time.perf_counter() - t0
    extra: dict = {}
    if spec.process_mode == "mp":
        from refimpl.bench.two_process import two_process_record
        rep, extra = two_process_record(cfg, variant, spec.reset_scope)
        stats = extra.pop("p1_registry_stats")  # the profiling passes ran in the child
    else:
        engine = EngineCore(cfg, variant)
        rep, stats = engine.report, engine.mm_registry.stats.as_dict()
    phases = {"config": config_s, **rep.phases}
    if spec.process_mode == "inproc":  # CPU seconds of this process (mp: the work is in the child)
        extra["cpu_s"] = time.process_time() - c0
    return extra | {
        "variant": variant, "device": cfg.device, "torch_num_threads": threads,
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
        "thp": thp_state(),
        "parts_s": {k: stats[k] for k in PARTS},
        "encoder_compute_budget": rep.encoder_compute_budget,
        "encoder_cache_size": rep.encoder_cache_size,
        "max_tokens_per_item": rep.max_tokens_per_item, "num_gpu_blocks": rep.num_gpu_blocks,
    }


def preflight(spec: StartupSpec) -> None:
    """Refuse before any run when memory cannot hold the worst variant (InsufficientMemoryError):
    the dummy video and its copies (bench/memory.py); for Whisper on the CPU, what the engine
    will hold (refimpl.memory.check_serving_memory)."""
    from refimpl.bench.memory import check_memory
    from refimpl.memory import check_serving_memory
    vc = make_vllm_config(spec)
    check_memory(vc.model_config, [get_startup_variant(v) for v in spec.variants], spec.max_num_batched_tokens)
    if vc.model_config.is_encoder_decoder and vc.model_config.device == "cpu":
        check_serving_memory(vc)


def summarize_runs(runs: list[dict]) -> dict:
    """total_s and peak_rss_bytes summarized (median, min, max, iqr, n); two-process runs add
    each process's memory and the transport figures (refimpl.bench.two_process)."""
    from refimpl.bench.two_process import summarize_two_process
    return {k: summarize(r[k] for r in runs) for k in ("total_s", "peak_rss_bytes")} | summarize_two_process(runs)


def headline(res: Result, variant: str) -> str:
    s = res.variants[variant]["summary"]["total_s"]
    return f"median {s['median']:.2f} s [{s['min']:.2f}, {s['max']:.2f}] over {s['n']} runs"


def run(spec: StartupSpec) -> Result:
    """Every variant of ``spec`` in this process (see refimpl.bench.orchestrate)."""
    return run_in_process(spec)


def main(argv: list[str] | None = None) -> int:
    return cli_main(StartupSpec, argv)


if __name__ == "__main__":
    raise SystemExit(main())
