"""The drivers that turn a fresh-process bench's spec into a Result.

Each benchmark module (``startup``, ``budget``, ``throughput``) defines a frozen spec (a
``BenchSpec`` subclass whose fields are its CLI flags; BenchSpec subclasses
``refimpl.bench.cli_spec.CliSpec``, so the flags, ``command()``, ``from_params`` and the
limit checks come from the field declarations, as for the in-process benches),
``run_once(spec, variant) -> run`` (one measured run in this process), ``preflight(spec)``
(checks before any run, e.g. memory), ``summarize_runs(runs)``, ``headline(result, variant)``
and ``run(spec) -> Result``.

* :func:`run_in_process` (what each module's ``run`` calls): an untimed warm-up per variant
  unless ``spec.warmup`` is False, then ``spec.repeats`` rounds with the variants interleaved
  (A B A B ...), all in this process - smoke / notebook QUICK figures only. ``preflight``
  runs once for the whole spec (refusing at once) and again before every run (memory others
  hold changes: it waits up to ``spec.memory_wait_s`` for memory, then refuses).
* :func:`run_fresh`: the same order, each run a NEW Python process
  (``python -m refimpl.bench.worker --spec JSON --variant V --output-json PATH``), so import
  caches, allocator state and the processing cache cannot leak between repeats. The spec
  travels as JSON, the run comes back as JSON.

Follows vLLM's ``benchmarks/`` conventions (one module per question, ``--output-json``) and
gpt-fast's typed entry point and naming of hardware and sizes (``env`` of every result).
"""
from __future__ import annotations

import dataclasses
import sys
import time
from typing import Callable, Optional

from tqdm import tqdm

from refimpl.bench.bench_spec import BenchSpec, bench_module
from refimpl.bench.common import interleaved
from refimpl.bench.fresh import run_in_fresh_process
from refimpl.bench.schema import Result
from refimpl.env import collect_env


def _progress(order: list[str], desc: str, label: Callable[[str], str]):
    """Yield ``order`` under a plain tqdm bar on stderr, one line per run: runs done of all,
    elapsed<left, and ``label(v)`` of the run now in progress (no throttling: runs take
    seconds). ``refimpl report`` forwards a notebook kernel's stderr to the terminal, so
    these lines show there too."""
    if not order:
        return
    with tqdm(total=len(order), desc=desc, file=sys.stderr, mininterval=0, miniters=1,
              postfix=label(order[0])) as bar:
        for i, v in enumerate(order):
            yield v
            if i + 1 < len(order):
                bar.set_postfix_str(label(order[i + 1]), refresh=False)
                bar.update(1)
            else:  # no refresh: closing the bar prints the last line once, with the overall rate
                bar.set_postfix_str("done", refresh=False)
                bar.n += 1


def _measure(spec: BenchSpec, one: Callable[[str], dict], in_process: bool) -> Result:
    """Warm-up then the interleaved runs of ``spec``, each through ``one(variant)``; nothing
    finished is lost when a run does not finish. Ctrl-C (KeyboardInterrupt) returns the runs
    finished so far with ``params["interrupted"]`` True. Any other exception of a run
    (TimeoutError, FreshProcessError, a refimpl error from a worker...) propagates with the
    Result of the runs finished before it as ``e.partial_result`` (see :func:`partial_result`),
    ``params["failed"]`` naming the run and the error."""
    mod = bench_module(spec.bench)
    mod.preflight(spec)  # e.g. refuse now rather than be OOM-killed hours later

    def checked(v: str) -> dict:  # memory is checked again before each run: others may hold it now
        wait_for_memory(lambda: mod.preflight(spec.replace(variants=(v,))), spec.memory_wait_s)
        return one(v)

    runs: dict[str, list[dict]] = {v: [] for v in spec.variants}
    name, now = spec.bench, ""
    try:
        if spec.warmup:
            for v in _progress(list(spec.variants), f"{name} warm-up",
                               lambda v: f"running {v} (untimed)"):
                now = f"{v} warm-up"
                checked(v)
        for v in _progress(interleaved(spec.variants, spec.repeats), name,
                           lambda v: f"running {v} repeat {len(runs[v]) + 1}/{spec.repeats}"):
            now = f"{v} repeat {len(runs[v]) + 1}/{spec.repeats}"
            runs[v].append(checked(v))
    except KeyboardInterrupt:
        print("interrupted: keeping the runs finished so far", file=sys.stderr)
        return build_result(spec, runs, in_process, interrupted=True)
    except Exception as e:
        e.partial_result = build_result(  # type: ignore[attr-defined]
            spec, runs, in_process, failed=f"{now}: {type(e).__name__}: {e}")
        raise
    return build_result(spec, runs, in_process)


def failed_run_status(e: Exception, prog: str, output_json: Optional[str], kept: str = "runs") -> int:
    """What a bench's CLI does when a run raised ``e``: write the partial Result it carries
    (:func:`partial_result`) to ``output_json``, print one line naming the failure and how many
    finished ``kept`` ("runs", or "rounds" for the paired bench) it holds, and return the exit
    status: 2 for a refimpl error, else 1. Re-raises ``e`` when it carries no partial Result."""
    from refimpl.errors import RefimplError
    part = partial_result(e)
    if part is None:
        raise e
    if output_json:
        part.write(output_json)
    n = part.params["rounds_run"] if kept == "rounds" else sum(len(v["runs"]) for v in part.variants.values())
    print(f"{prog}: error: {part.params['failed'].splitlines()[0]} (kept the {n} finished {kept}"
          f"{f' in {output_json}' if output_json else ''})", file=sys.stderr)
    return 2 if isinstance(e, RefimplError) else 1


