"""Which calibration a prediction reads by default: the newest one that a committed same-day check
validated (issue 43), else the machine's ``calibration.json``, else the reference machine's.

A same-day check is a folder under ``results/<hardware>/`` that holds a ``calibration.json``, the
cost model's table against it (``same_day*.md``, written by ``refimpl bench sweep startup`` with a
``[calibrate]`` table, e.g. benchmarks/same_day.toml) and at least one start-up Result (any name:
``startup_*.json`` of the older scripts, ``<run>.json`` of a sweep) measured on the calibration's UTC day. "Validated" means checked against that day's runs, not within every goal:
the table beside it says how far each row is. No vLLM counterpart.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Optional

from refimpl.lab.bench.schema import Result
from refimpl.lab.env import REPO_ROOT
from refimpl.lab.explore.cost_model import Calibration

__all__ = ["same_day_checks", "newest_validated", "default_calibration"]


def _startup_results(folder: Path) -> list[Result]:
    """The start-up Results in ``folder``: the older scripts named them ``startup_*.json``, a sweep campaign
    names them after its runs (``128k.json``); a calibration, a sweep's plan or log is not one."""
    out = []
    for p in sorted(folder.glob("*.json")):
        if p.name.startswith("calibration"):
            continue
        try:
            res = Result.load(p)
        except (ValueError, KeyError, TypeError):  # a JSON of another kind (SchemaError is a ValueError)
            continue
        if res.bench == "startup":
            out.append(res)
    return out


def same_day_checks(hardware_dir: Path) -> list[Calibration]:
    """The calibrations of ``hardware_dir``'s same-day checks (``check`` set to the folder's name), oldest first."""
    out = []
    for folder in sorted(p for p in Path(hardware_dir).iterdir() if p.is_dir()) if Path(hardware_dir).is_dir() else []:
        path = folder / "calibration.json"
        if not path.exists() or not any(folder.glob("same_day*.md")):
            continue
        cal = Calibration.load(path)
        days = {str(r.env.get("date", ""))[:10] for r in _startup_results(folder)}
        if cal.date in days:
            out.append(replace(cal, check=folder.name))
    return sorted(out, key=lambda c: (c.date, c.time))


def newest_validated(hardware_dir: Path) -> Optional[Calibration]:
    """The newest calibration a committed same-day check in ``hardware_dir`` validated, or None."""
    checks = same_day_checks(hardware_dir)
    return checks[-1] if checks else None


def default_calibration(hardware: str, reference: str, results_dir: Path = REPO_ROOT / "results"
                        ) -> tuple[Optional[Calibration], str]:
    """(calibration, which one and why) for a machine whose results folder is ``hardware``: the newest
    validated one of it, else its ``calibration.json``, else the same two of ``reference`` (the reference
    machine's, named as such); (None, why) when there is none."""
    for folder, whose in ((hardware, "this machine's"), (reference, f"the reference machine's ({reference})")):
        found = newest_validated(Path(results_dir) / folder)
        other = "" if folder == hardware else f": none is committed for {hardware}"
        if found is not None:
            return found, f"{whose} newest calibration a committed same-day check validated ({found.check}){other}"
        plain = Path(results_dir) / folder / "calibration.json"
        if plain.exists():
            return Calibration.load(plain), (f"{whose} results/{folder}/calibration.json: no committed same-day check "
                                             f"validated a calibration of it{other}")
    return None, f"no calibration for this machine (results/{hardware}/calibration.json)"
