"""``refimpl report [--quick] [-p NAME=VALUE ...]`` (``make report``): every notebook headless.

Writes ``--out-dir`` (default reports/latest/, emptied only under reports/): the executed
notebooks (.ipynb, .html), figures, bench JSONs and ``summary.md``. ``-p`` sets a parameter of
the notebooks that declare it (papermill). Progress (cells, the kernel's stderr) goes to
stderr. A failing notebook does not stop the others; summary.md says so, exit 1.
"""
from __future__ import annotations

import ast
import contextlib
import datetime
import logging
import re
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Annotated, Iterator, Literal, Optional

import nbformat
import papermill as pm
import tyro
from nbconvert import HTMLExporter

from refimpl.config import resolve_device
from refimpl.config.checks import check_count
from refimpl.errors import ConfigError, RefimplError
from refimpl.lab.bench.schema import Result
from refimpl.lab.bench.specs import default
from refimpl.lab.cli_errors import flags, refuse
from refimpl.lab.env import REPO_ROOT
from refimpl.lab.studies import md, md_table
from refimpl.lab.studies import serving_tables as SV
from refimpl.lab.studies import startup as S
from refimpl.lab.studies import throughput as T
from refimpl.lab.studies.startup_tables import memory_table

NOTEBOOKS_DIR = REPO_ROOT / "notebooks"
REPORTS_DIR = REPO_ROOT / "reports"
PROG = "refimpl report"
CELL_START = re.compile(r"Executing Cell (\d+)-*$")  # N over all cells, the injected parameters cell too


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


def summary(out_dir: Path, device: str, mode: str, finished: list[str] | None = None,
            failed: dict[str, str] | None = None) -> str:
    """summary.md from the JSONs in ``out_dir``; ``finished`` / ``failed`` (name -> error) notebooks. Its
    first line is ``first_line``'s warning where a start-up run measured here reverses the finding."""
    blocks = [f"# refimpl report ({mode} mode, device {device})"]
    if finished is not None or failed:
        rows = [[n, "finished", str(out_dir / n)] for n in finished or []]
        rows += [[n, f"FAILED: {err}", f"{out_dir / n} (partial)"] for n, err in (failed or {}).items()]
        blocks += ["## Notebooks", md_table(["notebook", "status", "executed notebook"], rows),
                   f"**{len(failed)} notebook(s) failed**; the figures below come only from the benches "
                   "that finished." if failed else ""]
    if mode == "quick":
        blocks.append("QUICK mode: small runs; each section states its own size and how its runs were made "
                      "(fresh processes or one process). The start-up runs at the smallest committed setting "
                      "where committed fresh-process ladders put 0.9.0 / 0.8.5 above 1.1 with the interval "
                      "clear of 1; its section gives the ratio measured here beside those committed ladders and "
                      "the committed full run's, and no gain or ratio is shown from too few pairs or runs. "
                      "`make report` re-measures at full size.")
    elif mode == "stored":
        blocks.append("Stored mode: nothing was measured here; the executed notebooks render the committed "
                      "results under results/ (their summary.md files).")
    results = {p: Result.load(p) for p in sorted(out_dir.glob("*.json"))
               if p.name.startswith(("startup_", "twoproc_startup_", "throughput_"))}
    env = next((r.env for r in results.values()), None)
    for p, res in results.items():
        if p.name.startswith("startup_"):
            budget = out_dir / p.name.replace("startup_", "budget_")
            blocks.append(S.summary_md(res, Result.load(budget) if budget.exists() else None))
    twoproc = {f"{v['runs'][0]['reset_scope']} ({p.name})": {"runs": v["runs"]} for p, res in results.items()
               if p.name.startswith("twoproc_startup_") for v in res.variants.values() if v["runs"]}
    if twoproc:
        blocks += ["## Two processes: each process's memory before -> after reset_mm_cache",
                   "From `refimpl bench startup --process-mode mp --reset-scope v0.9.0|all` (notebook 01's "
                   "last section; the command is beside the table there).", memory_table(twoproc)]
    blocks += [T.summary_md(res, out_dir) for p, res in results.items() if p.name.startswith("throughput_")
               and not p.name.startswith(("throughput_sweep", "throughput_hf"))]
    blocks.append(SV.summary_md(out_dir))
    if mode != "stored" and (warn := first_line(out_dir)):
        blocks.insert(0, warn)
    if env:
        hw = env["hardware"]
        blocks += ["## Measured on", md_table(["", ""], [
            ["hardware", hw["name"]], ["cpu", f"{hw['cpu']['model']} ({hw['cpu']['logical_cores']} logical cores)"],
            ["gpu", (hw["gpu"] or {}).get("name", "none")], ["RAM GiB", f"{hw['ram_bytes'] / 2**30:.0f}"],
            ["torch threads", env.get("torch_num_threads")], ["date", env.get("date")],
            ["git", (env.get("git") or {}).get("commit")], *[[k, v] for k, v in env["versions"].items()]])]
    return md(*blocks) + "\n"


