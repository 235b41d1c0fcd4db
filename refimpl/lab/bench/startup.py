"""``refimpl bench startup``: engine start-up per phase and row (s, passes, cache and RSS bytes), or
with ``calls`` each ``compute_encoder_budget`` call's s, passes, page faults (Result "budget").
``--process-mode mp`` (P0 front end, P1 engine core): both processes' cache bytes and RSS around P0's
``reset_mm_cache``, and one real request's cost on the wire. What only the two-process, the probe or
the budget runs use is imported where they run: a fresh in-process start-up imports no more than it
needs before ``EngineCore()`` (``process_overhead_s``, refimpl/lab/bench/fresh.py)."""
from __future__ import annotations

import resource
import time
from pathlib import Path

import numpy as np

from refimpl.config import CacheConfig, SchedulerConfig, VllmConfig
from refimpl.engine.core import EngineCore
from refimpl.lab.bench.common import set_single_thread
from refimpl.lab.bench.schema import Result
from refimpl.lab.bench.specs import StartupSpec
from refimpl.lab.env import reported_gib, result_env
from refimpl.lab.model_dir import model_config
from refimpl.lab.stats import summarize
from refimpl.multimodal import MULTIMODAL_REGISTRY as REG
from refimpl.variants import STARTUP_VARIANTS

__all__ = ["PARTS", "REPORTED", "MEMORY_FIELDS", "TRANSPORT_FIELDS", "make_vllm_config", "thp_state",
           "set_numpy_hugepage", "two_process_record", "summarize_two_process", "run_once", "summarize_runs",
           "result"]

# seconds per part of the multimodal work (ProcessingStats)
PARTS = ("dummy_s", "hash_s", "hf_processor_s", "hf_text_only_s", "split_s")
THP = Path("/sys/kernel/mm/transparent_hugepage")
REPORTED = ("hf_processor_calls", "hf_mm_passes", "passes_by_phase", "cache_hits", "cache_misses",
            "cache_bytes_before_reset", "cache_bytes_after_reset", "rss_before_reset", "rss_after_reset",
            "peak_rss_bytes", "encoder_compute_budget", "encoder_cache_size", "max_tokens_per_item",
            "num_gpu_blocks", "mm_seconds_by_phase", "profile_encoder_forward_s")  # StartupReport fields a run records


def make_vllm_config(spec: StartupSpec, **extra) -> VllmConfig:
    """The VllmConfig of ``spec``; a ``model_path``'s weights and its non-default preprocessor settings
    (refimpl.lab.model_dir, as the explorer builds it)."""
    mc = model_config(spec.model, model_path=spec.model_path, max_model_len=spec.max_model_len,
                      device=spec.device, limit_mm_per_prompt=dict(spec.limit_mm_per_prompt),
                      mm_processor_kwargs=dict(spec.mm_processor_kwargs))
    return VllmConfig(mc, SchedulerConfig(), CacheConfig(), **extra)


def thp_state() -> dict:
    """Transparent huge pages: the kernel's ``enabled`` / ``defrag`` and numpy's madvise setting."""
    out: dict = {}
    for k in ("enabled", "defrag"):
        txt = (THP / k).read_text() if (THP / k).exists() else ""
        out[k] = txt[txt.find("[") + 1:txt.find("]")] if "[" in txt else None
    get = getattr(np._core.multiarray, "_get_madvise_hugepage", None)  # type: ignore[attr-defined]
    out["numpy_madvise_hugepage"] = bool(get()) if get else None
    return out


def set_numpy_hugepage(enabled: bool) -> bool:
    """numpy's huge-page madvise of arrays >= 4 MiB on or off from now on; the previous setting."""
    mod = np._core.multiarray  # type: ignore[attr-defined]
    return bool(mod._set_madvise_hugepage(enabled)) if hasattr(mod, "_set_madvise_hugepage") else False


MEMORY_FIELDS = tuple(f"{p}_{k}_{when}_reset" for p in ("p0", "p1") for k in ("cache_bytes", "rss")
                      for when in ("before", "after"))
TRANSPORT_FIELDS = ("bytes_miss", "bytes_hit", "encode_s_miss", "encode_s_hit", "decode_s")


