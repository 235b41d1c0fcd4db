"""What a run will hold in memory (bytes), estimated from its configs alone; guard.py refuses.
Start-up: the engine's StartupPlan's peak (``startup_memory.peak_bytes_by_holder``) with this
machine's calibrated MemoryRates (results/<hardware>/calibration.json), or the default rates
without one: the figure the explorer and the cost model show. No vLLM counterpart (vLLM
sizes the KV cache from free GPU memory)."""
from __future__ import annotations

from typing import Optional

import torch

from refimpl.attention.cross_attention import dense_copy_bytes
from refimpl.audio import SAMPLE_RATE, WHISPER_WINDOW_S
from refimpl.config import CacheConfig, SchedulerConfig, VllmConfig
from refimpl.config.model import get_preprocessor_dict
from refimpl.engine.startup_memory import MemoryRates, peak_bytes_by_holder
from refimpl.engine.startup_plan import StartupPlan
from refimpl.lab.bench.calibrate import default_out, load_rates, memory_rates
from refimpl.variants import StartupVariant
from refimpl.worker.model_loader import parameter_bytes

__all__ = ["GiB", "SERVING_MARGIN_BYTES", "startup_rates", "startup_peak", "startup_bytes", "serving_parts",
           "request_bytes"]

GiB = 1 << 30
SERVING_MARGIN_BYTES = GiB // 2  # one step's activations and encoder output


def startup_rates(model: str) -> tuple[MemoryRates, str]:
    """(MemoryRates, where they come from): this machine's calibration, else the plan's defaults."""
    path = default_out()
    if path.exists():
        return memory_rates(load_rates(path), model), f"rates of {path.parent.name}/{path.name}"
    return MemoryRates(), "default rates (no calibration for this machine)"


def startup_peak(model_config, v: StartupVariant, max_num_batched_tokens: int = 8192,
                 rates: Optional[MemoryRates] = None) -> tuple[str, dict[str, int]]:
    """(moment, bytes by holder) of the peak RSS of one start-up of row ``v`` (its StartupPlan)."""
    vc = VllmConfig(model_config, SchedulerConfig(max_num_batched_tokens=max_num_batched_tokens), CacheConfig())
    return peak_bytes_by_holder(StartupPlan.build(vc, v), rates or startup_rates(model_config.model)[0])


def startup_bytes(model_config, v: StartupVariant, max_num_batched_tokens: int = 8192,
                  rates: Optional[MemoryRates] = None) -> int:
    """Peak RSS of one start-up of row ``v`` (bytes): the sum of ``startup_peak``'s holders."""
    return sum(startup_peak(model_config, v, max_num_batched_tokens, rates)[1].values())


def serving_parts(vllm_config) -> tuple[dict[str, int], int]:
    """(bytes by the setting behind them, requests counted as running) of a Whisper engine on the CPU."""
    mc, cc, sc = vllm_config.model_config, vllm_config.cache_config, vllm_config.scheduler_config
    d = mc.hf_config_dict
    block = 2 * d["decoder_layers"] * cc.block_size * d["d_model"] * getattr(torch, mc.dtype).itemsize
    kv_field = "num_gpu_blocks" if cc.num_gpu_blocks else "kv_cache_memory_bytes"
    kv = cc.num_gpu_blocks * block if cc.num_gpu_blocks else cc.kv_cache_memory_bytes
    running = min(sc.max_num_seqs, kv // block // (-(-d["max_source_positions"] // cc.block_size) + 1))
    return {"scale": parameter_bytes(mc), kv_field: kv, "max_num_seqs": dense_copy_bytes(vllm_config, running),
            "max_num_batched_tokens": 16 * sc.max_num_batched_tokens}, running


def request_bytes(model: str, num_requests: int, features: bool) -> int:
    """What ``num_requests`` requests hold at once: 30 s float32 audio each (and, with ``features``, its
    log-mel features until it finishes)."""
    per = int(WHISPER_WINDOW_S * SAMPLE_RATE) * 4
    if features:
        d = get_preprocessor_dict(model)
        per += d["feature_size"] * d["nb_max_frames"] * 4
    return num_requests * per
