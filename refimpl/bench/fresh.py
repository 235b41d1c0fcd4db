"""Fresh-process runs of the benchmarks: every measured repeat of ``startup``, ``budget`` and
``throughput`` runs in a NEW Python process (:func:`run_in_fresh_process`), so import caches,
allocator state, ``lru_cache`` and the processing cache cannot leak from one repeat into the
next (start-up in particular is only meaningful cold). The child is ``refimpl.bench.worker``:
it ends with the process that started it (:func:`die_with_parent`), and a refimpl error it
raises comes back to the parent as itself (:func:`refimpl_error_record` /
:func:`refimpl_error_from_record`, exit status REFIMPL_ERROR_EXIT); any other failure is a
:class:`FreshProcessError` carrying the child's output tail.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any, Optional, Sequence

from refimpl.bench.common import _json_default


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
