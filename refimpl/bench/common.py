"""Measurement harness shared by every benchmark module under ``refimpl/bench``.

Conventions, taken from vLLM's ``benchmarks/`` folder (``benchmark_latency.py``,
``benchmark_throughput.py``, ...):

* one module per question (``startup``, ``budget``, ``throughput``), each a ``main(argv)``
  that ends by writing one JSON document to ``--output-json PATH``;
* every measured repeat runs in a NEW Python process (``refimpl/bench/fresh.py``), so
  import caches, allocator state, ``lru_cache`` and the processing cache cannot leak from
  one repeat into the next - start-up in particular is only meaningful cold;
* variants are interleaved (A B A B ..., :func:`interleaved`) so slow drift of a shared
  machine (thermal, other tenants) spreads over all variants instead of biasing one;
* results are reported as median / min / max / IQR over the repeats (``refimpl.stats``);
  no means of a handful of noisy samples, no timing claims beyond what was measured.

From gpt-fast the habit of naming, next to every number, the hardware, the batch size and
the sequence lengths it was measured with: ``refimpl.env.collect_env`` records the machine
and the library versions; the bench modules print them beside every median.

Also here: :func:`set_single_thread` (CPU runs on one thread: the development machine has
two cores shared by several people) and :func:`profile_with_pyspy` (flame graph + speedscope
profile of a fresh-process command; never fatal). The driver that interleaves variants and
writes partial results on Ctrl-C is ``refimpl/bench/orchestrate.py``; every bench's typed
spec derives its flags from ``refimpl/bench/cli_spec.py``.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from refimpl.env import THREAD_ENV_VARS


def slug(text: str) -> str:
    """Lower-case ``text`` with runs of other characters than [a-z0-9.] turned into '-'."""
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-") or "unknown"


# --------------------------------------------------------------------------- threads

def set_single_thread() -> int:
    """Pin CPU math to one thread; returns ``torch.get_num_threads()`` afterwards (1).

    Sets OMP_NUM_THREADS, MKL_NUM_THREADS, OPENBLAS_NUM_THREADS, NUMEXPR_NUM_THREADS and
    VECLIB_MAXIMUM_THREADS to "1" (these only take effect for libraries not yet imported -
    call this before importing torch/numpy where it matters; child processes inherit them),
    then ``torch.set_num_threads(1)`` and, when torch still allows it,
    ``torch.set_num_interop_threads(1)``. It does not limit CUDA kernels.
    """
    for k in THREAD_ENV_VARS:
        os.environ[k] = "1"
    import torch

    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # only allowed before the first inter-op parallel work
        pass
    return torch.get_num_threads()


# --------------------------------------------------------------------------- running

def interleaved(variants: Sequence[Any], repeats: int) -> list[Any]:
    """The run order: every variant once per round, ``repeats`` rounds (A B A B ... / A B C A B C).

    Returns a list of ``len(variants) * repeats`` variants. Raises ValueError if
    ``repeats < 0``, ``variants`` is empty or has duplicates.
    """
    variants = list(variants)
    if repeats < 0:
        raise ValueError(f"repeats must be >= 0, got {repeats}")
    if not variants:
        raise ValueError("no variants given")
    if len(set(map(repr, variants))) != len(variants):
        raise ValueError(f"duplicate variants in {variants}")
    return [v for _ in range(repeats) for v in variants]


def _json_default(o: Any) -> Any:
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    if dataclasses.is_dataclass(o) and not isinstance(o, type):
        return dataclasses.asdict(o)
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


OUTPUT_JSON_LIMIT = ("a writable file path: not a folder, in a folder that exists (or can be "
                     "created) and that this user can write")


def check_output_json(path: str | os.PathLike) -> Path:
    """Refuse, before anything runs, a ``--output-json`` path that :func:`write_json` could not
    write at the end. Returns ``Path(path)``.

    The path must not be an existing folder (nor any other non-file, e.g. a device); its
    nearest existing ancestor folder must take a new file: a temporary file is created there
    and removed at once (``os.access`` would not do: root passes it even on /proc). A missing
    parent folder is fine when it can be created there, as ``write_json`` creates it; nothing
    is created now. Raises ConfigError("output_json", OUTPUT_JSON_LIMIT, why).
    """
    from refimpl.errors import ConfigError
    path = Path(path)
    if path.exists() and not path.is_file():
        raise ConfigError("output_json", OUTPUT_JSON_LIMIT,
                          f"{str(path)!r} is {'a folder' if path.is_dir() else 'not a regular file'}")
    folder = path.absolute().parent
    while not folder.exists():
        folder = folder.parent
    if not folder.is_dir():
        raise ConfigError("output_json", OUTPUT_JSON_LIMIT, f"{str(folder)!r} is not a folder")
    try:
        fd, probe = tempfile.mkstemp(prefix=f".{path.name}.", dir=folder)
    except OSError as e:
        raise ConfigError("output_json", OUTPUT_JSON_LIMIT,
                          f"cannot write in {str(folder)!r}: {e.strerror}") from None
    os.close(fd)
    os.unlink(probe)
    return path


def write_json(path: str | os.PathLike, obj: Any) -> Path:
    """Write ``obj`` as indented JSON to ``path`` atomically (temp file + rename).

    Creates missing parent folders; numpy scalars/arrays, Paths, dataclasses and sets are
    converted. Returns the path. Raises TypeError for other unserialisable objects (the
    target file is then left untouched), OSError if the folder cannot be written.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(obj, f, indent=2, default=_json_default, allow_nan=True)
            f.write("\n")
        os.chmod(tmp, 0o644)  # mkstemp makes it private; results are for everyone to read
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


