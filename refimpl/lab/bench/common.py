"""Shared by the benches: one CPU thread, atomic JSON, py-spy profiles."""
from __future__ import annotations

import contextlib
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

from refimpl.lab.env import THREAD_ENV_VARS

__all__ = ["set_single_thread", "write_json", "profile_with_pyspy"]


def set_single_thread() -> int:
    """CPU math on one thread (the thread variables, torch's intra- and inter-op); torch's count.

    torch is imported here, not at the module's top: the explorer page reaches this module (through
    the calibration) and imports no torch (tests/lab/explore/test_explorer_imports.py)."""
    import torch

    for k in THREAD_ENV_VARS:
        os.environ[k] = "1"
    torch.set_num_threads(1)
    with contextlib.suppress(RuntimeError):  # only before the first inter-op parallel work
        torch.set_num_interop_threads(1)
    return torch.get_num_threads()


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


_SCALAR = r'(?:-?\d[\d.eE+-]*|-?Infinity|NaN|null|true|false|"[^"\\,\[\]{}]*")'
_FLAT_LIST = re.compile(rf"\[\n\s*({_SCALAR}(?:,\n\s*{_SCALAR})*)\n\s*\]")


def _flat_lists(text: str) -> str:
    """``json.dumps(indent=2)`` text with each list of plain scalars on one line (per-step columns)."""
    return _FLAT_LIST.sub(lambda m: "[" + ", ".join(x.strip() for x in m[1].split(",")) + "]", text)


def write_json(path: str | os.PathLike, obj: Any) -> Path:
    """Write ``obj`` as JSON atomically (numpy, Paths, dataclasses and sets converted; indented, a
    list of numbers, nulls, booleans or short strings on one line); the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = _flat_lists(json.dumps(obj, indent=2, default=_json_default, allow_nan=True))
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text + "\n")
        os.chmod(tmp, 0o644)  # mkstemp makes it private; results are for everyone to read
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def profile_with_pyspy(cmd: Sequence[str], out_svg: Optional[str | os.PathLike],
                       out_speedscope: Optional[str | os.PathLike], *, rate: int = 100,
                       timeout_s: Optional[float] = None) -> bool:
    """``py-spy record`` of ``cmd`` per format asked for (flame graph SVG, speedscope JSON); True when
    every profile was written, else one warning on stderr and False, never an exception."""
    here = Path(sys.executable).with_name("py-spy")
    pyspy = shutil.which("py-spy") or (str(here) if here.exists() else None)
    jobs = [(fmt, Path(p)) for fmt, p in (("flamegraph", out_svg), ("speedscope", out_speedscope)) if p is not None]
    for fmt, out in jobs:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.unlink(missing_ok=True)
        try:
            if not pyspy:
                raise OSError("py-spy not found")
            proc = subprocess.run([pyspy, "record", "--format", fmt, "--output", str(out), "--rate", str(rate),
                                   "--subprocesses", "--", *map(str, cmd)], capture_output=True, text=True,
                                  timeout=timeout_s)
            why = None if proc.returncode == 0 and out.exists() and out.stat().st_size else \
                f"exit {proc.returncode}: {(proc.stderr.strip().splitlines() or ['(no output)'])[-1]}"
        except (OSError, subprocess.TimeoutExpired) as e:
            why = str(e)
        if why:
            print(f"warning: py-spy ({fmt}) wrote no profile: {why}", file=sys.stderr)
            return False
    return bool(jobs)
