"""Measurement harness shared by every benchmark module under ``refimpl/bench``.

Conventions, taken from vLLM's ``benchmarks/`` folder (``benchmark_latency.py``,
``benchmark_throughput.py``, ...):

* one module per question (``startup``, ``budget``, ``throughput``), each a ``main(argv)``
  that ends by writing one JSON document to ``--output-json PATH``;
* every measured repeat runs in a NEW Python process (:func:`run_in_fresh_process`), so
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
import time
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from refimpl.env import THREAD_ENV_VARS


class FreshProcessError(RuntimeError):
    """A fresh-process benchmark run failed: non-zero exit, or no / invalid JSON written.

    ``returncode`` (int or None) and ``output_tail`` (last lines of stdout+stderr) help to
    see why without rerunning.
    """

    def __init__(self, message: str, returncode: Optional[int] = None, output_tail: str = ""):
        super().__init__(message + (f"\n--- output tail ---\n{output_tail}" if output_tail else ""))
        self.returncode = returncode
        self.output_tail = output_tail


# A worker that raised one of refimpl's errors (refimpl.errors.RefimplError) exits with this
# status after writing {"refimpl_error": refimpl_error_record(e)} to its --output-json; the
# parent raises the error again (run_in_fresh_process). Any other non-zero exit is a crash.
REFIMPL_ERROR_EXIT = 3


def refimpl_error_record(e: Any) -> dict[str, Any]:
    """A RefimplError as JSON: its class (``type``, ``module``), ``field``, ``limit`` (as is
    when JSON can hold it, else its repr) and ``message``."""
    try:
        limit = json.loads(json.dumps(e.limit, default=_json_default))
    except (TypeError, ValueError):
        limit = repr(e.limit)
    return {"type": type(e).__name__, "module": type(e).__module__, "field": e.field,
            "limit": limit, "message": e.message}


def refimpl_error_from_record(rec: dict[str, Any]) -> Exception:
    """The exception of :func:`refimpl_error_record`: the same class when it is a RefimplError
    of a refimpl module, else a RefimplError, with the same field, limit and message."""
    import importlib

    from refimpl.errors import RefimplError
    cls: Any = RefimplError
    if str(rec.get("module", "")).split(".")[0] == "refimpl":
        found = getattr(importlib.import_module(rec["module"]), rec["type"], None)
        if isinstance(found, type) and issubclass(found, RefimplError):
            cls = found
    try:
        return cls(rec["field"], rec["limit"], rec["message"])
    except TypeError:  # a subclass with another signature
        return RefimplError(rec["field"], rec["limit"], rec["message"])


PARENT_PID_ENV = "REFIMPL_PARENT_PID"


def die_with_parent() -> None:
    """Make this fresh-process child end (SIGTERM) when the process that started it ends, even
    killed (SIGTERM / SIGKILL of ``refimpl report``, a notebook kernel exiting): Linux's
    ``prctl(PR_SET_PDEATHSIG)``, called first thing by refimpl.bench.worker. If that parent
    (``REFIMPL_PARENT_PID``, set by :func:`run_in_fresh_process`) is already gone, exits at
    once. A no-op off Linux or outside run_in_fresh_process."""
    import ctypes
    import signal
    parent = os.environ.pop(PARENT_PID_ENV, None)  # not for this child's own children
    if not sys.platform.startswith("linux") or not parent:
        return
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG
    if os.getppid() != int(parent):  # it ended before the prctl: nobody waits for this run
        os._exit(1)


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

def run_in_fresh_process(module: str, args: Sequence[str], timeout_s: Optional[float] = None,
                         *, env: Optional[dict[str, str]] = None,
                         python: Optional[str] = None) -> dict[str, Any]:
    """Run ``python -m <module> <args> --output-json <tmp>`` in a NEW process; return its JSON.

    The child uses this interpreter (``sys.executable``) unless ``python`` names another,
    inherits the environment updated with ``env`` and ``REFIMPL_PARENT_PID`` (a child that
    calls :func:`die_with_parent` ends with this process), and its stdout/stderr are
    captured (the tail is shown on failure). ``timeout_s`` (seconds, None = no limit) bounds the child's
    wall time. The returned dict is the child's JSON plus a key ``"_fresh_process"`` with
    ``wall_s`` (seconds, parent-side, includes interpreter start and imports) and ``cmd``.

    Raises the refimpl error the child raised (same class, field, limit and message) when it
    exits with REFIMPL_ERROR_EXIT after writing ``{"refimpl_error": record}``
    (refimpl.bench.worker does), FreshProcessError if the child exits non-zero otherwise or
    writes no valid JSON object, TimeoutError if it runs past ``timeout_s`` (the child is
    killed). On KeyboardInterrupt
    the child is killed and the interrupt re-raised.
    """
    fd, tmp = tempfile.mkstemp(prefix="refimpl-bench-", suffix=".json")
    os.close(fd)
    os.unlink(tmp)  # the child must create it: an empty leftover must not parse as success
    cmd = [python or sys.executable, "-m", module, *map(str, args), "--output-json", tmp]
    child_env = {**os.environ, **(env or {}), PARENT_PID_ENV: str(os.getpid())}
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s,
                              env=child_env, cwd=os.getcwd())
        wall = time.perf_counter() - t0
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-30:])
        if proc.returncode == REFIMPL_ERROR_EXIT and os.path.exists(tmp):
            try:
                with open(tmp) as f:
                    rec = json.load(f)["refimpl_error"]
            except (OSError, ValueError, KeyError, TypeError):
                rec = None
            if rec is not None:
                raise refimpl_error_from_record(rec)
        if proc.returncode != 0:
            raise FreshProcessError(f"{module} exited with code {proc.returncode}",
                                    proc.returncode, tail)
        try:
            with open(tmp) as f:
                result = json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            raise FreshProcessError(f"{module} wrote no valid JSON to --output-json ({e})",
                                    proc.returncode, tail) from None
        if not isinstance(result, dict):
            raise FreshProcessError(f"{module} wrote {type(result).__name__}, not a JSON object",
                                    proc.returncode, tail)
    except subprocess.TimeoutExpired as e:
        raise TimeoutError(f"{module} ran past {timeout_s} s and was killed") from e
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    result["_fresh_process"] = {"wall_s": wall, "cmd": cmd}
    return result


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
