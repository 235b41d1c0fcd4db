"""``refimpl bench startup|serve|wer|calibrate ...`` (flags: bench/specs.py), ``refimpl bench sweep``
(bench/sweep.py), ``refimpl report`` and ``refimpl cost-check`` (explore/cost_check_cli.py)."""
from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Callable, Optional

import tyro

from refimpl.errors import RefimplError
from refimpl.lab.bench.specs import SPECS, Spec
from refimpl.lab.cli_errors import parse_or_refuse

if TYPE_CHECKING:  # the trial loop, the guard and the schema import torch / transformers: on use only
    from refimpl.lab.bench.schema import Result

USAGE = """usage: refimpl bench {startup,serve,wer,calibrate} [FLAGS]   (refimpl bench NAME --help lists them)
       refimpl bench sweep {startup,serve} --params FILE [--resume] [--dry-run]
       refimpl report [--quick] [--device auto|cpu|cuda] [-p NAME=VALUE ...]
       refimpl report --summary-of results/<hardware>   (rewrite its summary.md from its JSON)
       refimpl conform --vllm X | --vllm-python PATH [--row ROW] [--keep] [--quick]
       refimpl cost-check [--calibration PATH] [--quiet-only] | --same-day CALIBRATION LADDER ...
       refimpl probe NAME [FLAGS]   (refimpl probe --help lists them: refimpl/lab/probes/)

  bench startup   engine start-up per phase and variant (PR #17935); --calls N: the budget experiment
  bench serve     Whisper serving (PRs #24866 / #24989); --design fresh | workload | paired
  bench wer       word error rate of the real whisper-tiny.en weights on the speech clips
  bench calibrate the start-up cost model's rates on this machine (goal 90 s)
                  -> results/<hardware>/calibration.json
  bench sweep     a campaign: runs of bench startup|serve from a file of spec overrides
                  (benchmarks/*.toml), one experiment folder, --resume
  report          run every notebook headless and write reports/latest/
  conform         real vLLM's profiling code against the rows (docs/conformance.md)
  cost-check      the start-up cost model's predictions against measured Results (docs/cost-model.md)
Variants and what vLLM release or PR each reproduces: refimpl/variants.py."""


OUT = Annotated[Optional[str], tyro.conf.arg(help="where to write the Result", help_behavior_hint=(
    "(default: reports/<bench>_<model>_<UTC time>.json; calibrate: results/<hardware>/calibration.json)"))]
IN_PROCESS = Annotated[bool, tyro.conf.arg(help="every run in this process: smoke figures, not fresh-process ones")]


def _shown(module: str, name: str) -> Callable[["Result"], str]:
    """A study's function, imported when a Result is shown: the studies import matplotlib and
    torch, which ``refimpl bench calibrate`` and the other benches' parents need only to print."""
    return lambda r: getattr(importlib.import_module(f"refimpl.lab.{module}"), name)(r)


SHOWN: dict[str, Callable[["Result"], str]] = {  # a bench's Result as notebooks and summary.md show it
    "startup": _shown("studies.startup", "summary_md"), "budget": _shown("studies.startup", "budget_md"),
    "throughput": _shown("studies.throughput", "summary_md"), "paired": _shown("studies.throughput", "paired_md"),
    "workload": _shown("studies.serving_tables", "workload_md"), "wer": _shown("studies.serving_tables", "wer_table"),
    "calibrate": lambda r: "\n".join(importlib.import_module("refimpl.lab.bench.calibrate").lines(r))}


def _entry(cls: type[Spec]):
    def bench(spec, output_json=None, in_process=False):
        return spec, output_json, in_process
    bench.__annotations__ = {"spec": Annotated[cls, tyro.conf.arg(name="")], "output_json": OUT,  # flat flags
                             "in_process": IN_PROCESS if cls.fresh else tyro.conf.Suppress[bool]}
    bench.__doc__ = cls.__doc__
    return bench


def parse(argv: list[str]) -> tuple[Spec, Optional[str], bool]:
    """(spec, output_json, in_process) of ``refimpl bench`` flags. Raises ConfigError naming the field
    for a malformed one (tyro's panel as one line, ``cli_errors.one_line``); ``--help`` exits 0."""
    return parse_or_refuse(lambda: tyro.extras.subcommand_cli_from_dict(
        {n: _entry(c) for n, c in SPECS.items()}, prog="refimpl bench", args=argv), argv)


def bench(spec: Spec, out: Optional[str] = None, in_process: bool = False) -> int:
    from refimpl.lab.bench import guard
    name = f"refimpl bench {spec.name}"
    try:  # the refusals of values and types first, before the trial's imports (torch, transformers)
        guard.check(spec, out, in_process, memory=False)
    except RefimplError as e:
        print(f"{name}: error: {e}", file=sys.stderr)
        return 2
    from refimpl.lab.bench import trial
    if out:
        path = Path(out)
    elif spec.name == "calibrate":
        from refimpl.lab.bench.calibrate import default_out
        path = default_out()
    else:
        path = trial.default_out(spec)
    try:
        res = trial.run(spec, in_process=in_process, out=path)
    except RefimplError as e:
        print(f"{name}: error: {e}", file=sys.stderr)
        return 2
    print(SHOWN[res.bench](res))
    p = res.params
    if p["failed"]:
        kept = f"{p['rounds_run']} finished rounds" if "rounds_run" in p else \
            f"{sum(len(v['runs']) for v in res.variants.values())} finished runs"
        print(f"{name}: error: {p['failed'].splitlines()[0]} (kept the {kept} in {path})", file=sys.stderr)
    print(f"wrote {path}")
    return trial.exit_status(res)


def main(argv: Optional[list[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["report"]:
        from refimpl.lab import report  # optional: papermill, the report's, is absent where only benches run
        return report.main(argv[1:])
    if argv[:1] == ["conform"]:
        from refimpl.lab.conform.cli import main as conform_main
        return conform_main(argv[1:])
    if argv[:1] == ["cost-check"]:
        from refimpl.lab.explore.cost_check_cli import main as cost_check_main
        return cost_check_main(argv[1:])
    if argv[:1] == ["probe"]:
        from refimpl.lab.probes.cli import main as probe_main
        return probe_main(argv[1:])
    if argv[:2] == ["bench", "sweep"]:
        from refimpl.lab.bench.sweep import main as sweep_main
        return sweep_main(argv[2:])
    if argv[:1] == ["bench"]:
        try:
            parsed = parse(argv[1:])
        except RefimplError as e:
            print(f"refimpl bench{' ' + argv[1] if argv[1:2] and argv[1] in SPECS else ''}: error: {e}",
                  file=sys.stderr)
            return 2
        return bench(*parsed)
    print(USAGE, file=sys.stdout if argv[:1] in (["-h"], ["--help"]) else sys.stderr)
    return 0 if argv[:1] in (["-h"], ["--help"]) else 2


if __name__ == "__main__":
    sys.exit(main())