def partial_result(e: BaseException) -> Optional[Result]:
    """The Result of the runs that finished before the run that raised ``e`` (``params["failed"]``
    names that run and the error), or None when ``e`` did not come from a run of a bench."""
    return getattr(e, "partial_result", None)


def wait_for_memory(check: Callable[[], None], wait_s: float, poll_s: float = 5.0) -> None:
    """Call ``check`` (a preflight) until it passes, for up to ``wait_s`` seconds while it
    raises InsufficientMemoryError (memory another process holds may come back), then let
    the last InsufficientMemoryError propagate. Other exceptions propagate at once."""
    from refimpl.errors import InsufficientMemoryError
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return check()
        except InsufficientMemoryError as e:
            if time.monotonic() + poll_s > deadline:
                raise
            print(f"waiting for memory ({e})", file=sys.stderr)
            time.sleep(poll_s)


def build_result(spec: BenchSpec, runs: dict[str, list[dict]], in_process: bool, *,
                 interrupted: bool = False, failed: Optional[str] = None) -> Result:
    """The schema's Result of ``runs`` ({variant: [run, ...]}) measured for ``spec``. Its
    ``params`` are the spec's fields plus ``interrupted`` (Ctrl-C ended the runs early, as in
    the paired bench) and ``failed`` (None, or "<run>: <error type>: <message>" of the run
    that failed): either one marks a partial result, whose variants keep the runs that
    finished (``missing: ["runs"]`` when a variant has none)."""
    from refimpl.config import resolve_device
    mod = bench_module(spec.bench)
    env = collect_env()
    threads = [r["torch_num_threads"] for rs in runs.values() for r in rs if "torch_num_threads" in r]
    if threads:  # what the measured processes ran with, not this parent
        env["torch_num_threads"] = threads[0]
    env["device"] = next((r["device"] for rs in runs.values() for r in rs if "device" in r),
                         resolve_device(spec.device))
    env["in_process"] = in_process
    thp = next((r["thp"] for rs in runs.values() for r in rs if "thp" in r), None)
    if thp is not None:  # huge pages as the measured processes saw them
        env["thp"] = thp
    variants = {v: {"runs": rs, "summary": mod.summarize_runs(rs) if rs else {}}
                for v, rs in runs.items()}
    missing = ["runs"] if not all(runs.values()) else []
    return Result(spec.bench, env, {"variants": list(spec.variants), **{
        k: v for k, v in dataclasses.asdict(spec).items() if k != "variants"},
        "interrupted": interrupted, "failed": failed}, variants,
        missing=missing)


def run_in_process(spec: BenchSpec) -> Result:
    """Every variant of ``spec`` measured in this process (smoke / QUICK figures). Ctrl-C and
    a failing run keep the runs finished so far, as in :func:`run_fresh`."""
    mod = bench_module(spec.bench)
    return _measure(spec, lambda v: mod.run_once(spec, v), in_process=True)


def run_fresh(spec: BenchSpec, *, env: Optional[dict[str, str]] = None) -> Result:
    """Every variant of ``spec`` measured in fresh processes (the figures for tables); each
    worker's environment is this one updated with ``spec.worker_env()``, then ``env``.

    Nothing finished is lost. Ctrl-C (KeyboardInterrupt) returns the runs finished so far,
    ``params["interrupted"]`` True. A run that fails raises as it failed - TimeoutError (the
    worker ran past ``spec.timeout_s``), FreshProcessError (refimpl.bench.fresh: the worker
    crashed), the refimpl error a worker raised (e.g. ConfigError, same type, field and
    limit), InsufficientMemoryError (memory stayed short for ``spec.memory_wait_s``) - with
    the Result of the runs finished before it attached: ``partial_result(e)``, whose
    ``params["failed"]`` names the run and the error. A complete Result has
    ``params["interrupted"]`` False and ``params["failed"]`` None.
    """
    spec_json = spec.to_json()
    child_env = {**spec.worker_env(), **(env or {})}
    return _measure(spec, lambda v: run_in_fresh_process(
        "refimpl.bench.worker", ["--spec", spec_json, "--variant", v],
        timeout_s=spec.timeout_s, env=child_env), in_process=False)


def cli_main(spec_class: type[BenchSpec], argv: Optional[list[str]]) -> int:
    """``refimpl bench <spec_class.bench>``: parse ``argv`` into the spec, measure it as the
    flags ask (fresh processes unless --in-process), write the JSON, print one line per
    variant with the module's ``headline(result, variant)``. Raises ConfigError, before
    anything runs, for a value out of its limits, a device absent here or an
    ``--output-json`` that could not be written (``CliSpec.parse``; argparse exits 2 on a
    malformed flag), InsufficientMemoryError from the preflight.

    Returns the exit status: 0; 130 after Ctrl-C (the runs finished so far are written,
    ``params["interrupted"]`` True); when a run fails, its finished runs are written
    (``params["failed"]``), one line names the failure on stderr and the status is 2 for a
    refimpl error (bad setting, memory: as before the runs), else 1."""
    spec, options = spec_class.parse(argv)
    try:
        res = run_in_process(spec) if options.in_process else run_fresh(spec)
    except Exception as e:
        return failed_run_status(e, spec.prog, options.output_json)
    res.write(options.output_json)
    mod = bench_module(spec.bench)
    for v in res.variants:
        if not res.runs(v):
            print(f"{spec.bench} {v}: no finished run")
            continue
        print(f"{spec.bench} {v}: {mod.headline(res, v)} on {res.env['device']} ({res.hardware_name})")
    return 130 if res.params["interrupted"] else 0
