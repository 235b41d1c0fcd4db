"""Memory probes: what touching memory costs on this machine (``first_touch``), and an engine's
peak host memory against the serving estimate (``serving_memory``)."""
from __future__ import annotations

import time

import numpy as np

from refimpl.lab.bench.schema import Result
from refimpl.lab.env import page_reporting, reported_gib
from refimpl.lab.probes.common import check_fits, result, variant
from refimpl.lab.probes.specs import FirstTouchSpec, ServingMemorySpec

__all__ = ["first_touch", "serving_memory"]

MiB = 1 << 20


def _fill_round(spec: FirstTouchSpec) -> list[dict]:
    """Seconds per GiB of each array's fill, all kept alive until the round ends (each new memory)."""
    keep, out = [], []
    for _ in range(spec.arrays):
        t = time.perf_counter()
        keep.append(np.full(spec.array_mib * MiB // 8, 255, dtype=np.int64))
        out.append({"s_per_gib": (time.perf_counter() - t) * 1024 / spec.array_mib})
    return out


def first_touch(spec: FirstTouchSpec) -> Result:
    """Three rounds of ``spec.arrays`` fills in this process: variants ``first touch``, ``right after a
    free`` and ``after idle`` (``spec.pause`` s), each run one array's s per GiB. A VM guest that reports
    freed pages to its host pays the host's fault on every page touched after the report; bare metal
    pays about the same each round. ``params.reported_gib``: GiB free page reporting handed to the host
    during the run (None without /sys/module/page_reporting; its settings are in ``env.hardware``).
    Raises InsufficientMemoryError (``arrays``) when one round would not fit in available memory."""
    spec.check()
    check_fits("arrays", spec.arrays * spec.array_mib * MiB, f"a round of {spec.arrays} x {spec.array_mib} MiB")
    before = reported_gib()
    rounds = {"first touch": _fill_round(spec), "right after a free": _fill_round(spec)}
    time.sleep(spec.pause)
    rounds["after idle"] = _fill_round(spec)
    after = reported_gib()
    return result(spec, {k: variant(v, ["s_per_gib"]) for k, v in rounds.items()},
                  reported_gib=None if before is None or after is None else after - before,
                  page_reporting=page_reporting())


def serving_memory(spec: ServingMemorySpec) -> Result:
    """Serve ``max_num_seqs`` requests of 3 tokens (``ignore_eos``) with an in-process engine on the CPU,
    torch on one thread. One run: GiB over this process's RSS before the engine after loading
    (``after_load_gib``) and at the peak (``peak_gib``, sampled every 10 ms), the estimate
    (``estimate_gib``) and each request's token count. Raises InsufficientMemoryError (the estimate's
    largest part) before the engine is built when the estimate exceeds available memory."""
    spec.check()
    from refimpl.audio import make_request_audios
    from refimpl.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
    from refimpl.engine.llm_engine import LLMEngine
    from refimpl.lab.bench.common import set_single_thread
    from refimpl.lab.bench.guard import check_serving_memory
    from refimpl.sampling_params import SamplingParams
    from refimpl.utils.mem_utils import RssPeakSampler, rss_bytes
    set_single_thread()
    est = check_serving_memory(VllmConfig(ModelConfig(spec.model, scale=spec.scale, device="cpu"),
                                          SchedulerConfig(max_num_seqs=spec.max_num_seqs),
                                          CacheConfig(num_gpu_blocks=spec.num_gpu_blocks)))
    before = rss_bytes()
    with RssPeakSampler(0.01) as s:
        eng = LLMEngine.from_args(spec.model, process_mode="inproc", max_num_seqs=spec.max_num_seqs,
                                  num_gpu_blocks=spec.num_gpu_blocks, scale=spec.scale, device="cpu")
        loaded = rss_bytes()
        prompts = [{"multi_modal_data": {"audio": (a, 16000)}} for a in make_request_audios(spec.max_num_seqs, seed=0)]
        outs = eng.generate(prompts, SamplingParams(max_tokens=3, ignore_eos=True))
    peak = max(s.peak, loaded, rss_bytes())  # the sampler's largest, or a point it fell between
    run = {"after_load_gib": (loaded - before) / 2**30, "peak_gib": (peak - before) / 2**30,
           "estimate_gib": est / 2**30, "tokens": [len(o.output_token_ids) for o in outs]}
    return result(spec, {spec.model: variant([run], ["after_load_gib", "peak_gib", "estimate_gib"])})
