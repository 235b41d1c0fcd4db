"""Fresh-process runs: ``python -m refimpl.lab.bench.fresh --spec JSON --variant V --output-json F``.
A worker's refimpl error is raised again in the parent; any other failure is a FreshProcessError."""
from __future__ import annotations

import base64
import ctypes
import importlib
import json
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from refimpl.errors import RefimplError
from refimpl.lab.bench.common import profile_with_pyspy, write_json
from refimpl.lab.bench.specs import Spec, spec_from_json, spec_to_json
from refimpl.lab.cli_errors import flags, refuse

__all__ = ["REFIMPL_ERROR_EXIT", "FreshProcessError", "run_in_fresh_process", "worker_command",
           "profile_worker", "LAUNCH_ENV", "process_overhead"]

REFIMPL_ERROR_EXIT = 3
PARENT_PID_ENV = "REFIMPL_PARENT_PID"
LAUNCH_ENV = "REFIMPL_LAUNCH_TIME"  # the parent's time.time() just before it starts the child
MODULES = {"startup": "refimpl.lab.bench.startup", "serve": "refimpl.lab.bench.serve", "wer": "refimpl.lab.bench.wer",
           "calibrate": "refimpl.lab.bench.calibrate"}
WORKER = "refimpl.lab.bench.fresh"


class FreshProcessError(RuntimeError):
    """A fresh-process run exited non-zero or wrote no JSON object; ``returncode``, ``output_tail``."""

    def __init__(self, message: str, returncode: Optional[int] = None, output_tail: str = ""):
        super().__init__(message + (f"\n--- output tail ---\n{output_tail}" if output_tail else ""))
        self.returncode, self.output_tail = returncode, output_tail


def bench_module(spec: Spec) -> Any:
    """The module of ``spec``'s bench (imported on demand: ``startup`` needs no jiwer)."""
    return importlib.import_module(MODULES[spec.name])


def die_with_parent() -> None:
    """SIGTERM this child when its parent ends (PR_SET_PDEATHSIG, Linux only)."""
    parent = os.environ.pop(PARENT_PID_ENV, None)  # not for this child's own children
    if not sys.platform.startswith("linux") or not parent:
        return
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG
    if os.getppid() != int(parent):
        os._exit(1)


def run_in_fresh_process(module: str, args: Sequence[str], timeout_s: Optional[float] = None, *,
                         env: Optional[dict[str, str]] = None) -> dict[str, Any]:
    """``python -m <module> <args> --output-json <tmp>`` in a new process: its JSON plus ``_fresh_process``
    (``wall_s``, ``cmd``). Raises the child's refimpl error, FreshProcessError or TimeoutError."""
    fd, tmp = tempfile.mkstemp(prefix="refimpl-bench-", suffix=".json")
    os.close(fd)
    os.unlink(tmp)  # the child must create it: an empty leftover must not parse as success
    cmd = [sys.executable, "-m", module, *map(str, args), "--output-json", tmp]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=os.getcwd(),
                              env={**os.environ, **(env or {}), PARENT_PID_ENV: str(os.getpid()),
                                   LAUNCH_ENV: repr(time.time())})
        wall, tail = time.perf_counter() - t0, "\n".join((proc.stdout + proc.stderr).splitlines()[-30:])
        try:
            with open(tmp) as f:
                result = json.load(f)
        except (OSError, ValueError) as e:
            result, why = None, e
        if proc.returncode == REFIMPL_ERROR_EXIT and isinstance(result, dict) and "refimpl_error" in result:
            raise pickle.loads(base64.b64decode(result["refimpl_error"]))  # the worker's own, as it raised it
        if proc.returncode != 0:
            raise FreshProcessError(f"{module} exited with code {proc.returncode}", proc.returncode, tail)
        if not isinstance(result, dict):
            raise FreshProcessError(f"{module} wrote no JSON object to --output-json "
                                    f"({why if result is None else type(result).__name__})", proc.returncode, tail)
    except subprocess.TimeoutExpired as e:
        raise TimeoutError(f"{module} ran past {timeout_s} s and was killed") from e
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return result | {"_fresh_process": {"wall_s": wall, "cmd": cmd}}


def worker_command(spec: Spec, variant: str, output_json: str) -> list[str]:
    """The command line of one worker run (for a profiler such as py-spy to wrap)."""
    return [sys.executable, "-m", WORKER, "--spec", spec_to_json(spec), "--variant", variant,
            "--output-json", output_json]


def profile_worker(spec: Spec, variant: str, out_svg: str | os.PathLike,
                   out_speedscope: Optional[str | os.PathLike] = None, *, rate: int = 100) -> bool:
    """py-spy profiles (flame graph SVG, speedscope JSON when asked) of one fresh worker run of
    ``variant``; its run JSON beside the SVG (``<name>.run.json``). True when every profile was written,
    else False and one warning (common.profile_with_pyspy)."""
    out_json = Path(out_svg).with_suffix(".run.json")
    return profile_with_pyspy(worker_command(spec, variant, str(out_json)), out_svg, out_speedscope, rate=rate)


@dataclass(frozen=True)
class WorkerArgs:
    """One fresh-process run of a bench (the parent's trial loop starts it: run_in_fresh_process)."""
    spec: str  # the spec as JSON (specs.spec_to_json)
    variant: str  # the row to run
    output_json: str  # where the run's JSON goes


def main(argv: Optional[list[str]] = None) -> int:
    """The worker: 0; REFIMPL_ERROR_EXIT with the pickled refimpl error in --output-json; 2 on bad flags."""
    try:
        args = flags(WorkerArgs, argv, f"python -m {WORKER}")
    except RefimplError as e:
        return refuse(f"python -m {WORKER}", e)
    die_with_parent()
    launched, t_main = os.environ.pop(LAUNCH_ENV, None), time.time()
    try:
        spec = spec_from_json(args.spec)
        module, resolved = bench_module(spec), spec.resolve()
        overhead = process_overhead(launched, t_main)
        run = module.run_once(resolved, args.variant)
    except RefimplError as e:
        write_json(args.output_json, {"refimpl_error": base64.b64encode(pickle.dumps(e)).decode()})
        print(f"refimpl error: {type(e).__name__}: {e}", file=sys.stderr)
        return REFIMPL_ERROR_EXIT
    write_json(args.output_json, run | overhead)
    return 0


def process_overhead(launched: Optional[str], t_main: float) -> dict[str, Any]:
    """What a fresh run pays before its bench starts (the start-up bench: before the VllmConfig and
    ``EngineCore()``): ``process_overhead_s`` from the parent's launch (``LAUNCH_ENV``) to now, split
    into ``process_overhead.interpreter_s`` (exec, the interpreter, this module's imports, to ``main``)
    and ``process_overhead.bench_imports_s`` (the bench module's imports and the spec); wall seconds.
    {} without a launch time (a worker started by hand)."""
    if launched is None:
        return {}
    now = time.time()
    return {"process_overhead_s": now - float(launched),
            "process_overhead": {"interpreter_s": t_main - float(launched), "bench_imports_s": now - t_main}}


if __name__ == "__main__":
    raise SystemExit(main())