def _probe_request(model_config):
    """(prompt token ids, items, hashes) of one real input processed in P0."""
    from refimpl.audio import load_speech_clips
    from refimpl.multimodal.photos import load_sample_photos
    from refimpl.tokenizer import whisper_decoder_prompt
    processor = REG.create_processor(model_config)
    if model_config.is_encoder_decoder:
        mm = processor.apply("", {"audio": [(load_speech_clips()[0][1], 16000)]}, return_mm_hashes=True)
        return whisper_decoder_prompt(model_config.model), mm.mm_kwargs["audio"], mm.mm_hashes["audio"]
    mm = processor.apply("<|vision_start|><|image_pad|><|vision_end|>Describe.",
                         {"image": [load_sample_photos()[0][1]]}, return_mm_hashes=True)
    return mm.prompt_token_ids, mm.mm_kwargs["image"], mm.mm_hashes["image"]


def _transport_probe(frontend, model_config) -> dict:
    """One real request sent twice (mirror miss, then hit): bytes, seconds to serialise in P0 and decode
    in P1, bytes of the processed tensors (Whisper: add_request then abort; images: ``mirror_probe``)."""
    from refimpl.engine.mp.core_proc import EngineCoreRequest
    from refimpl.multimodal.cache import item_nbytes
    from refimpl.request import Request
    from refimpl.sampling_params import SamplingParams
    tokens, items, hashes = _probe_request(model_config)
    stats, out = frontend.client.stats, {}
    decode0 = frontend.client.call_utility("decode_s")
    for key in ("miss", "hit"):
        rid, enc0, bytes0, params = f"probe-{key}", stats.encode_s, stats.bytes_sent, SamplingParams(max_tokens=1)
        if model_config.is_encoder_decoder:
            frontend.add_request(Request(request_id=rid, prompt_token_ids=tokens, mm_inputs=items,
                                         mm_hashes=hashes, sampling_params=params, arrival_time=time.time()))
        else:
            sent = frontend.mm_input_cache_client.get_and_update_p0(items, hashes)
            frontend.client.call_utility("mirror_probe", EngineCoreRequest(rid, list(tokens), sent, list(hashes),
                                                                           params, time.time()))
        out[f"bytes_{key}"], out[f"encode_s_{key}"] = stats.bytes_sent - bytes0, stats.encode_s - enc0
    if model_config.is_encoder_decoder:
        frontend.abort_requests(["probe-miss", "probe-hit"])
    out["decode_s"] = frontend.client.call_utility("decode_s") - decode0
    out["item_bytes"] = sum(item_nbytes(it) for it in items)
    out["modality"] = "audio" if model_config.is_encoder_decoder else "image"
    return out


def two_process_record(vllm_config, variant: str, reset_scope: str):
    """Start up in two processes: (P1's StartupReport, record of spawn seconds, MEMORY_FIELDS bytes,
    P1's registry stats and ``transport``); P1 is shut down."""
    from refimpl.engine.mp.frontend import MPFrontend
    t0 = time.perf_counter()
    frontend = MPFrontend(vllm_config, variant, reset_scope)
    try:
        rep = frontend.report
        wall = time.perf_counter() - t0 - rep.phases.get("reset_mm_cache_p0", 0.0)
        p1_s = sum(v for k, v in rep.phases.items() if k != "reset_mm_cache_p0")
        transport = {"startup_bytes_received": frontend.client.stats.bytes_received,
                     "startup_decode_s": frontend.client.stats.decode_s}
        transport |= _transport_probe(frontend, vllm_config.model_config)
        record = {"p1_registry_stats": frontend.client.call_utility("registry_stats"), "process_mode": "mp",
                  "reset_scope": reset_scope, "startup_wall_s": wall, "spawn_overhead_s": wall - p1_s,
                  "p1_pid": frontend.pid, **frontend.startup_memory, "transport": transport}
    finally:
        frontend.shutdown()
    return rep, record


def summarize_two_process(runs: list[dict]) -> dict:
    """summarize() of MEMORY_FIELDS and ``transport_*`` over two-process runs; {} for in-process ones."""
    if not runs or any(r.get("process_mode") != "mp" for r in runs):
        return {}
    out = {k: summarize(r[k] for r in runs) for k in MEMORY_FIELDS}
    for k in TRANSPORT_FIELDS:
        if all(k in r["transport"] for r in runs):
            out[f"transport_{k}"] = summarize(r["transport"][k] for r in runs)
    return out


def run_once(spec: StartupSpec, variant: str) -> dict:
    """One start-up (or ``spec.calls`` budget calls) of ``variant`` in this process."""
    threads = set_single_thread()
    set_numpy_hugepage(spec.numpy_hugepage == "on")
    before = reported_gib()
    rec = _budget(spec, variant) if spec.calls else _startup(spec, variant)
    after = reported_gib()  # freed memory handed to the VM's host during the run (docs/cost-model.md)
    host = {"host_reported_gib": after - before} if before is not None and after is not None else {}
    return {"variant": variant, "torch_num_threads": threads, "thp": thp_state(), **host, **rec}


