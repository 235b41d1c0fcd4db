"""``refimpl bench sweep startup|serve --params FILE``: a campaign as data, on the one trial loop.

vLLM's ``vllm bench sweep`` idiom (vllm/benchmarks/sweep/: param_sweep.py, startup.py): a file of
spec overrides, each entry one run; one experiment folder holding every run's Result; ``--resume``
skips the runs whose Result is there (a failed or interrupted run keeps ``NAME.partial.json`` and is
run again); ``--dry-run`` prints the runs as ``refimpl bench`` lines and runs nothing. Every run is
checked (guard.check, memory aside) before the first one starts. The file, TOML or JSON of one shape
(a bare JSON list is its ``runs``, as vLLM's ``--serve-params``)::

    experiment = "same-day"   # the folder: <output-dir>/<experiment>-<UTC date> unless --experiment-name
    [base]                    # overrides of every run: fields of refimpl bench startup|serve, "_" or "-"
    [calibrate]               # startup only: refimpl bench calibrate first (these overrides) into
                              #   calibration.json; the sweep ends with the cost model's same-day table
    [warm_up]                 # one untimed run before the first run left to do (base, then these); not kept
    [[runs]]                  # name = "128k" (default: its overrides), then its overrides

The folder keeps a copy of the file (sweep.toml / sweep.json; --resume refuses a different file),
``sweep.log`` (the commit, each run's wall seconds), ``<name>.json`` per run and ``same_day.md``."""
from __future__ import annotations

import datetime as _dt
import filecmp
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Optional

import tyro

from refimpl.errors import ConfigError, RefimplError
from refimpl.lab.bench import guard, trial
from refimpl.lab.bench.param_sweep import load, run_name, spec_of
from refimpl.lab.bench.specs import CalibrateSpec, ServeSpec, Spec, StartupSpec
from refimpl.lab.cli_errors import parse_or_refuse, refuse
from refimpl.lab.env import git_info

__all__ = ["SweepArgs", "Run", "Sweep", "BENCHES", "plan", "run", "parse", "main"]

PROG = "refimpl bench sweep"
BENCHES: dict[str, type[Spec]] = {"startup": StartupSpec, "serve": ServeSpec}


@dataclass(frozen=True)
class SweepArgs:
    params: Path  # the sweep file: TOML or JSON (its fields: refimpl/lab/bench/sweep.py)
    output_dir: Path = Path("reports/sweeps")  # the experiment folder goes under it
    experiment_name: Annotated[Optional[str], tyro.conf.arg(help="the experiment folder's name", help_behavior_hint=(
        "(default: the file's experiment, else its name, then -<UTC date>)"))] = None
    resume: bool = False  # continue the experiment folder: skip the runs whose Result is there
    dry_run: bool = False  # print the runs (refimpl bench lines) and run nothing
    in_process: bool = False  # every run in this process: smoke figures, not fresh-process ones


@dataclass(frozen=True)
class Run:
    """One run of a sweep: its ``name``, ``spec`` and ``path`` (None: the untimed warm-up, not kept)."""
    name: str
    spec: Spec
    path: Optional[Path]


@dataclass(frozen=True)
class Sweep:
    """A sweep file read for ``bench``: its ``runs`` in order (calibration and warm-up first), the
    experiment ``folder``, and whether it ends with the same-day table (``table``)."""
    bench: str
    source: Path
    folder: Path
    runs: tuple[Run, ...]
    table: bool
    elsewhere: dict[str, str] = field(default_factory=dict)  # dry run: run name -> the device it needs, absent here

    @property
    def copy(self) -> Path:
        return self.folder / f"sweep{self.source.suffix}"

    def todo(self, resume: bool) -> list[Run]:
        """The runs left: all, or on ``resume`` those whose Result is missing (the warm-up only if any is)."""
        left = [r for r in self.runs if r.path is None or not (resume and r.path.exists())]
        return left if any(r.path for r in left) else []


def plan(path: Path, bench: str, output_dir: Path, experiment_name: Optional[str] = None,
         resume: bool = False, in_process: bool = False, dry_run: bool = False) -> Sweep:
    """The sweep of ``path`` for ``bench``, every run checked (memory aside) before any runs; a dry run
    checks a run whose device is absent here (a GPU session previewed on a CPU) on the CPU instead and
    names it in ``elsewhere``."""
    data, cls = load(path), BENCHES[bench]
    if "calibrate" in data and bench != "startup":
        raise ConfigError("calibrate", "only in a startup sweep", f"{path} is run as a {bench} sweep")
    date = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d")
    folder = Path(output_dir) / (experiment_name or f"{data.get('experiment') or Path(path).stem}-{date}")
    if resume != folder.is_dir():
        raise ConfigError("resume" if resume else "experiment_name", "an experiment folder that exists"
                          if resume else "a new experiment folder (or --resume)",
                          f"{folder} {'is not there' if resume else 'exists'}")
    base, runs = data.get("base", {}), []
    if "calibrate" in data:
        runs.append(Run("calibration", spec_of(CalibrateSpec, data["calibrate"], f"{path} [calibrate]"),
                        folder / "calibration.json"))
    if "warm_up" in data:
        runs.append(Run("warm-up", spec_of(cls, {**base, **data["warm_up"]}, f"{path} [warm_up]"), None))
    for i, entry in enumerate(data["runs"]):
        where = f"{path} runs[{i}]"
        name = run_name(entry, where)
        if any(r.name == name for r in runs):
            raise ConfigError("name", "one run of each name", f"{where} repeats {name!r}")
        over = {k: v for k, v in entry.items() if k != "name"}
        runs.append(Run(name, spec_of(cls, {**base, **over}, where), folder / f"{name}.json"))
    sweep = Sweep(bench, Path(path), folder, tuple(runs), "calibrate" in data)
    if resume and sweep.copy.exists() and not filecmp.cmp(sweep.copy, path, shallow=False):
        raise ConfigError("params", f"the file the experiment was made from ({sweep.copy})", f"{path} differs")
    for r in runs:
        try:
            try:
                guard.check(r.spec, r.path, in_process, memory=False)
            except RefimplError as e:
                if not (dry_run and e.field == "device"):
                    raise
                sweep.elsewhere[r.name] = str(getattr(r.spec, "device", ""))
                guard.check(r.spec.replace(device="cpu"), r.path, in_process, memory=False)
        except RefimplError as e:
            raise type(e)(e.field, e.limit, f"run {r.name!r} of {path}: {e.message}") from None
    return sweep


