"""Memory check before a start-up / budget run: refuse, naming need and availability, rather
than be killed by the OOM killer halfway (DEVELOPERS.md: told before it starts).

The peak is dominated by the dummy video of Qwen2.5-VL (E = frames * 3584 * 3584 * 3 elements;
E = 462M at max_model_len 128000, 12 frames): ``BASE_BYTES + E * bytes_per_element``.
Bytes per element, per variant: the HF pass holds the video, a torch copy of it and two
float32 intermediates (2 * itemsize + 10); with the cache on, a hash holds the video plus its
full copies (3 in vLLM 0.9.0, 2 in 0.9.2, none later) next to the cached float32 pixel values
(itemsize * (1 + copies) + 4). Calibrated against peak RSS measured at max_model_len 50000
(4 frames): ``refimpl bench budget --model qwen2.5-vl-3b --variant
0.8.5,0.9.0,0.9.0+#19484,0.9.0+#24925,0.9.0+uint8 --calls 2 --repeats 1 --no-warmup
--max-model-len 50000``. No vLLM counterpart.

Also here, for the serving benches (throughput, workload, paired): :func:`request_bytes` (the
requests' audio and log-mel features, held in host memory) and :func:`check_request_memory`
(those plus each engine's ``refimpl.memory.check_serving_memory`` against what is available).
"""
from __future__ import annotations

from typing import Sequence

import psutil

from refimpl.errors import InsufficientMemoryError
from refimpl.variants import StartupVariant

GiB = 1 << 30
# interpreter, torch, transformers, the engine (small-scale weights), the dummy image and its
# copies: 2.25 GiB makes the estimate of a 128k 0.9.0 start-up (17.7 GiB) what one
# measured (peak RSS 17.7 GiB,
# refimpl bench startup --variant 0.8.5,...,shape-only --repeats 1 --no-warmup, 2026-11-30);
# at 1.5 GiB a run passed the check and was then OOM-killed on the shared machine.
BASE_BYTES = 9 * GiB // 4
HASH_COPIES = {"v0.8.5": 1, "v0.9.0": 3, "v0.9.2": 2, "stream": 0}
NUMPY_HUGEPAGE = ("off", "on")


def dummy_video_elements(model_config, v: StartupVariant, max_num_batched_tokens: int = 8192) -> int:
    """Elements of the largest dummy video row ``v``'s start-up builds: the lookups' (at
    max_model_len, unless the formula answers them) and the profile run's (0 if none)."""
    from refimpl.config import SchedulerConfig
    from refimpl.multimodal.registry import MultiModalRegistry
    from refimpl.multimodal.worst_case import lookup_specs, profile_dummy
    reg = MultiModalRegistry()
    if not reg.supports_multimodal_inputs(model_config):
        return 0
    dummy = profile_dummy(model_config, SchedulerConfig(max_num_batched_tokens=max_num_batched_tokens), v,
                          mm_registry=reg)
    specs = ([] if v.uses_formula(model_config.model) else lookup_specs(model_config, v, reg)) + \
        ([dummy.spec] if dummy else [])
    return max([t * w * h * 3 for kind, t, w, h in (s for s in specs if s[0] == "video")], default=0)


def bytes_per_element(v: StartupVariant) -> int:
    """Peak bytes per dummy-video element of variant ``v`` (see the module docstring)."""
    item = 8 if v.mm.dummy_video_dtype == "int64" else 1
    hf = 2 * item + 10
    if not v.cache_during_profiling and not v.mm.hash_uncached:
        return hf
    return max(hf, item * (1 + HASH_COPIES[v.mm.hash_byte_path]) + 4)


def extra_weight_bytes(model_config) -> int:
    """Host bytes of the weights beyond the small-scale ones BASE_BYTES holds: the difference
    of the two ``parameter_bytes`` for a full-scale model on the CPU (14 GiB for Qwen2.5-VL-3B in
    float32), 0 on CUDA (the weights live on the GPU) and at small scale."""
    from dataclasses import replace

    from refimpl.worker.model_loader import parameter_bytes
    if model_config.device != "cpu" or model_config.scale == "small":
        return 0
    return parameter_bytes(model_config) - parameter_bytes(replace(model_config, scale="small"))


def estimate_peak_rss_bytes(model_config, v: StartupVariant, max_num_batched_tokens: int = 8192) -> int:
    """Estimated peak RSS (bytes) of one run of variant ``v``: its largest dummy video
    (``dummy_video_elements``) times ``bytes_per_element``; shape-only builds none.
    Full-scale weights on the CPU add ``extra_weight_bytes``."""
    base = BASE_BYTES + extra_weight_bytes(model_config)
    if v.mm.shape_only:
        return base
    return base + dummy_video_elements(model_config, v, max_num_batched_tokens) * bytes_per_element(v)