def _startup(spec: StartupSpec, variant: str) -> dict:
    t0, c0 = time.perf_counter(), time.process_time()
    cfg = make_vllm_config(spec)
    config_s = time.perf_counter() - t0
    extra: dict = {}
    if spec.process_mode == "mp":
        rep, extra = two_process_record(cfg, variant, spec.reset_scope)
        stats = extra.pop("p1_registry_stats")  # the profiling passes ran in the child
    else:
        t1 = time.perf_counter()
        engine = EngineCore(cfg, variant)
        extra["engine_wall_s"] = time.perf_counter() - t1  # EngineCore()'s wall; its phases cover it
        rep, stats = engine.report, engine.mm_registry.stats.as_dict()
    phases = {"config": config_s, **rep.phases}
    if spec.process_mode == "inproc":  # CPU seconds of this process (mp: the work is in the child)
        extra["cpu_s"] = time.process_time() - c0
    # in-process: the wall of config + EngineCore() (before issue 43: config + the phases, which left
    # out the StartupPlan built in EngineCore.__init__); two-process: P1's phases + config
    total = config_s + extra["engine_wall_s"] if "engine_wall_s" in extra else sum(phases.values())
    return extra | {
        "device": cfg.device, "scale": cfg.model_config.scale, "max_model_len": cfg.model_config.max_model_len,
        "limit_mm_per_prompt": cfg.model_config.limit_mm_per_prompt, "total_s": total,
        "phases": phases, **{k: getattr(rep, k) for k in REPORTED}, "parts_s": {k: stats[k] for k in PARTS}}


def _budget(spec: StartupSpec, variant: str) -> dict:
    from refimpl.core.encoder_cache_manager import compute_encoder_budget
    cfg, v = make_vllm_config(spec), STARTUP_VARIANTS[variant]
    cfg.model_config.mm_switches = v.mm_switches
    REG.reset_stats()
    calls_s, passes, budgets, faults, parts = [], [], [], [], []
    for _ in range(spec.calls or 0):
        ru0, st0 = resource.getrusage(resource.RUSAGE_SELF), REG.stats.as_dict()
        p0, t0 = REG.stats.hf_mm_passes, time.perf_counter()
        budgets.append(compute_encoder_budget(cfg.model_config, cfg.scheduler_config, REG,
                                              disable_cache=not v.cache_during_profiling,
                                              use_formula=v.uses_formula(cfg.model_config.model)))
        calls_s.append(time.perf_counter() - t0)
        passes.append(REG.stats.hf_mm_passes - p0)
        ru, st = resource.getrusage(resource.RUSAGE_SELF), REG.stats.as_dict()
        faults.append({"minflt": ru.ru_minflt - ru0.ru_minflt, "majflt": ru.ru_majflt - ru0.ru_majflt})
        parts.append({k: st[k] - st0[k] for k in PARTS})
    return {"device": cfg.device, "max_model_len": cfg.model_config.max_model_len,
            "limit_mm_per_prompt": cfg.model_config.limit_mm_per_prompt, "calls_s": calls_s, "passes": passes,
            "budgets": budgets, "page_faults": faults, "parts_s": parts,
            "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "cache_hits": REG.stats.cache_hits, "cache_misses": REG.stats.cache_misses,
            "hf_processor_calls": REG.stats.hf_processor_calls}


def summarize_runs(spec: StartupSpec, runs: list[dict]) -> dict:
    """total_s and peak_rss_bytes (two-process runs: both processes' figures); budget: call_<i>_s."""
    if spec.calls:
        return {f"call_{i + 1}_s": summarize(r["calls_s"][i] for r in runs) for i in range(min(len(r["calls_s"]) for r in runs))}
    return {k: summarize(r[k] for r in runs) for k in ("total_s", "peak_rss_bytes")} | summarize_two_process(runs)


def result(spec: StartupSpec, trial, in_process: bool) -> Result:
    variants = {v: {"runs": rs, "summary": summarize_runs(spec, rs) if rs else {}} for v, rs in trial.runs.items()}
    return Result(spec.bench, result_env(trial.runs, spec.device, in_process), {**spec.params(), **trial.stop},
                  variants, missing=[] if all(trial.runs.values()) else ["runs"])