# --------------------------------------------------------------------------- profiling

def profile_with_pyspy(cmd: Sequence[str], out_svg: Optional[str | os.PathLike],
                       out_speedscope: Optional[str | os.PathLike], *, rate: int = 100,
                       subprocesses: bool = True, nonblocking: bool = False,
                       timeout_s: Optional[float] = None) -> bool:
    """Profile a fresh-process command with ``py-spy record``; True if every profile was written.

    ``cmd`` is the full command (e.g. ``[sys.executable, "-m", "refimpl.cli", "bench", ...]``).
    py-spy writes one format per recording, so the command runs once per requested output:
    ``--format flamegraph`` to ``out_svg`` and ``--format speedscope`` to ``out_speedscope``
    (pass None to skip one). ``rate`` is samples per second, ``subprocesses`` follows child
    processes, ``nonblocking`` samples without pausing the target (less overhead, less
    exact). ``timeout_s`` (seconds) bounds each recording.

    Never raises for a profiling failure (py-spy missing, ptrace not permitted - it needs
    root or CAP_SYS_PTRACE -, the command failing, a timeout): it prints a one-line warning to
    stderr and returns False, so a report can go on without flame graphs. KeyboardInterrupt
    propagates.
    """
    pyspy = shutil.which("py-spy") or (str(Path(sys.executable).with_name("py-spy"))
                                       if Path(sys.executable).with_name("py-spy").exists() else None)
    if not pyspy:
        print("warning: py-spy not found; no profile written", file=sys.stderr)
        return False
    jobs = [(fmt, Path(p)) for fmt, p in (("flamegraph", out_svg), ("speedscope", out_speedscope))
            if p is not None]
    ok = True
    for fmt, out in jobs:
        out.parent.mkdir(parents=True, exist_ok=True)
        if out.exists():
            out.unlink()
        rec = [pyspy, "record", "--format", fmt, "--output", str(out), "--rate", str(rate)]
        if subprocesses:
            rec.append("--subprocesses")
        if nonblocking:
            rec.append("--nonblocking")
        rec += ["--", *map(str, cmd)]
        try:
            proc = subprocess.run(rec, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            print(f"warning: py-spy ({fmt}) ran past {timeout_s} s; no profile", file=sys.stderr)
            ok = False
            continue
        except OSError as e:
            print(f"warning: py-spy could not start: {e}", file=sys.stderr)
            return False
        if proc.returncode != 0 or not out.exists() or out.stat().st_size == 0:
            msg = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
            print(f"warning: py-spy ({fmt}) failed (exit {proc.returncode}): {msg}",
                  file=sys.stderr)
            ok = False
    return ok and bool(jobs)
