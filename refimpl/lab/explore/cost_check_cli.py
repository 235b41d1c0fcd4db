"""``refimpl cost-check``: the start-up cost model's predictions against measured Results, on the
dispatcher of ``refimpl bench`` (tyro flags, the one-line refusal). ``python -m
refimpl.lab.explore.cost_check`` runs the same. Without ``--same-day``: every committed start-up and
budget Result of the calibration's results/ folder (cost_check.compare, the ratio rows, the counts
within the goals); with it: the same-day benchmark table of the ladders given (same_day.same_day_table)."""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Optional

from refimpl.errors import ConfigError, RefimplError
from refimpl.lab.bench.specs import default
from refimpl.lab.cli_errors import flags, refuse
from refimpl.lab.env import REPO_ROOT
from refimpl.lab.explore import cost_check
from refimpl.lab.explore.cost_model import Calibration

__all__ = ["CostCheckArgs", "check", "run", "parse", "main"]

PROG = "refimpl cost-check"


@dataclass(frozen=True)
class CostCheckArgs:
    """The start-up cost model's predictions against measured start-up Results (docs/cost-model.md)."""
    calibration: Annotated[Optional[Path], default("results/<this machine>/calibration.json")] = None  # a calibration Result
    results: Annotated[Path, default("results/ of this checkout")] = REPO_ROOT / "results"  # the results/ folder to read
    quiet_only: bool = False  # leave out the -shared folder (runs made under load)
    same_day: Annotated[tuple[Path, ...], default("off: every committed Result")] = ()  # the benchmark table: CALIBRATION LADDER [LADDER ...] measured on its day
    carry_from: Annotated[Optional[Path], default("none")] = None  # with --same-day: rates the same-day calibration lacks, from this one


def _calibration(field: str, path: Path) -> Calibration:
    if not Path(path).is_file():
        raise ConfigError(field, "a calibration Result (refimpl bench calibrate --output-json)", f"no file {path}")
    return Calibration.load(path)


def check(a: CostCheckArgs) -> None:
    """Refuse ``a`` before anything is read: ConfigError naming the flag."""
    if a.same_day and len(a.same_day) < 2:
        raise ConfigError("same_day", "a calibration and at least one ladder", f"got {len(a.same_day)} path")
    if a.carry_from is not None and not a.same_day:
        raise ConfigError("carry_from", "only with --same-day", f"got --carry-from {a.carry_from}")
    for ladder in a.same_day[1:]:
        if not Path(ladder).is_file():
            raise ConfigError("same_day", "start-up Results (refimpl bench startup --output-json)", f"no file {ladder}")


def run(a: CostCheckArgs) -> int:
    """Print the table(s); 2 when there is no calibration for this machine."""
    check(a)
    if a.same_day:
        # same_day reaches the engine's start-up (torch: most of a minute to import on a loaded host): after the refusal
        from refimpl.lab.explore.same_day import carry_rates, same_day_table
        day = _calibration("same_day", a.same_day[0])
        if a.carry_from is not None:
            day = carry_rates(day, _calibration("carry_from", a.carry_from))
        print(same_day_table(day, list(a.same_day[1:]), Path(a.results)))
        return 0
    cal = _calibration("calibration", a.calibration) if a.calibration else Calibration.for_this_machine(Path(a.results))
    if cal is None:
        print(f"{PROG}: no calibration for this machine: run `refimpl bench calibrate` first", file=sys.stderr)
        return 2
    rows = cost_check.compare(cal, cost_check.sources(cal, Path(a.results), shared=not a.quiet_only))
    ratios = cost_check.ratio_rows(rows)
    print(cost_check.comparison_table(rows, cal))
    print()
    print(cost_check.comparison_table(ratios, cal))
    print()
    print("\n".join(cost_check.within_goal(rows + ratios, cal)))
    return 0


def parse(argv: list[str], prog: str = PROG) -> CostCheckArgs:
    """The flags of ``refimpl cost-check``; ConfigError naming the field for a malformed one (the one-line
    refusal, cli_errors.flags); ``--help`` exits 0."""
    return flags(CostCheckArgs, argv, prog)


def main(argv: Optional[list[str]] = None, prog: str = PROG) -> int:
    """``refimpl cost-check [FLAGS]``: 0; 2 on a refusal (one line) or without a calibration."""
    try:
        return run(parse(sys.argv[1:] if argv is None else argv, prog))
    except RefimplError as e:
        return refuse(prog, e)
