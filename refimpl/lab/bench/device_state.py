"""What the serving bench records about the machine around each served block (issue 42): the GPU's
clocks, temperature, power and throttle reasons at each section boundary, the CUDA caching
allocator's retries, and the engine thread's CPU affinity. Read between blocks, never inside one;
nothing here changes a system setting (the affinity is this process's own thread's, and restored)."""
from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any, Optional

import torch

__all__ = ["GPU_QUERY", "gpu_telemetry_source", "gpu_state", "alloc_retries", "pin_engine_thread",
           "restore_affinity"]

# nvidia-smi --query-gpu fields, in the order gpu_state reads them (pynvml: the same quantities)
GPU_QUERY = ("clocks.sm", "clocks.mem", "temperature.gpu", "power.draw", "clocks_throttle_reasons.active")
_KEYS = ("sm_clock_mhz", "mem_clock_mhz", "temperature_c", "power_w", "throttle_reasons")


def _is_cuda(device: Optional[str]) -> bool:
    return bool(device) and str(device).startswith("cuda") and torch.cuda.is_available()


def gpu_telemetry_source(device: Optional[str]) -> str:
    """"pynvml", "nvidia-smi", or "none (...)" saying why no GPU state is recorded."""
    if not _is_cuda(device):
        return f"none (device {device}: no GPU state)"
    try:
        import pynvml  # noqa: F401  (nvidia-ml-py)
        return "pynvml"
    except ImportError:
        return "nvidia-smi" if shutil.which("nvidia-smi") else "none (neither pynvml nor nvidia-smi found)"


def _uuid(device: str) -> Optional[str]:
    props = torch.cuda.get_device_properties(torch.device(device))
    u = getattr(props, "uuid", None)
    return None if u is None else str(u) if str(u).startswith("GPU-") else f"GPU-{u}"


def gpu_state(device: Optional[str]) -> Optional[dict[str, Any]]:
    """The GPU's SM / memory clocks (MHz), temperature (C), power draw (W) and active throttle reasons
    (NVML's bit mask as an int, or nvidia-smi's hex text) now; None off CUDA; ``{"error": ...}`` when
    the query fails (the run goes on)."""
    source = gpu_telemetry_source(device)
    if source.startswith("none"):
        return None
    uuid = _uuid(str(device))
    try:
        if source == "pynvml":
            import pynvml
            pynvml.nvmlInit()
            h = (pynvml.nvmlDeviceGetHandleByUUID(uuid) if uuid
                 else pynvml.nvmlDeviceGetHandleByIndex(torch.device(str(device)).index or 0))
            reasons = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons",
                              getattr(pynvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None))
            vals = [pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
                    pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM),
                    pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU),
                    pynvml.nvmlDeviceGetPowerUsage(h) / 1e3, reasons(h) if reasons else None]
            return dict(zip(_KEYS, vals)) | {"source": source}
        out = subprocess.run(["nvidia-smi", f"--query-gpu={','.join(GPU_QUERY)}", "--format=csv,noheader,nounits",
                              "-i", uuid or str(torch.device(str(device)).index or 0)],
                             capture_output=True, text=True, timeout=10, check=True).stdout
        return dict(zip(_KEYS, (_number(v) for v in out.strip().splitlines()[0].split(",")))) | {"source": source}
    except Exception as e:  # telemetry never stops a run
        return {"error": f"{type(e).__name__}: {e}", "source": source}


def _number(text: str) -> Any:
    text = text.strip()
    try:
        return float(text) if not text.startswith("0x") else text
    except ValueError:
        return text


def alloc_retries(device: Optional[str]) -> Optional[int]:
    """The CUDA caching allocator's ``num_alloc_retries`` so far (cudaMalloc failed, cache freed,
    retried); None off CUDA."""
    if not _is_cuda(device):
        return None
    return int(torch.cuda.memory_stats(torch.device(str(device))).get("num_alloc_retries", 0))


def pin_engine_thread() -> dict[str, Any]:
    """Pin the calling thread (the one that runs ``engine.step()``) to one CPU of those it may run on
    (the highest-numbered), where ``os.sched_setaffinity`` exists. Returns the record the Result's
    env keeps: ``pinned``, ``cpus`` (the thread's CPUs now), ``allowed`` (before), ``reason`` when
    not pinned. ``restore_affinity`` undoes it."""
    if not hasattr(os, "sched_setaffinity"):
        return {"pinned": False, "cpus": None, "allowed": None, "reason": "no os.sched_setaffinity on this OS"}
    allowed = sorted(os.sched_getaffinity(0))
    try:
        os.sched_setaffinity(0, {allowed[-1]})
    except OSError as e:
        return {"pinned": False, "cpus": allowed, "allowed": allowed, "reason": f"sched_setaffinity: {e.strerror}"}
    return {"pinned": True, "cpus": sorted(os.sched_getaffinity(0)), "allowed": allowed}


def restore_affinity(record: dict[str, Any]) -> None:
    """Give the calling thread back the CPUs ``pin_engine_thread`` found (a no-op where it pinned nothing)."""
    if record.get("pinned"):
        os.sched_setaffinity(0, record["allowed"])
