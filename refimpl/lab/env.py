"""The machine and software of a result (its ``env``): torch's ``get_env_info()`` without pip / conda,
the CPU, RAM, git commit, torch's threads and the libraries' versions."""
from __future__ import annotations

import contextlib
import datetime as _dt
import os
import platform
import re
import shutil
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any, Optional
from unittest import mock

import psutil

from refimpl.config import resolve_device

REPO_ROOT = Path(__file__).resolve().parents[2]
THREAD_ENV_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                   "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")
VERSIONED = ("torch", "torchvision", "transformers", "tokenizers", "numpy", "pillow", "blake3", "refimpl")
TORCH_ENV_FIELDS = ("torch_version", "is_debug_build", "cuda_compiled_version", "cuda_runtime_version",
                    "cudnn_version", "nvidia_driver_version", "nvidia_gpu_models", "hip_compiled_version",
                    "is_cuda_available", "os", "libc_version", "python_version", "python_platform",
                    "gcc_version", "caching_allocator_config", "cuda_module_loading")


def torch_env_info() -> dict[str, Any]:
    """The TORCH_ENV_FIELDS of ``get_env_info()`` this torch has; a missing tool gives None."""
    from torch.utils import collect_env as _ce  # torch here: the explorer page reaches this module

    with contextlib.ExitStack() as stack:
        for name, stub in (("get_pip_packages", lambda *a, **k: (None, None)),
                           ("get_conda_packages", lambda *a, **k: None)):
            if hasattr(_ce, name):
                stack.enter_context(mock.patch.object(_ce, name, stub))
        info = _ce.get_env_info()._asdict()
    return {k: info[k] for k in TORCH_ENV_FIELDS if k in info}


def cpu_model() -> str:
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def hardware_folder(hardware: dict) -> str:
    """The results/ folder name of a Result's ``env["hardware"]``: ``cpu-amd-epyc-2c`` for an
    "AMD EPYC" with 2 logical cores, ``gpu-nvidia-h100-80gb-hbm3`` for that GPU."""
    if hardware.get("gpu"):
        return "gpu-" + "-".join(re.findall(r"[a-z0-9]+", hardware["gpu"]["name"].lower()))
    words = [w for w in re.findall(r"[a-z0-9]+", re.sub(r"\((r|tm)\)|@.*", "", hardware["cpu"]["model"].lower()))
             if w not in ("processor", "cpu", "core")]
    return f"cpu-{'-'.join(words[:2])}-{hardware['cpu']['logical_cores']}c"


GPU_DEVICE_NODES = ("/dev/nvidiactl", "/dev/kfd", "/dev/dxg")  # NVIDIA's driver, ROCm's, WSL2's


def gpu_device_node() -> bool:
    """Whether this machine has a GPU driver's device node (GPU_DEVICE_NODES): without one torch's
    ``cuda.is_available()`` is False, so torch need not be imported to know (the explorer page imports none)."""
    return any(os.path.exists(p) for p in GPU_DEVICE_NODES)


def this_machine() -> dict:
    """The ``hardware`` fields ``hardware_folder`` reads, for this machine (no collect_env); torch is
    asked about the GPU only where a GPU driver's device node exists (``gpu_device_node``)."""
    gpu = None
    if gpu_device_node():
        import torch
        gpu = {"name": torch.cuda.get_device_name(0)} if torch.cuda.is_available() else None
    return {"gpu": gpu, "cpu": {"model": cpu_model(), "logical_cores": os.cpu_count()}}


def git_info(root: Path = REPO_ROOT) -> dict[str, Any]:
    """``{"commit", "dirty"}`` of the checkout at ``root`` (tracked files only); None outside one."""
    git = shutil.which("git")
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        if git and (root / ".git").exists():  # the full hash, "-dirty" when a tracked file changed
            out = subprocess.run([git, "describe", "--always", "--dirty", "--abbrev=40", "--exclude=*"],
                                 cwd=root, capture_output=True, text=True, timeout=10).stdout.strip()
            if out:
                return {"commit": out.removesuffix("-dirty"), "dirty": out.endswith("-dirty")}
    return {"commit": None, "dirty": None}


