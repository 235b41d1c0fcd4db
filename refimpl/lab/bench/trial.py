"""The one trial loop of every bench: an untimed warm-up per label, then ``repeats`` rounds (A B A B
or whole A B B A rounds) while ``budget_s`` holds and the bench's stop rule (its module's ``enough``,
if any: serve's precision stop) does not end it, run by an executor; Ctrl-C and a failing step
end it here only, with the Result of what finished (``params.interrupted`` / ``params.failed``)."""
from __future__ import annotations

import datetime as _dt
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

from tqdm import tqdm

from refimpl.errors import RefimplError
from refimpl.lab.bench import guard
from refimpl.lab.bench.fresh import WORKER, bench_module, run_in_fresh_process
from refimpl.lab.bench.schema import Result
from refimpl.lab.bench.specs import Spec, spec_to_json

__all__ = ["TIMEOUT_S", "Step", "Trial", "steps", "executor", "run", "exit_status", "default_out"]

TIMEOUT_S = 1800.0  # per fresh process


@dataclass(frozen=True)
class Step:
    label: str
    round: Optional[int]  # None: the untimed warm-up
    rounds: Optional[int] = None

    def __str__(self) -> str:
        if self.round is None:
            return f"{self.label} warm-up"
        return f"{self.label} repeat {self.round + 1}/{self.rounds}" if self.rounds else f"{self.label} round {self.round + 1}"


@dataclass
class Trial:
    """What finished: ``runs`` per label, seconds of timed steps, and why it stopped early."""
    runs: dict[str, list[dict]]
    timed_s: float = 0.0
    interrupted: bool = False
    failed: Optional[str] = None
    refimpl_error: bool = False
    stopped_early: Optional[str] = None  # why the bench's own stop rule ended it (serve.enough)

    @property
    def stop(self) -> dict[str, Any]:
        """The Result's ``interrupted`` / ``failed`` params (``refimpl_error`` on a failure,
        ``stopped_early`` when the bench's stop rule ended the trial)."""
        return {"interrupted": self.interrupted, "failed": self.failed} | (
            {"refimpl_error": True} if self.refimpl_error else {}) | (
            {"stopped_early": self.stopped_early} if self.stopped_early else {})


def steps(labels: tuple[str, ...], repeats: int, warmup: bool, abba: bool = False,
          budget_s: Optional[float] = None, clock: Callable[[], float] = time.perf_counter) -> Iterator[Step]:
    if warmup:
        yield from (Step(label, None) for label in labels)
    t0 = None
    for r in range(repeats):
        if budget_s is not None and r and (clock() - t0) * (r + 1) / r > budget_s:  # type: ignore[operator]
            return
        t0 = t0 or clock()
        for label in labels if not abba or r % 2 == 0 else labels[::-1]:
            yield Step(label, r, None if budget_s is not None else repeats)


def executor(spec: Spec, in_process: bool) -> Callable[[Step], dict]:
    """Fresh processes (the fresh designs), ``run_once`` here, or the bench's own ``executor`` (the A B B A
    designs, whose engines live across steps: serve.Servers)."""
    module = bench_module(spec)
    if not spec.fresh and spec.abba:
        return module.executor(spec)
    run_once, spec_json = module.run_once, spec_to_json(spec)

    def one(step: Step) -> dict:
        guard.wait_for_memory(spec, step.label)  # others may hold memory now
        if in_process or not spec.fresh:
            return run_once(spec, step.label)
        return run_in_fresh_process(WORKER, ["--spec", spec_json, "--variant", step.label], TIMEOUT_S,
                                    env=spec.worker_env())
    return one


def run(spec: Spec, *, in_process: bool = False, out: Optional[str | os.PathLike] = None,
        check: bool = False) -> Result:
    """Measure ``spec``, write the Result to ``out``; partial on Ctrl-C or failure (``check``: raise)."""
    guard.check(spec, out, in_process)
    spec = spec.resolve()
    trial, now, t0 = Trial({label: [] for label in spec.labels}), "set-up", None
    order = list(steps(spec.labels, spec.repeats or 1, spec.warmup, spec.abba)) if spec.budget_s is None else None
    bar = tqdm(total=len(order) if order else None, desc=spec.bench, file=sys.stderr, mininterval=0, miniters=1)
    close: list[Callable[[], None]] = []  # an executor that holds something (serve.Servers: the thread's CPUs)
    enough = getattr(bench_module(spec), "enough", None)  # the bench's stop rule: runs -> why, or None
    try:
        one = executor(spec, in_process)
        close += [c] if (c := getattr(one, "close", None)) else []
        for step in order or steps(spec.labels, spec.repeats or 1, spec.warmup, spec.abba, spec.budget_s):
            now = str(step)
            bar.set_postfix_str(f"running {now}")
            t0 = t0 or (time.perf_counter() if step.round is not None else None)
            rec = one(step)
            if step.round is not None:
                trial.runs[step.label].append(rec)
            bar.update()
            if step.round is not None and enough and (why := enough(spec, trial.runs)):
                trial.stopped_early = why
                break
    except KeyboardInterrupt:
        trial.interrupted = True
        print("interrupted: keeping the runs finished so far", file=sys.stderr)
    except Exception as e:
        trial.failed, trial.refimpl_error = f"{now}: {type(e).__name__}: {e}", isinstance(e, RefimplError)
    finally:
        bar.close()
        for c in close:
            c()
    trial.timed_s = time.perf_counter() - t0 if t0 else 0.0
    if spec.abba:  # whole rounds only
        n = min(len(rs) for rs in trial.runs.values())
        trial.runs = {k: rs[:n] for k, rs in trial.runs.items()}
    res = bench_module(spec).result(spec, trial, in_process)
    if out is not None:
        res.write(out)
    if check and trial.failed:
        raise RuntimeError(f"{spec.bench} failed: {trial.failed}")
    return res


def exit_status(res: Result) -> int:
    """0; 130 after Ctrl-C; a failed run: 2 for a refimpl error, else 1."""
    p = res.params
    return 130 if p.get("interrupted") else (2 if p.get("refimpl_error") else 1) if p.get("failed") else 0


def default_out(spec: Spec) -> Path:
    """reports/<bench>_<model>_<UTC time>.json"""
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return Path("reports") / f"{spec.bench}_{spec.resolve().model}_{now}.json"