def first_line(out_dir: Path) -> str:
    """The warning(s) of ``startup_regime.reversal_line`` for the start-up runs in ``out_dir`` ('' if none)."""
    from refimpl.lab.studies.startup_regime import reversal_line
    lines = []
    for p in sorted(out_dir.glob("startup_*.json")):
        with contextlib.suppress(Exception):  # a partial JSON of a failed notebook says nothing here
            lines.append(reversal_line(Result.load(p)))
    return "\n\n".join(w for w in lines if w)


def folder_summary(folder: Path) -> str:
    """summary.md of a folder of results (``refimpl report --summary-of DIR``): every section from its JSON."""
    text = summary(folder, "cpu", "full")
    head = (f"# Summary of {folder.name}\n\nRebuilt from this folder's JSON by `refimpl report --summary-of "
            f"results/{folder.name}`; each section names the run (machine, commit) and the command that made it.")
    return head + text[text.index("\n"):]


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


def clock(seconds: float) -> str:
    return str(datetime.timedelta(seconds=round(seconds)))  # h:mm:ss


class ProgressFormatter(logging.Formatter):
    """papermill's records of notebook ``nb`` as lines: each code cell started, the kernel's stderr."""

    def __init__(self, nb: Path, t0: float):
        super().__init__()
        self.nb, self.t0, self.last = nb.name, t0, ""
        self.labels: list[str | None] = []
        for c in nbformat.read(nb, as_version=4).cells:
            first = next((ln.strip() for ln in c.source.splitlines() if ln.strip()), "")
            self.labels.append(first if c.cell_type == "code" else None)
            if "parameters" in c.metadata.get("tags", []):
                self.labels.append("(injected parameters)")
        self.code = [i for i, label in enumerate(self.labels) if label is not None]

    def format(self, record: logging.LogRecord) -> str:
        msg, out = record.getMessage(), []
        m = CELL_START.match(msg.strip())
        if m and int(m[1]) - 1 in self.code:
            i = int(m[1]) - 1
            out.append(f"[report +{clock(time.perf_counter() - self.t0)}] {self.nb} cell "
                       f"{self.code.index(i) + 1}/{len(self.code)}: {str(self.labels[i])[:70]}")
        elif not m and record.levelno >= logging.WARNING:
            for piece in re.split(r"[\r\n]+", msg):
                if piece.strip() and piece.rstrip() != self.last:  # tqdm's close() repeats
                    self.last = piece.rstrip()
                    out.append(f"  {self.last}")
        return "".join(line + "\n" for line in out)


@contextlib.contextmanager
def terminal_progress(nb: Path, t0: float, stream: Optional[IO[str]] = None) -> Iterator[None]:
    """Progress lines of ``nb`` on ``stream`` (stderr) while in the block (``t0``: the report's
    perf_counter start); a line that fails is logging's handleError, never the report's."""
    logger, handler = logging.getLogger("papermill"), logging.StreamHandler(stream)
    handler.setFormatter(ProgressFormatter(nb, t0))
    handler.terminator = ""
    level, propagate = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate


def _one_line(e: BaseException) -> str:
    """``Type: first line of the message`` (papermill's error repeats the cell's traceback)."""
    msg = str(getattr(e, "evalue", None) or e).strip().splitlines()
    return f"{getattr(e, 'ename', None) or type(e).__name__}: {msg[0][:200] if msg else ''}".replace("|", "/")


def log(msg: str, t0: float) -> None:
    print(f"[report +{clock(time.perf_counter() - t0)}] {msg}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