def _version(pkg: str) -> Optional[str]:
    with contextlib.suppress(metadata.PackageNotFoundError):
        return metadata.version(pkg)
    return None


PAGE_REPORTING = Path("/sys/module/page_reporting/parameters")


def page_reporting() -> Optional[dict[str, str]]:
    """The kernel's free-page-reporting settings (a VM guest that hands freed memory back to its host:
    every page touched again after the report costs the host's fault, about 2.2 s per GiB on the
    2-core VM against 0.12 right after a free; refimpl probe first-touch); None without it."""
    if not PAGE_REPORTING.is_dir():
        return None
    with contextlib.suppress(OSError):
        return {p.name: p.read_text().strip() for p in sorted(PAGE_REPORTING.iterdir())
                if p.name not in ("passes", "reported_kib", "walked")}  # settings, not counters
    return None


REPORTING_OFF_ORDER = 11  # page_reporting_order above the largest free block's: nothing is reported


def reporting_off(settings: Optional[dict[str, str]]) -> bool:
    """Whether ``page_reporting()``'s settings (as a Result's ``env.hardware.page_reporting`` keeps them)
    report nothing: ``page_reporting_order`` of REPORTING_OFF_ORDER or more, as the host's administrator set it
    (refimpl reads this setting and never writes it)."""
    return int((settings or {}).get("page_reporting_order", 0)) >= REPORTING_OFF_ORDER


def reported_gib() -> Optional[float]:
    """GiB the kernel has reported to the host since boot (free page reporting's counter); None without
    it. A run's difference is memory that its next touch pays the host's fault for."""
    with contextlib.suppress(OSError, ValueError):
        return int((PAGE_REPORTING / "reported_kib").read_text()) / 2**20
    return None


def collect_env() -> dict[str, Any]:
    """``date`` (UTC), ``hardware`` (``name``: the GPU's or the CPU's; ``page_reporting``: whether freed
    memory goes back to a VM's host), ``versions``, ``git``, threads and ``torch_env``; never raises for
    a missing GPU, git or tool."""
    import torch

    tenv = torch_env_info()
    cpu = {"model": cpu_model(), "logical_cores": os.cpu_count(), "physical_cores": psutil.cpu_count(logical=False)}
    gpu = None
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        gpu = {"name": props.name, "memory_bytes": int(props.total_memory), "count": torch.cuda.device_count(),
               "capability": f"{props.major}.{props.minor}", "driver": tenv.get("nvidia_driver_version"),
               "cuda": torch.version.cuda}
    hardware = {"name": gpu["name"] if gpu else cpu["model"], "cpu": cpu, "ram_bytes": int(psutil.virtual_memory().total),
                "gpu": gpu, "platform": platform.platform(), "hostname": platform.node(),
                "page_reporting": page_reporting()}
    versions = {"python": platform.python_version(), **{p: _version(p) for p in VERSIONED},
                "torch_runtime": torch.__version__}
    return {"date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), "hardware": hardware,
            "versions": versions, "git": git_info(), "torch_num_threads": torch.get_num_threads(),
            "thread_env": {k: os.environ[k] for k in THREAD_ENV_VARS if k in os.environ}, "torch_env": tenv}


def result_env(runs: dict[str, list[dict]], device: Optional[str], in_process: bool) -> dict[str, Any]:
    """``collect_env()`` with ``device``, ``in_process`` and the runs' threads, device and huge pages."""
    env = collect_env() | {"device": resolve_device(device or "auto"), "in_process": in_process}
    for key in ("torch_num_threads", "device", "thp"):
        found = next((r[key] for rs in runs.values() for r in rs if key in r), None)
        if found is not None:
            env[key] = found
    return env