def check_memory(model_config, variants: list[StartupVariant], max_num_batched_tokens: int = 8192,
                 available: int | None = None) -> int:
    """Return the largest estimated need (bytes) of ``variants`` run one after the other.

    Raises InsufficientMemoryError (field ``max_model_len``, limit = available bytes) when it
    exceeds ``available`` (default: psutil's available memory now), naming the variant, the
    need and the largest max_model_len (in steps of 8192 tokens) whose run would fit.
    """
    from dataclasses import replace
    avail = psutil.virtual_memory().available if available is None else available
    need, worst = max((estimate_peak_rss_bytes(model_config, v, max_num_batched_tokens), v.name) for v in variants)
    if need <= avail:
        return need
    hint = ""
    by_name = {v.name: v for v in variants}
    for n in range(model_config.max_model_len - 8192, 0, -8192):
        if estimate_peak_rss_bytes(replace(model_config, max_model_len=n), by_name[worst],
                                   max_num_batched_tokens) <= avail:
            hint = f"; --max-model-len {n} would fit"
            break
    raise InsufficientMemoryError(
        "max_model_len", avail,
        f"variant {worst} at max_model_len {model_config.max_model_len} needs about "
        f"{need / GiB:.1f} GiB of memory (dummy video and its copies), {avail / GiB:.1f} GiB "
        f"available{hint}")


def thp_state() -> dict:
    """Transparent huge pages as this process sees them: the kernel's ``enabled`` / ``defrag``
    modes (the bracketed word of /sys/kernel/mm/transparent_hugepage/*; None if absent) and
    whether numpy madvises large arrays to huge pages (env NUMPY_MADVISE_HUGEPAGE=0 turns it
    off). With ``defrag=madvise`` a madvised array may stall in direct compaction while its
    pages fault in: one suspect for the bimodal call-1 times of the int64 dummy video."""
    from pathlib import Path

    import numpy as np
    out: dict = {}
    for k in ("enabled", "defrag"):
        p = Path("/sys/kernel/mm/transparent_hugepage") / k
        txt = p.read_text() if p.exists() else ""
        out[k] = txt[txt.find("[") + 1:txt.find("]")] if "[" in txt else None
    get = getattr(np._core.multiarray, "_get_madvise_hugepage", None)  # type: ignore[attr-defined]  # private, not in the stubs
    out["numpy_madvise_hugepage"] = bool(get()) if get else None
    return out


def set_numpy_hugepage(enabled: bool) -> bool:
    """Turn numpy's huge-page madvise of large arrays (>= 4 MiB) on or off in this process, as
    the env NUMPY_MADVISE_HUGEPAGE does at import; returns the previous setting (False when
    this numpy has no such switch). Arrays allocated from now on follow it."""
    import numpy as np
    mod = np._core.multiarray  # type: ignore[attr-defined]  # private, not in the stubs
    if not hasattr(mod, "_set_madvise_hugepage"):
        return False
    return bool(mod._set_madvise_hugepage(enabled))


def request_bytes(model: str, num_requests: int, features: bool) -> int:
    """Upper bound of what ``num_requests`` requests hold at once (bytes): every audio at its
    longest (``make_request_audios``: up to WHISPER_WINDOW_S = 30 s at 16 kHz, float32, all
    built before the timed loop) plus, with ``features`` (the refimpl engine, which processes
    every request at ``add_request``), its log-mel ``input_features`` (preprocessor
    ``feature_size`` x ``nb_max_frames``, 80 x 3000 for whisper-tiny, float32) held until the
    request finishes. The HF baseline computes features per batch."""
    from refimpl.audio import SAMPLE_RATE, WHISPER_WINDOW_S
    from refimpl.config.model import get_preprocessor_dict
    per = int(WHISPER_WINDOW_S * SAMPLE_RATE) * 4
    if features:
        d = get_preprocessor_dict(model)
        per += d["feature_size"] * d["nb_max_frames"] * 4
    return num_requests * per


def check_request_memory(num_requests: int, requests: int, features: bool, engine_configs: Sequence = (),
                         available: int | None = None, field: str = "num_requests") -> None:
    """Refuse before any run (InsufficientMemoryError naming ``field``, limit the
    available bytes: ``available``, default psutil's) when the engines of ``engine_configs``
    (VllmConfigs of refimpl engines on the CPU: weights, KV cache, cross K/V copies, by
    ``refimpl.memory.check_serving_memory``, which also refuses each alone) plus ``requests``
    bytes of requests (:func:`request_bytes`, host memory whatever the device) exceed it.
    ``features``: whether ``requests`` counts log-mel features (for the message)."""
    import psutil

    from refimpl.errors import InsufficientMemoryError
    from refimpl.memory import GiB, check_serving_memory
    avail = psutil.virtual_memory().available if available is None else available
    engine = sum(check_serving_memory(c, avail) for c in engine_configs)
    if engine + requests > avail:
        raise InsufficientMemoryError(field, avail, (
            f"{num_requests} requests hold up to {requests / GiB:.1f} GiB (audio of up to 30 s at 16 kHz "
            f"float32{', log-mel features' if features else ''}), the engine{'s' if len(engine_configs) > 1 else ''} "
            f"about {engine / GiB:.1f} GiB; {avail / GiB:.1f} GiB available"))