def _dry_run(sweep: Sweep, resume: bool, in_process: bool) -> None:
    left = sweep.todo(resume)
    print(f"refimpl bench sweep {sweep.bench}: {len(sweep.runs)} runs of {sweep.source} -> {sweep.folder}")
    for r in sweep.runs:
        line = r.spec.command(str(r.path) if r.path else None, in_process)
        note = "   (untimed, not kept)" if r.path is None else "" if r in left else "   (done: skipped)"
        if r.name in sweep.elsewhere:
            note += f"   (--device {sweep.elsewhere[r.name]}: not here; checked with cpu)"
        print(f"  {r.name:<14} {line}{note}")
    if sweep.table:
        kept = " ".join(r.name for r in sweep.runs if r.path and r.name != "calibration")
        print(f"  {'same_day.md':<14} the cost model's same-day table: calibration.json against {kept}")


def _table(sweep: Sweep) -> Path:
    """same_day.md: the cost model with the sweep's calibration against its start-up runs."""
    from refimpl.lab.explore.cost_model import Calibration
    from refimpl.lab.explore.same_day import same_day_table
    ladders = [r.path for r in sweep.runs if r.path and r.name != "calibration" and r.path.exists()]
    out = sweep.folder / "same_day.md"
    out.write_text(same_day_table(Calibration.load(sweep.folder / "calibration.json"), ladders) + "\n")
    return out


def run(sweep: Sweep, resume: bool = False, in_process: bool = False) -> int:
    """Run what is left of ``sweep``; 0, or the failed run's ``trial.exit_status`` (its partial Result kept)."""
    sweep.folder.mkdir(parents=True, exist_ok=True)
    if not sweep.copy.exists():
        shutil.copyfile(sweep.source, sweep.copy)
    log = sweep.folder / "sweep.log"
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    with log.open("a") as f:
        git = git_info()
        at = f"{git['commit']}{' (dirty)' if git['dirty'] else ''}" if git["commit"] else "no git checkout"
        f.write(f"# {now} at {at}: {sweep.bench} sweep of {sweep.source}\n")
    if not sweep.todo(resume):
        print(f"nothing left to run: every run's Result is in {sweep.folder}")
    for r in sweep.todo(resume):
        t0, partial = time.perf_counter(), r.path.with_suffix(".partial.json") if r.path else None
        res = trial.run(r.spec, in_process=in_process, out=partial)
        status, wall = trial.exit_status(res), time.perf_counter() - t0
        if status:
            why = str(res.params.get("failed") or "interrupted").splitlines()[0]
            with log.open("a") as f:
                f.write(f"{r.name}: stopped after {wall:.0f} s: {why}\n")
            print(f"refimpl bench sweep {sweep.bench}: error: run {r.name!r}: {why} (kept in {partial}; "
                  "--resume runs it again)", file=sys.stderr)
            return status
        if r.path and partial:
            partial.replace(r.path)
        with log.open("a") as f:
            f.write(f"{r.name}: {wall:.0f} s wall\n")
        print(f"{r.name}: {wall:.0f} s wall" + (f", wrote {r.path}" if r.path else " (untimed, not kept)"))
    if sweep.table:
        out = _table(sweep)
        print(out.read_text())
        print(f"wrote {out}")
    return 0


def _entry(bench: str):
    def sweep(args: Annotated[SweepArgs, tyro.conf.arg(name="")]) -> tuple[str, SweepArgs]:
        return bench, args
    sweep.__doc__ = f"Runs of refimpl bench {bench} from a file of spec overrides (vLLM's bench sweep)."
    return sweep


def parse(argv: list[str]) -> tuple[str, SweepArgs]:
    """(bench, flags) of ``refimpl bench sweep`` flags; ConfigError naming the field for a malformed one
    (the one-line refusal); ``--help`` exits 0."""
    return parse_or_refuse(lambda: tyro.extras.subcommand_cli_from_dict(
        {b: _entry(b) for b in BENCHES}, prog=PROG, args=argv), argv, PROG)


def main(argv: list[str]) -> int:
    """``refimpl bench sweep startup|serve ...``: 0, 2 on a refusal (one line, before any run), else the run's."""
    try:
        bench, a = parse(argv)
    except RefimplError as e:
        return refuse(PROG, e)
    try:
        sweep = plan(a.params, bench, a.output_dir, a.experiment_name, a.resume, a.in_process, a.dry_run)
    except RefimplError as e:
        return refuse(f"{PROG} {bench}", e)
    if a.dry_run:
        _dry_run(sweep, a.resume, a.in_process)
        return 0
    return run(sweep, a.resume, a.in_process)
