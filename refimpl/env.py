"""The machine and software a result was measured on, for every result JSON.

Built on PyTorch's own ``torch.utils.collect_env.get_env_info()`` (what ``python -m
torch.utils.collect_env`` prints for bug reports: torch / CUDA / cuDNN builds, GPU models,
driver, OS, libc, compilers), plus what it lacks: CPU model, core counts and RAM total
(psutil), the git commit and dirty flag of the checkout, torch's thread count and the
thread environment variables, and the installed versions of the libraries the figures
depend on (``importlib.metadata``).

Left out, for speed: ``get_env_info`` runs ``pip list`` and ``conda list`` in subprocesses;
``pip list`` is most of its time (on the 2-core development machine get_env_info() took
0.85-1.5 s, collect_env() 0.05-0.14 s: ``python -m refimpl.env --time``), and ``conda
list`` takes seconds where conda exists. Both listings are skipped; package versions come
from ``importlib.metadata``, which also works on a host without pip or conda.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import os
import platform
import shutil
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any, Optional
from unittest import mock

REPO_ROOT = Path(__file__).resolve().parents[1]
THREAD_ENV_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                   "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")
VERSIONED = ("torch", "torchvision", "transformers", "tokenizers", "numpy", "pillow",
             "blake3", "refimpl")
# get_env_info() fields copied into env["torch_env"]; cpu_info (the whole lscpu text) and
# the two skipped package listings are not.
TORCH_ENV_FIELDS = ("torch_version", "is_debug_build", "cuda_compiled_version",
                    "cuda_runtime_version", "cudnn_version", "nvidia_driver_version",
                    "nvidia_gpu_models", "hip_compiled_version", "is_cuda_available",
                    "os", "libc_version", "python_version", "python_platform",
                    "gcc_version", "caching_allocator_config", "cuda_module_loading")


def torch_env_info() -> dict[str, Any]:
    """``torch.utils.collect_env.get_env_info()`` as a dict, without its pip/conda listings.

    Returns the fields named in ``TORCH_ENV_FIELDS`` that this torch's ``SystemEnv`` has
    (strings or None, ``caching_allocator_config`` a dict). Subprocesses it runs (nvidia-smi,
    nvcc, gcc, lscpu, ...) that are missing give None, never an exception.
    """
    from torch.utils import collect_env as ce

    skipped = {"get_pip_packages": lambda *a, **k: (None, None),
               "get_conda_packages": lambda *a, **k: None}
    with contextlib.ExitStack() as stack:
        for name, stub in skipped.items():
            if hasattr(ce, name):  # other torch releases may name or split them differently
                stack.enter_context(mock.patch.object(ce, name, stub))
        info = ce.get_env_info()._asdict()
    return {k: info[k] for k in TORCH_ENV_FIELDS if k in info}


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (Linux); else ``platform.processor()``."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def git_info(root: Path = REPO_ROOT) -> dict[str, Any]:
    """``{"commit": sha or None, "dirty": bool or None}`` of the checkout at ``root``.

    ``dirty`` is True when tracked files differ from the commit (untracked files do not
    count). Both are None outside a git checkout or without a ``git`` executable.
    """
    git = shutil.which("git")
    if not git or not (root / ".git").exists():
        return {"commit": None, "dirty": None}
    try:
        commit = subprocess.run([git, "rev-parse", "HEAD"], cwd=root, capture_output=True,
                                text=True, timeout=10).stdout.strip() or None
        status = subprocess.run([git, "status", "--porcelain", "--untracked-files=no"],
                                cwd=root, capture_output=True, text=True, timeout=10)
        dirty = bool(status.stdout.strip()) if status.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}
    return {"commit": commit, "dirty": dirty}


def _versions() -> dict[str, Optional[str]]:
    out: dict[str, Optional[str]] = {"python": platform.python_version()}
    for pkg in VERSIONED:
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    return out


def collect_env() -> dict[str, Any]:
    """Describe this machine and its software; what every result JSON stores as its env.

    Returns a JSON-serialisable dict:

    * ``date``: UTC, ISO 8601 to the second;
    * ``hardware``: ``name`` (the GPU's name if CUDA is available, else the CPU model),
      ``cpu`` {``model``, ``logical_cores``, ``physical_cores``}, ``ram_bytes`` (total
      bytes), ``gpu`` (None without CUDA, else {``name``, ``memory_bytes``, ``count``,
      ``capability``, ``driver``, ``cuda``}), ``platform``, ``hostname``;
    * ``versions``: python and torch, torchvision, transformers, tokenizers, numpy, pillow,
      blake3, refimpl (None when not installed), and ``torch_runtime`` (torch.__version__
      with its build suffix);
    * ``git``: {``commit``, ``dirty``} (None outside a checkout);
    * ``torch_num_threads`` (of this process) and ``thread_env`` (the thread-count
      variables that are set);
    * ``torch_env``: :func:`torch_env_info`.

    Never raises for a missing optional piece (GPU, git, nvidia-smi, pip, conda).
    Imports torch and psutil.
    """
    import psutil
    import torch

    tenv = torch_env_info()
    versions = _versions()
    versions["torch_runtime"] = torch.__version__
    cpu = {"model": cpu_model(), "logical_cores": os.cpu_count(),
           "physical_cores": psutil.cpu_count(logical=False)}
    gpu = None
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        gpu = {"name": props.name, "memory_bytes": int(props.total_memory),
               "count": torch.cuda.device_count(), "capability": f"{props.major}.{props.minor}",
               "driver": tenv.get("nvidia_driver_version"), "cuda": torch.version.cuda}
    hardware = {"name": gpu["name"] if gpu else cpu["model"], "cpu": cpu,
                "ram_bytes": int(psutil.virtual_memory().total), "gpu": gpu,
                "platform": platform.platform(), "hostname": platform.node()}
    return {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "hardware": hardware,
        "versions": versions,
        "git": git_info(),
        "torch_num_threads": torch.get_num_threads(),
        "thread_env": {k: os.environ[k] for k in THREAD_ENV_VARS if k in os.environ},
        "torch_env": tenv,
    }


if __name__ == "__main__":  # python -m refimpl.env [--time]
    import json
    import sys
    import time

    if "--time" in sys.argv:
        from torch.utils import collect_env as _ce
        for label, fn in (("torch get_env_info()", _ce.get_env_info),
                          ("refimpl.env.collect_env()", collect_env)):
            t0 = time.perf_counter()
            fn()
            print(f"{label}: {time.perf_counter() - t0:.2f} s")
    else:
        print(json.dumps(collect_env(), indent=2))
