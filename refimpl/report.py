"""``refimpl report [--quick]`` (what ``make report`` runs): execute every notebook headless
on the best device present and write ``reports/latest/``: executed notebooks (.ipynb and
.html), figures (PNG/SVG), py-spy flame graphs, the benchmark JSONs and ``summary.md`` with
the headline figures and the hardware and versions they were measured on.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

from refimpl.bench.common import REPO_ROOT

NOTEBOOKS_DIR = REPO_ROOT / "notebooks"


def execute(nb: Path, out_dir: Path, params: dict, timeout_s: int | None = None) -> Path:
    """Run one notebook with papermill (kernel ``python3``, cwd notebooks/); save .ipynb and .html."""
    import nbformat
    import papermill as pm
    from nbconvert import HTMLExporter
    out = out_dir / nb.name
    pm.execute_notebook(str(nb), str(out), parameters=params, kernel_name="python3",
                        cwd=str(nb.parent), progress_bar=sys.stderr.isatty(),
                        execution_timeout=timeout_s)
    html, _ = HTMLExporter().from_notebook_node(nbformat.read(out, as_version=4))
    out.with_suffix(".html").write_text(html)
    return out


def summary(out_dir: Path, device: str, quick: bool) -> str:
    """summary.md text from the JSONs the notebooks wrote into ``out_dir``."""
    from refimpl.analysis import md_table
    from refimpl.analysis import startup as S
    parts = [f"# refimpl report ({'QUICK' if quick else 'full'} mode, device {device})", ""]
    if quick:
        parts += ["QUICK mode is a smoke test: small sizes, one repeat, runs inside the notebook's "
                  "process (not fresh processes; peak RSS is the process's). Use `make report` "
                  "for figures.", ""]
    env = None
    for name, fn in (("startup", S.summary_md),):
        for p in sorted(out_dir.glob(f"{name}_*.json")):
            res = json.loads(p.read_text())
            env = env or res
            budget_p = out_dir / p.name.replace("startup_", "budget_")
            budget = json.loads(budget_p.read_text()) if budget_p.exists() else None
            parts += [fn(res, budget), ""]
    try:
        from refimpl.analysis import throughput as T
        for p in sorted(out_dir.glob("throughput_*.json")):
            if p.name.startswith("throughput_sweep") or p.name.startswith("throughput_hf"):
                continue
            res = json.loads(p.read_text())
            env = env or res
            parts += [T.summary_md(res, out_dir), ""]
    except ImportError:
        pass
    if env:
        hw, v = env["hardware"], env["versions"]
        parts += ["## Measured on", "", md_table(["", ""], [
            ["hardware", hw["name"]], ["cpu", f"{hw['cpu']['model']} ({hw['cpu']['logical_cores']} logical cores)"],
            ["gpu", (hw["gpu"] or {}).get("name", "none")], ["RAM GiB", f"{hw['ram_bytes'] / 2**30:.0f}"],
            ["torch threads", env.get("torch_num_threads")], ["date", env.get("date")],
            ["git", (env.get("git") or {}).get("commit")],
            *[[k, val] for k, val in v.items()]]), ""]
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="refimpl report", description=__doc__)
    p.add_argument("--quick", action="store_true", help="QUICK mode of every notebook")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    p.add_argument("--out-dir", default=str(REPO_ROOT / "reports" / "latest"))
    p.add_argument("--notebooks", nargs="*", default=None, help="subset of notebook file names")
    args = p.parse_args(argv)
    from refimpl.config import resolve_device
    device = resolve_device(args.device)
    out = Path(args.out_dir).resolve()
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    nbs = sorted(NOTEBOOKS_DIR.glob("[0-9]*.ipynb"))
    if args.notebooks:
        nbs = [n for n in nbs if n.name in args.notebooks]
    t0 = time.perf_counter()
    try:
        for nb in nbs:
            print(f"[report] executing {nb.name} (QUICK={args.quick}, device={device})", flush=True)
            execute(nb, out, {"QUICK": args.quick, "DEVICE": device, "OUT_DIR": str(out)})
    except KeyboardInterrupt:
        print("[report] interrupted; writing the summary of what finished", file=sys.stderr)
    (out / "summary.md").write_text(summary(out, device, args.quick))
    print(f"[report] wrote {out} in {time.perf_counter() - t0:.0f} s; see {out / 'summary.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
