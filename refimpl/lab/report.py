"""``refimpl report [--quick] [-p NAME=VALUE ...]`` (``make report``): every notebook headless.

Writes ``--out-dir`` (default reports/latest/, emptied only under reports/): the executed
notebooks (.ipynb, .html), figures, bench JSONs and ``summary.md``. ``-p`` sets a parameter of
the notebooks that declare it (papermill). Progress (cells, the kernel's stderr) goes to
stderr. A failing notebook does not stop the others; summary.md says so, exit 1. summary.md is
built by refimpl/lab/report_summary.py, the progress lines by refimpl/lab/report_progress.py.
"""
from __future__ import annotations

import ast
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal, Optional

import nbformat
import papermill as pm
import tyro
from nbconvert import HTMLExporter

from refimpl.config import resolve_device
from refimpl.config.checks import check_count
from refimpl.errors import ConfigError, RefimplError
from refimpl.lab.bench.specs import default
from refimpl.lab.cli_errors import flags, refuse
from refimpl.lab.env import REPO_ROOT
from refimpl.lab.report_progress import (
    CELL_START,
    ProgressFormatter,
    _one_line,
    clock,
    log,
    terminal_progress,
)
from refimpl.lab.report_summary import first_line, folder_summary, summary

NOTEBOOKS_DIR = REPO_ROOT / "notebooks"
REPORTS_DIR = REPO_ROOT / "reports"
PROG = "refimpl report"

__all__ = ["CELL_START", "NOTEBOOKS_DIR", "REPORTS_DIR", "ProgressFormatter", "ReportArgs", "clock", "execute",
           "first_line", "folder_summary", "log", "main", "notebook_params", "prepare_out_dir", "select_notebooks",
           "summary", "terminal_progress"]


def prepare_out_dir(out: Path, reports_dir: Path = REPORTS_DIR) -> Path:
    """``out`` resolved and empty: emptied only strictly inside ``reports_dir``, else ValueError."""
    out, reports = Path(out).resolve(), Path(reports_dir).resolve()
    if out.exists():
        if out != reports and out.is_relative_to(reports):
            shutil.rmtree(out)
        elif not out.is_dir() or any(out.iterdir()):
            raise ValueError(f"refusing to delete {out}: only folders under {reports} are emptied; "
                             "give a new or empty folder")
    out.mkdir(parents=True, exist_ok=True)
    return out


def execute(nb: Path, out_dir: Path, params: dict, timeout_s: int | None = None, progress: bool = False) -> Path:
    """Run one notebook (cwd notebooks/), save .ipynb and .html; papermill's error when a cell fails."""
    out = out_dir / nb.name
    pm.execute_notebook(str(nb), str(out), parameters=params, kernel_name="python3", cwd=str(nb.parent),
                        progress_bar=False, log_output=progress, execution_timeout=timeout_s)
    out.with_suffix(".html").write_text(HTMLExporter().from_notebook_node(nbformat.read(out, as_version=4))[0])
    return out


def select_notebooks(names: list[str] | None) -> list[Path]:
    """The numbered notebooks, or those ``names``; ConfigError ("notebooks") for an unknown one."""
    nbs = sorted(NOTEBOOKS_DIR.glob("[0-9]*.ipynb"))
    unknown = [n for n in names or [] if n not in [nb.name for nb in nbs]]
    if unknown:
        raise ConfigError("notebooks", f"file names of {NOTEBOOKS_DIR}: {', '.join(nb.name for nb in nbs)}",
                          f"unknown notebook(s) {', '.join(unknown)}")
    return [nb for nb in nbs if not names or nb.name in names]


def notebook_params(nbs: list[Path], pairs: list[str]) -> dict[Path, dict]:
    """``-p NAME=VALUE`` per notebook that declares NAME; ConfigError ("parameters") otherwise."""
    declared = {nb: pm.inspect_notebook(str(nb)) for nb in nbs}
    known, given = {k for d in declared.values() for k in d}, {}
    for pair in pairs:
        name, eq, text = pair.partition("=")
        if not eq or name not in known:
            raise ConfigError("parameters", f"NAME=VALUE, NAME one of {sorted(known)}", f"got {pair!r}")
        try:
            given[name] = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            given[name] = text
        default = next(d[name]["default"] for d in declared.values() if name in d)
        try:
            counted = type(ast.literal_eval(default)) is int  # REPEATS, NUM_REQUESTS, FLAME_RATE, ...
        except (ValueError, SyntaxError):
            counted = False
        if counted:
            check_count(name, given[name], 1)
        _check_as_spec_field(name, given[name])
    return {nb: {k: v for k, v in given.items() if k in d} for nb, d in declared.items()}


