"""Every refusal before a run: ``check(spec, out)``, called once by ``trial.run``. Raises
ConfigError (UnknownVariantError, UnknownModelError) or InsufficientMemoryError."""
from __future__ import annotations

import dataclasses
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

import psutil

from refimpl.config import (
    SUPPORTED_MODELS,
    CacheConfig,
    ModelConfig,
    SchedulerConfig,
    check_model,
    resolve_device,
)
from refimpl.config.checks import check_mm_processor_kwargs, check_model_dir
from refimpl.config.model import REAL_WEIGHT_MODELS, get_preprocessor_dict
from refimpl.core.kv_cache_utils import blocks_for_one_request
from refimpl.errors import ConfigError, InsufficientMemoryError, UnknownModelError, UnknownVariantError
from refimpl.lab.bench.serve_checks import check_max_tokens, check_serve
from refimpl.lab.bench.spec_types import check_types
from refimpl.lab.bench.specs import CHOICES, HF, CalibrateSpec, ServeSpec, Spec, StartupSpec
from refimpl.variants import ENCODER_LEN_VARIANTS, STARTUP_VARIANTS

__all__ = ["MEMORY_WAIT_S", "check", "check_output", "check_memory", "check_startup_memory",
           "check_serving_memory", "wait_for_memory"]

GiB = 1 << 30
MEMORY_WAIT_S = 300.0  # how long a run waits for memory other processes hold before it is refused
AT_LEAST = {"repeats": 1, "calls": 1, "max_model_len": 1, "num_requests": 1, "max_tokens": 1,
            "max_num_seqs": 1, "num_gpu_blocks": 1, "warmup_requests": 0, "max_new_tokens": 1,
            "size_mib": 16, "max_concurrency": 1, "output_len": 1,
            "stop_min_pairs": 2}
ABOVE_ZERO = ("budget_s", "rate", "stop_half_width")
# (field, its neutral value, the other field, the other's values that allow any value)
CONFLICTS = (("reset_scope", "v0.9.0", "process_mode", ("mp",)),
             ("calls", None, "process_mode", ("inproc",)),
             ("rate", None, "design", ("workload",)),
             ("max_concurrency", None, "design", ("workload", "paired")),
             ("output_len", None, "design", ("workload", "paired")),
             ("against", "previous", "design", ("paired",)),
             ("stop_half_width", None, "design", ("paired",)),
             ("warmup_requests", 0, "design", ("fresh", "workload")),
             ("in_process", False, "design", ("fresh",)))
OUTPUT_LIMIT = "a writable file path: not a folder, in a folder this user can write (or create)"


def check(spec: Spec, out: Optional[str | os.PathLike] = None, in_process: bool = False, *,
          memory: bool = True) -> None:
    """Refuse ``spec`` (fresh processes unless ``in_process``, written to ``out``) before any run:
    each field's type (``spec_types.check_types``), then the values; ``memory=False`` leaves out the
    memory check (the CLI's refusals before the trial's imports; a sweep's runs, checked before the first)."""
    bench = f"refimpl bench {spec.name}"
    check_types(spec)
    for name, choices in CHOICES.items():  # before resolve(): the design picks the defaults
        if getattr(spec, name, None) is not None and getattr(spec, name) not in choices:
            raise ConfigError(name, choices, f"got {getattr(spec, name)!r}")
    s = spec.resolve()
    values = {**{f.name: getattr(s, f.name) for f in dataclasses.fields(s)}, "in_process": in_process}
    for name, low in AT_LEAST.items():
        if values.get(name) is not None and not values[name] >= low:
            raise ConfigError(name, f">= {low}", f"got {values[name]!r}")
    for name in ABOVE_ZERO:
        if values.get(name) is not None and not values[name] > 0:
            raise ConfigError(name, "> 0", f"got {values[name]!r}")
    for name, neutral, other, allowed in CONFLICTS:
        if name in values and other in values and values[name] != neutral and values[other] not in allowed:
            raise ConfigError(name, f"only with {other} {' or '.join(allowed)}",
                              f"got {name}={values[name]!r} with {other}={values[other]!r}")
    if isinstance(s, CalibrateSpec):
        unknown = [m for m in s.models if m not in SUPPORTED_MODELS]
        if unknown or not s.models:
            raise UnknownModelError("models", SUPPORTED_MODELS, f"got {' '.join(unknown) or 'none'}")
    else:
        _labels(s, bench)
        if "model" in values:
            check_model(s.model)
    if isinstance(s, ServeSpec):
        check_serve(spec, s)  # type: ignore[arg-type]
    if isinstance(s, StartupSpec):
        _startup(s)
    if hasattr(s, "max_new_tokens"):
        check_max_tokens("max_new_tokens", s.max_new_tokens, s.model)
    if "device" in values:
        resolve_device(values["device"])
    if getattr(s, "model", None) in REAL_WEIGHT_MODELS and getattr(s, "model_path", None) is None:
        from refimpl.worker.ct2_loader import package_model_dir
        package_model_dir()  # the real weights' package ([weights]): its ConfigError before any run
    if out is not None:
        check_output(out)
    if memory:
        check_memory(s)


