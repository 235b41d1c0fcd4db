"""What a run will hold in memory (bytes), estimated from its configs alone; guard.py refuses.
Start-up: ``BASE_BYTES + E * bytes_per_element``, E the largest dummy video's elements. No vLLM
counterpart (vLLM sizes the KV cache from free GPU memory)."""
from __future__ import annotations

from dataclasses import replace

import torch

from refimpl.attention.cross_attention import dense_copy_bytes
from refimpl.audio import SAMPLE_RATE, WHISPER_WINDOW_S
from refimpl.config import SchedulerConfig
from refimpl.config.model import get_preprocessor_dict
from refimpl.multimodal.registry import MultiModalRegistry
from refimpl.multimodal.worst_case import lookup_specs, profile_dummy
from refimpl.variants import StartupVariant
from refimpl.worker.model_loader import parameter_bytes

GiB = 1 << 30
# interpreter, torch, transformers, the small engine, the dummy image and its copies; calibrated on
# peak RSS (`bench startup --calls 2` at max_model_len 50000): 0.9.0 at 128k then estimates 17.7 GiB
BASE_BYTES = 9 * GiB // 4
HASH_COPIES = {"v0.8.5": 1, "v0.9.0": 3, "v0.9.2": 2, "stream": 0}
SERVING_MARGIN_BYTES = GiB // 2  # one step's activations and encoder output


def dummy_video_elements(model_config, v: StartupVariant, max_num_batched_tokens: int = 8192) -> int:
    """Elements of the largest dummy video of row ``v``'s start-up (lookups and profile run)."""
    reg = MultiModalRegistry()
    if not reg.supports_multimodal_inputs(model_config):
        return 0
    dummy = profile_dummy(model_config, SchedulerConfig(max_num_batched_tokens=max_num_batched_tokens), v,
                          mm_registry=reg)
    specs = ([] if v.uses_formula(model_config.model) else lookup_specs(model_config, v, reg)) + \
        ([dummy.spec] if dummy else [])
    return max([t * w * h * 3 for kind, t, w, h in (s for s in specs if s[0] == "video")], default=0)


def bytes_per_element(v: StartupVariant) -> int:
    item = 8 if v.mm.dummy_video_dtype == "int64" else 1
    hf = 2 * item + 10
    if not v.cache_during_profiling and not v.mm.hash_uncached:
        return hf
    return max(hf, item * (1 + HASH_COPIES[v.mm.hash_byte_path]) + 4)


def extra_weight_bytes(model_config) -> int:
    """Host bytes of full-scale weights on the CPU beyond the small ones in BASE_BYTES (0 on CUDA)."""
    if model_config.device != "cpu" or model_config.scale == "small":
        return 0
    return parameter_bytes(model_config) - parameter_bytes(replace(model_config, scale="small"))


def startup_bytes(model_config, v: StartupVariant, max_num_batched_tokens: int = 8192) -> int:
    """Peak RSS of one start-up of row ``v``: base plus its largest dummy video's bytes."""
    base = BASE_BYTES + extra_weight_bytes(model_config)
    if v.mm.shape_only:
        return base
    return base + dummy_video_elements(model_config, v, max_num_batched_tokens) * bytes_per_element(v)


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
