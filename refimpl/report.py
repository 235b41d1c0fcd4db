"""``refimpl report [--quick]`` (what ``make report`` runs): execute every notebook headless
on the best device present and write ``reports/latest/``: executed notebooks (.ipynb and
.html), figures (PNG/SVG), py-spy flame graphs, the benchmark JSONs and ``summary.md`` with
the headline figures and the hardware and versions they were measured on.

Progress goes to the terminal (stderr) through papermill's own ``log_output``: one line per
code cell started (notebook, cell i of n, elapsed, the cell's first line) and the kernel's
stderr, where the benchmark driver's tqdm bar names the benchmark, variant, repeat i of n,
elapsed and an estimate of what is left. The last line says where the report is and how
long it took.

A notebook that raises does not stop the report: the next notebooks still run, the
partial notebook is kept (``<out-dir>/<name>.ipynb``, executed as far as it got), summary.md
lists which notebooks finished and which failed (with the error and that path), and the
command exits 1.

``--out-dir`` is emptied before a run only when it lies under the repository's
``reports/``; any other existing folder must be empty, else the report refuses to start.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

from refimpl.env import REPO_ROOT
from refimpl.errors import ConfigError
from refimpl.report_progress import clock, terminal_progress

NOTEBOOKS_DIR = REPO_ROOT / "notebooks"
REPORTS_DIR = REPO_ROOT / "reports"


def prepare_out_dir(out: Path, reports_dir: Path = REPORTS_DIR) -> Path:
    """Resolve ``out`` and make it an empty folder; returns the resolved path.

    An existing ``out`` strictly inside ``reports_dir`` (symlinks resolved) is deleted first.
    Raises ValueError, deleting nothing, for an existing ``out`` elsewhere (``reports_dir``
    itself included) unless it is an empty folder.
    """
    out, reports = Path(out).resolve(), Path(reports_dir).resolve()
    if out.exists():
        if out != reports and out.is_relative_to(reports):
            shutil.rmtree(out)
        elif not out.is_dir() or any(out.iterdir()):
            raise ValueError(f"refusing to delete {out}: only folders under {reports} are "
                             "emptied; give a new or empty folder")
    out.mkdir(parents=True, exist_ok=True)
    return out


def execute(nb: Path, out_dir: Path, params: dict, timeout_s: int | None = None,
            progress: bool = False) -> Path:
    """Run one notebook with papermill (kernel ``python3``, cwd notebooks/); save .ipynb and .html.

    ``progress``: forward the kernel's stderr and one line per cell to this process's stderr
    (papermill ``log_output``; see ``refimpl.report_progress``). Raises papermill's
    PapermillExecutionError when a cell fails (the partial notebook is saved at ``out``).
    """
    import nbformat
    import papermill as pm
    from nbconvert import HTMLExporter
    out = out_dir / nb.name
    pm.execute_notebook(str(nb), str(out), parameters=params, kernel_name="python3",
                        cwd=str(nb.parent), progress_bar=False, log_output=progress,
                        execution_timeout=timeout_s)
    html, _ = HTMLExporter().from_notebook_node(nbformat.read(out, as_version=4))
    out.with_suffix(".html").write_text(html)
    return out


def summary(out_dir: Path, device: str, quick: bool, finished: list[str] | None = None,
            failed: dict[str, str] | None = None) -> str:
    """summary.md text from the JSONs the notebooks wrote into ``out_dir``.

    ``finished``: notebook file names that ran to the end; ``failed``: notebook file name ->
    one-line error. When given, a ``## Notebooks`` section lists both, each failed one with
    the path of its partial notebook in ``out_dir``.
    """
    from refimpl.analysis import md_table
    from refimpl.analysis import startup as S
    parts = [f"# refimpl report ({'QUICK' if quick else 'full'} mode, device {device})", ""]
    if finished is not None or failed:
        rows = [[n, "finished", str(out_dir / n)] for n in finished or []]
        rows += [[n, f"FAILED: {err}", f"{out_dir / n} (partial)"] for n, err in (failed or {}).items()]
        parts += ["## Notebooks", "", md_table(["notebook", "status", "executed notebook"], rows), ""]
        if failed:
            parts += [f"**{len(failed)} notebook(s) failed**; the figures below come only from "
                      "the benchmarks that finished.", ""]
    if quick:
        parts += ["QUICK mode is a smoke test: small sizes, one repeat, runs inside the notebook's "
                  "process (not fresh processes; peak RSS is the process's). Use `make report` "
                  "for figures.", ""]
    from refimpl.bench.schema import Result
    env = None
    for p in sorted(out_dir.glob("startup_*.json")):
        res = Result.load(p)
        env = env or res.env
        budget_p = out_dir / p.name.replace("startup_", "budget_")
        parts += [S.summary_md(res, Result.load(budget_p) if budget_p.exists() else None), ""]
    twoproc = {}
    for p in sorted(out_dir.glob("twoproc_startup_*.json")):
        res = Result.load(p)
        env = env or res.env
        for v in res.variants.values():
            if v["runs"]:
                twoproc[f"{v['runs'][0]['reset_scope']} ({p.name})"] = {"runs": v["runs"]}
    if twoproc:
        from refimpl.analysis.two_process import memory_table
        parts += ["## Two processes: each process's memory before -> after reset_mm_cache", "",
                  "From `refimpl bench startup --process-mode mp --reset-scope v0.9.0|all` "
                  "(notebook 01's last section; the command is beside the table there).", "",
                  memory_table(twoproc), ""]
    from refimpl.analysis import throughput as T
    for p in sorted(out_dir.glob("throughput_*.json")):
        if p.name.startswith(("throughput_sweep", "throughput_hf")):
            continue
        res = Result.load(p)
        env = env or res.env
        parts += [T.summary_md(res, out_dir), ""]
    from refimpl.analysis import serving
    second = serving.summary_md(out_dir)
    if second:
        parts += [second, ""]
    if env:
        hw, v = env["hardware"], env["versions"]
        parts += ["## Measured on", "", md_table(["", ""], [
            ["hardware", hw["name"]], ["cpu", f"{hw['cpu']['model']} ({hw['cpu']['logical_cores']} logical cores)"],
            ["gpu", (hw["gpu"] or {}).get("name", "none")], ["RAM GiB", f"{hw['ram_bytes'] / 2**30:.0f}"],
            ["torch threads", env.get("torch_num_threads")], ["date", env.get("date")],
            ["git", (env.get("git") or {}).get("commit")],
            *[[k, val] for k, val in v.items()]]), ""]
    return "\n".join(parts)


def select_notebooks(names: list[str] | None) -> list[Path]:
    """The numbered notebooks of ``NOTEBOOKS_DIR`` (``[0-9]*.ipynb``, sorted), or those named
    in ``names`` (file names). Raises ConfigError (field ``notebooks``) naming the unknown
    ones and the notebooks there are."""
    nb_dir = NOTEBOOKS_DIR
    nbs = sorted(nb_dir.glob("[0-9]*.ipynb"))
    if not names:
        return nbs
    known = [n.name for n in nbs]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ConfigError("notebooks", f"file names of {nb_dir}: {', '.join(known)}",
                          f"unknown notebook(s) {', '.join(unknown)}")
    return [n for n in nbs if n.name in names]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="refimpl report", description=__doc__)
    p.add_argument("--quick", action="store_true", help="QUICK mode of every notebook")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    p.add_argument("--out-dir", default=str(REPO_ROOT / "reports" / "latest"))
    p.add_argument("--notebooks", nargs="*", default=None,
                   help="subset of notebook file names (e.g. 01_startup_dummy_data_cache.ipynb); "
                        "an unknown name is refused (exit 2)")
    args = p.parse_args(argv)
    try:
        nbs = select_notebooks(args.notebooks)
    except ConfigError as e:  # before the out dir is emptied
        print(f"refimpl report: error: {e}", file=sys.stderr)
        return 2
    from refimpl.config import resolve_device
    try:  # --device cuda on a machine without CUDA: refused before any notebook runs
        device = resolve_device(args.device)
    except ConfigError as e:
        print(f"refimpl report: error: {e}", file=sys.stderr)
        return 2
    try:
        out = prepare_out_dir(Path(args.out_dir))
    except ValueError as e:
        p.error(str(e))
    t0 = time.perf_counter()
    status = "wrote"
    finished: list[str] = []
    failed: dict[str, str] = {}
    for i, nb in enumerate(nbs, 1):
        log(f"notebook {i}/{len(nbs)} {nb.name} (QUICK={args.quick}, device={device})", t0)
        try:
            with terminal_progress(nb, t0):
                execute(nb, out, {"QUICK": args.quick, "DEVICE": device, "OUT_DIR": str(out)},
                        progress=True)
            finished.append(nb.name)
        except KeyboardInterrupt:
            status = "interrupted; wrote what finished to"
            break
        except Exception as e:  # one failing notebook must not cost the others
            failed[nb.name] = _one_line(e)
            log(f"FAILED in {nb.name} after {clock(time.perf_counter() - t0)}: {failed[nb.name]}; "
                f"the notebook as far as it ran: {out / nb.name}; going on", t0)
    try:
        text = summary(out, device, args.quick, finished, failed)
    except Exception as e:  # a partial JSON of a failed notebook: still say what ran
        failed["summary.md"] = _one_line(e)
        text = summary(out / "no-results", device, args.quick, finished, failed)
    (out / "summary.md").write_text(text)
    if failed and status == "wrote":
        status = f"{len(failed)} of {len(nbs)} notebook(s) FAILED ({', '.join(failed)}); wrote"
    print(f"[report] {status} {out} in {clock(time.perf_counter() - t0)} (h:mm:ss); "
          f"summary: {out / 'summary.md'}", flush=True)
    return 130 if status.startswith("interrupted") else 1 if failed else 0


def _one_line(e: BaseException) -> str:
    """``Type: first line of the message`` (papermill's error repeats the cell's traceback)."""
    name = getattr(e, "ename", None) or type(e).__name__
    msg = str(getattr(e, "evalue", None) or e).strip().splitlines()
    return f"{name}: {msg[0][:200] if msg else ''}".replace("|", "/")


def log(msg: str, t0: float) -> None:
    """One ``[report +h:mm:ss] msg`` line on stderr (elapsed since ``t0``, perf_counter s)."""
    print(f"[report +{clock(time.perf_counter() - t0)}] {msg}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
