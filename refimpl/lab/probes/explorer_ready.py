"""The explorer page's ready time (issue 44): notebooks/00_explore.ipynb run as voila runs it, a fresh
kernel per load, each cell timed; loads of several trees interleaved, so a load change on a shared
machine hits them alike. Replaces the issue-44 note scripts (44_page_time.py)."""
from __future__ import annotations

import os
import statistics
import time
from pathlib import Path
from typing import Any

from refimpl.errors import ConfigError
from refimpl.lab.bench.schema import Result
from refimpl.lab.env import REPO_ROOT
from refimpl.lab.probes.common import result, variant
from refimpl.lab.probes.specs import ExplorerReadySpec

__all__ = ["NOTEBOOK", "explorer_ready", "load_page"]

NOTEBOOK = Path("notebooks") / "00_explore.ipynb"


def _label(source: str) -> str:
    """A code cell's first line that is not a comment, cut to 48 characters."""
    lines = [s for s in source.splitlines() if s.strip() and not s.lstrip().startswith("#")]
    return (lines[0] if lines else "")[:48]


def load_page(tree: Path, cell_timeout: int = 600) -> dict[str, Any]:
    """One load of ``tree``'s explorer notebook in a fresh kernel (cwd ``tree``/notebooks, ``tree`` first
    on PYTHONPATH, one thread), default parameters: ``{"ready_s", "kernel_start_s", "cells_s"}`` in
    seconds (``cells_s`` one per code cell). Raises ConfigError("trees") when a cell raises."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.read(tree / NOTEBOOK, as_version=4)
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1"}
    client = NotebookClient(nb, kernel_name="python3", timeout=cell_timeout,
                            resources={"metadata": {"path": str(tree / "notebooks")}})
    k0 = time.perf_counter()
    with client.setup_kernel(env=env):
        t0 = time.perf_counter()
        cells = []
        for i, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            c0 = time.perf_counter()
            try:
                client.execute_cell(cell, i)
            except CellExecutionError as e:
                raise ConfigError("trees", "a tree whose explorer page runs",
                                  f"{tree} cell {i}: {e.ename}: {e.evalue}") from None
            cells.append(time.perf_counter() - c0)
        ready = time.perf_counter() - t0
    return {"ready_s": ready, "kernel_start_s": t0 - k0, "cells_s": cells}


def explorer_ready(spec: ExplorerReadySpec) -> Result:
    """``loads`` loads of each tree (``trees``, default this clone), tree after tree each round; a
    variant per tree (its path), each run ``{"round", "ready_s", "kernel_start_s", "cells_s"}``, the
    summary ``ready_s`` and ``kernel_start_s`` and ``cell_medians_s`` (per code cell). ``params``:
    ``cells`` (each code cell's first line, of the first tree) and the load average (1 min) at the
    start and end (``loadavg``)."""
    spec.check()
    trees = [Path(t).resolve() for t in spec.trees] or [REPO_ROOT]
    load0 = os.getloadavg()[0]
    runs: dict[Path, list[dict[str, Any]]] = {t: [] for t in trees}
    for k in range(spec.loads):
        for t in trees:
            runs[t].append({"round": k, **load_page(t, spec.cell_timeout)})
    import nbformat

    nb = nbformat.read(trees[0] / NOTEBOOK, as_version=4)
    cells = [_label(c.source) for c in nb.cells if c.cell_type == "code"]
    variants = {str(t): variant(r, ["ready_s", "kernel_start_s"], cell_medians_s=[
        round(statistics.median(c), 3) for c in zip(*(x["cells_s"] for x in r))]) for t, r in runs.items()}
    return result(spec, variants, in_process=False, cells=cells, loadavg=[load0, os.getloadavg()[0]])