def _check_as_spec_field(name: str, value: object) -> None:
    """A parameter named as a bench spec's field (``MAX_MODEL_LEN`` -> ``max_model_len``) gets that
    field's type (refimpl.lab.bench.spec_types) and, for a count, ``>= 1``: ConfigError naming the
    parameter, as the CLI and ``trial.run`` refuse the field."""
    from refimpl.lab.bench.spec_types import conforms, field_types, type_name
    tp = field_types().get(name.lower())
    if tp is None:
        return
    if not conforms(value, tp):
        raise ConfigError(name, type_name(tp), f"got {value!r} ({type(value).__name__})")
    if value is not None and conforms(value, int):
        check_count(name, value, 1)


@dataclass(frozen=True)
class ReportArgs:
    """Run every notebook headless and write the executed notebooks, figures, bench JSONs and summary.md."""
    quick: bool = False  # MODE="quick" in every notebook, else "full"
    device: Literal["auto", "cpu", "cuda"] = "auto"  # DEVICE of every notebook
    out_dir: Annotated[Path, default("reports/latest")] = REPORTS_DIR / "latest"  # emptied only under reports/
    notebooks: Annotated[Optional[tuple[str, ...]], default("every numbered notebook")] = None  # file names
    parameter: Annotated[tyro.conf.UseAppendAction[tuple[str, ...]], tyro.conf.arg(
        aliases=("-p",), metavar="NAME=VALUE", help_behavior_hint="(default: none; repeat -p for more)",
        help="a notebook parameter, e.g. -p REPEATS=2 -p LIMITS=\"['video=0']\"")] = ()
    summary_of: Annotated[Optional[Path], tyro.conf.arg(metavar="DIR", help_behavior_hint="(default: off)", help=(
        "run nothing: rewrite DIR/summary.md from DIR's JSON (a results/<hardware> folder)"))] = None


def parse(argv: Optional[list[str]]) -> ReportArgs:
    """The flags of ``refimpl report``; ConfigError naming the field for a malformed one; ``--help`` exits 0."""
    return flags(ReportArgs, argv, PROG)


def main(argv: list[str] | None = None) -> int:
    """``refimpl report [FLAGS]``: 0; 1 when a notebook failed; 2 on a refusal (one line); 130 on Ctrl-C."""
    try:
        args = parse(argv)
    except RefimplError as e:
        return refuse(PROG, e)
    if args.summary_of:
        folder = Path(args.summary_of)
        if not folder.is_dir() or not any(folder.glob("*.json")):
            return refuse(PROG, ConfigError("summary_of", "a folder of refimpl bench results, e.g. "
                                            "results/cpu-amd-epyc-2c", f"{folder} holds no result JSON"))
        (folder / "summary.md").write_text(folder_summary(folder))
        print(f"[report] wrote {folder / 'summary.md'}")
        return 0
    try:  # refused before anything is emptied or run
        nbs = select_notebooks(list(args.notebooks) if args.notebooks is not None else None)
        device, extra = resolve_device(args.device), notebook_params(nbs, list(args.parameter))
    except ConfigError as e:
        return refuse(PROG, e)
    try:
        out = prepare_out_dir(Path(args.out_dir))
    except ValueError as e:
        return refuse(PROG, ConfigError("out_dir", f"a new or empty folder, or one under {REPORTS_DIR}", str(e)))
    t0, status, finished, failed = time.perf_counter(), "wrote", [], {}
    mode = next((e["MODE"] for e in extra.values() if "MODE" in e), "quick" if args.quick else "full")
    for i, nb in enumerate(nbs, 1):
        log(f"notebook {i}/{len(nbs)} {nb.name} (MODE={mode}, device={device}, {extra[nb] or 'defaults'})", t0)
        try:
            with terminal_progress(nb, t0):
                record = {"RECORD": True} if "RECORD" in pm.inspect_notebook(str(nb)) else {}  # notebook 00: all
                execute(nb, out, {"MODE": mode, "DEVICE": device, "OUT_DIR": str(out), **record, **extra[nb]},
                        progress=True)
            finished.append(nb.name)
        except KeyboardInterrupt:
            status = "interrupted; wrote what finished to"
            break
        except Exception as e:  # one failing notebook must not cost the others
            failed[nb.name] = _one_line(e)
            log(f"FAILED in {nb.name} after {clock(time.perf_counter() - t0)}: {failed[nb.name]}; the notebook "
                f"as far as it ran: {out / nb.name}; going on", t0)
    try:
        text = summary(out, device, mode, finished, failed)
    except Exception as e:  # a partial JSON of a failed notebook: still say what ran
        failed["summary.md"] = _one_line(e)
        text = summary(out / "no-results", device, mode, finished, failed)
    (out / "summary.md").write_text(text)
    if mode != "stored" and (warn := first_line(out)):
        print(warn, flush=True)
    if failed and status == "wrote":
        status = f"{len(failed)} of {len(nbs)} notebook(s) FAILED ({', '.join(failed)}); wrote"
    print(f"[report] {status} {out} in {clock(time.perf_counter() - t0)} (h:mm:ss); summary: {out / 'summary.md'}",
          flush=True)
    return 130 if status.startswith("interrupted") else 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
