"""Shared by the probes: the environment record, a timer and a variant in the one schema."""
from __future__ import annotations

import time
from typing import Any, Callable, Iterable

import psutil

from refimpl.errors import InsufficientMemoryError
from refimpl.lab.bench.schema import Result
from refimpl.lab.env import collect_env
from refimpl.lab.probes.specs import ProbeSpec
from refimpl.lab.stats import summarize

__all__ = ["timed", "variant", "result", "check_fits"]


def timed(fn: Callable[[], Any], n: int) -> list[float]:
    """Seconds of ``n`` calls of ``fn``, after one untimed call."""
    fn()
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def variant(runs: list[dict[str, Any]], metrics: Iterable[str], **numbers: Any) -> dict[str, Any]:
    """``{"runs", "summary"}``: ``summarize`` of each metric over the runs, and ``numbers`` as they are."""
    return {"runs": runs, "summary": {**{m: summarize([r[m] for r in runs]) for m in metrics}, **numbers}}


def result(spec: ProbeSpec, variants: dict[str, dict[str, Any]], /, *, in_process: bool = True,
           **params: Any) -> Result:
    """The probe's Result: ``bench`` its name, ``params`` its fields and ``params`` given, the env of this
    machine on the CPU (``in_process``: False where every run was a fresh process)."""
    env = {**collect_env(), "device": "cpu", "in_process": in_process}
    return Result(spec.name, env, {**spec.params(), **params}, variants)


def check_fits(field: str, need: int, what: str) -> None:
    """InsufficientMemoryError naming ``field`` when ``need`` bytes (``what``) exceed available memory
    (psutil's now): a probe's refusal before it allocates."""
    avail = psutil.virtual_memory().available
    if need > avail:
        raise InsufficientMemoryError(field, avail, f"{what}: {need / 2**30:.1f} GiB; {avail / 2**30:.1f} GiB available")