def _labels(s: Spec, bench: str) -> None:
    labels = s.labels
    known = tuple(STARTUP_VARIANTS) if isinstance(s, StartupSpec) else (*ENCODER_LEN_VARIANTS, HF)
    if not labels:
        raise ConfigError("variants", known, "no variant given")
    got = f"got {' '.join(labels)}"
    if any(not v for v in labels) or len(set(labels)) < len(labels):
        raise ConfigError("variants", "distinct, non-empty names", got)
    for label in labels:
        name, at, n = label.partition("@") if isinstance(s, ServeSpec) else (label, "", "")
        if name not in known and s.name != "wer":
            raise UnknownVariantError("variants", known, f"unknown variant {label!r} of {bench}")
        if at and not (name in ENCODER_LEN_VARIANTS and ENCODER_LEN_VARIANTS[name].encoder_batch
                       and n.isdigit() and int(n) >= 1):
            raise ConfigError("variants", "NAME@N (N >= 1 audios per step) only for an audios-per-step "
                              "variant", got)


def _startup(s: StartupSpec) -> None:
    if s.model_path is not None:  # a start-up run loads the directory's weights
        check_model_dir(s.model_path, weights=True)
    check_mm_processor_kwargs(s.model, dict(s.mm_processor_kwargs), get_preprocessor_dict(s.model))


def check_output(path: str | os.PathLike) -> Path:
    """Refuse a result path the run could not write (probed with a temporary file); ConfigError."""
    path = Path(path)
    if path.exists() and not path.is_file():
        raise ConfigError("output_json", OUTPUT_LIMIT, f"{str(path)!r} is {'a folder' if path.is_dir() else 'not a file'}")
    folder = path.absolute().parent
    while not folder.exists():
        folder = folder.parent
    try:
        if not folder.is_dir():
            raise NotADirectoryError(20, "not a folder")
        fd, probe = tempfile.mkstemp(prefix=f".{path.name}.", dir=folder)
    except OSError as e:
        raise ConfigError("output_json", OUTPUT_LIMIT, f"cannot write in {str(folder)!r}: {e.strerror}") from None
    os.close(fd)
    os.unlink(probe)
    return path


def check_memory(s: Spec, available: Optional[int] = None) -> None:
    """The memory refusals of ``s`` against ``available`` bytes (default: psutil's now)."""
    avail = psutil.virtual_memory().available if available is None else available
    if isinstance(s, StartupSpec):
        from refimpl.lab.bench.startup import make_vllm_config  # the engine's modules: start-up's parent only
        vc = make_vllm_config(s)
        check_startup_memory(vc.model_config, [STARTUP_VARIANTS[v] for v in s.labels],
                             vc.scheduler_config.max_num_batched_tokens, avail)
        if vc.model_config.is_encoder_decoder and vc.model_config.device == "cpu" and not s.calls:
            check_serving_memory(vc, avail)
    elif isinstance(s, ServeSpec):
        # memory (torch, the start-up plan) is imported by the checks that read it: not by calibrate's parent
        from refimpl.config import VllmConfig
        from refimpl.lab.bench import memory
        from refimpl.worker.model_loader import parameter_bytes
        assert s.model and s.variants and s.num_requests is not None and s.warmup_requests is not None
        mc = ModelConfig(s.model, device=s.device or "auto")
        engines = [v for v in s.variants if v != HF]
        vc = VllmConfig(mc, SchedulerConfig(max_num_seqs=s.max_num_seqs or 256), CacheConfig(num_gpu_blocks=s.num_gpu_blocks))
        need = blocks_for_one_request(vc)
        if engines and s.num_gpu_blocks is not None and s.num_gpu_blocks < need:
            raise ConfigError("num_gpu_blocks", need, f"{s.num_gpu_blocks} KV blocks cannot hold "
                              f"one request of max_model_len={mc.max_model_len} ({need} blocks)")
        reqs = memory.request_bytes(s.model, s.num_requests, bool(engines))
        if s.design == "workload":
            reqs += memory.request_bytes(s.model, s.warmup_requests, False)
        n = len(engines) if s.design == "paired" else min(len(engines), 1)
        shared = (n - 1) * parameter_bytes(mc) if n > 1 else 0  # the variant engines share one model's weights
        engine = n * check_serving_memory(vc, avail) - shared if mc.device == "cpu" and n else 0
        if engine + reqs > avail:
            raise InsufficientMemoryError("num_requests", avail, (
                f"{s.num_requests} requests hold up to {reqs / GiB:.1f} GiB (audio of up to 30 s at 16 kHz "
                f"float32{', log-mel features' if engines else ''}), {n} engine(s) on one copy of the weights about "
                f"{engine / GiB:.1f} GiB; "
                f"{avail / GiB:.1f} GiB available"))


