"""summary.md of a report's folder (``refimpl report``, ``refimpl report --summary-of DIR``): every
section from the result JSONs there, the notebooks that finished or failed, the machine, and the
start-up regime's warning first where a run measured here reverses the finding. Read by
refimpl/lab/report.py.
"""
from __future__ import annotations

import contextlib
from pathlib import Path

from refimpl.lab.bench.schema import Result
from refimpl.lab.studies import md, md_table
from refimpl.lab.studies import serving_tables as SV
from refimpl.lab.studies import startup as S
from refimpl.lab.studies import throughput as T
from refimpl.lab.studies.startup_tables import memory_table


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