def check_startup_memory(model_config, variants: list, max_num_batched_tokens: int = 8192,
                         available: Optional[int] = None) -> int:
    """The largest start-up need (bytes) of ``variants``: their StartupPlans' predicted peak RSS
    (memory.startup_peak, the explorer's figure); InsufficientMemoryError naming ``max_model_len``, or
    ``mm_processor_kwargs[max_pixels]`` where the user set it (startup_memory.memory_field)."""
    from refimpl.engine.startup_memory import memory_field
    from refimpl.lab.bench import memory
    avail = psutil.virtual_memory().available if available is None else available
    rates, source = memory.startup_rates(model_config.model)
    peaks = [(sum(h.values()), v.name, at, h) for v in variants
             for at, h in [memory.startup_peak(model_config, v, max_num_batched_tokens, rates)]]
    need, worst, at, held = max(peaks, key=lambda p: p[0])
    if need <= avail:
        return need
    fits = next((n for n in range(model_config.max_model_len - 8192, 0, -8192) if memory.startup_bytes(
        dataclasses.replace(model_config, max_model_len=n), STARTUP_VARIANTS[worst], max_num_batched_tokens,
        rates) <= avail), None)
    top = ", ".join(f"{k} {b / GiB:.1f}" for k, b in sorted(held.items(), key=lambda kv: -kv[1])[:3])
    raise InsufficientMemoryError(memory_field(model_config.mm_processor_kwargs), avail, (
        f"variant {worst} at max_model_len {model_config.max_model_len} needs about {need / GiB:.1f} GiB "
        f"(predicted peak RSS at {at}: {top} GiB; {source}), {avail / GiB:.1f} GiB available"
        + (f"; --max-model-len {fits} would fit" if fits else "")))


def check_serving_memory(vllm_config, available: Optional[int] = None) -> int:
    """The need (bytes) of a Whisper engine on the CPU; InsufficientMemoryError (the largest part)."""
    from refimpl.lab.bench import memory
    avail = psutil.virtual_memory().available if available is None else available
    parts, running = memory.serving_parts(vllm_config)
    need = sum(parts.values()) + memory.SERVING_MARGIN_BYTES
    if need > avail:
        mc, kv = vllm_config.model_config, [v for k, v in parts.items() if k.startswith(("num_gpu", "kv_"))][0]
        raise InsufficientMemoryError(max(parts, key=lambda k: parts[k]), avail, (
            f"{mc.model} ({mc.scale} scale, {mc.dtype}) would hold about {need / GiB:.1f} GiB: weights "
            f"{parts['scale'] / GiB:.1f}, KV cache {kv / GiB:.1f}, cross K/V copies for {running} running "
            f"requests (max_num_seqs={vllm_config.scheduler_config.max_num_seqs}) {parts['max_num_seqs'] / GiB:.1f}, "
            f"dummy prompt {parts['max_num_batched_tokens'] / GiB:.1f}, margin "
            f"{memory.SERVING_MARGIN_BYTES / GiB:.1f}; {avail / GiB:.1f} GiB available"))
    return need


def wait_for_memory(spec: Spec, label: str, wait_s: Optional[float] = None, poll_s: float = 5.0) -> None:
    """``check_memory`` of one variant, retried for up to ``wait_s`` s (default MEMORY_WAIT_S)."""
    deadline = time.monotonic() + (MEMORY_WAIT_S if wait_s is None else wait_s)
    one = spec.replace(variants=(label,)) if hasattr(spec, "variants") else spec
    while True:
        try:
            return check_memory(one)
        except InsufficientMemoryError as e:
            if time.monotonic() + poll_s > deadline:
                raise
            print(f"waiting for memory ({e})", file=sys.stderr)
            time.sleep(poll_s)
