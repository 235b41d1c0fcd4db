"""What the notebooks show, as functions: run the benchmarks, tabulate, plot, profile.

The notebooks under ``notebooks/`` stay thin: a parameters cell, then calls into
``refimpl.analysis.startup`` and ``refimpl.analysis.throughput``. Shared helpers here:
markdown tables, stored GPU results under ``results/``, saving figures.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Iterable, Sequence

from refimpl.bench.common import profile_with_pyspy
from refimpl.env import REPO_ROOT
from refimpl.stats import summarize

RESULTS_DIR = REPO_ROOT / "results"


def md_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A GitHub-markdown table; floats shown with 3 significant digits."""
    def fmt(x: Any) -> str:
        return f"{x:.3g}" if isinstance(x, float) else str(x)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(fmt(x) for x in r) + " |" for r in rows]
    return "\n".join(lines)


def by_variant(res: dict) -> dict[str, dict]:
    """``{variant: result}`` for a single- or multi-variant bench JSON."""
    return res.get("by_variant") or {res["variant"]: res}


def spread(values: Sequence[float]) -> str:
    """'median [min, max]' of ``values``."""
    if not values:
        return "-"
    s = summarize(values)
    return f"{s['median']:.3g} [{s['min']:.3g}, {s['max']:.3g}]"


def stored_results(bench: str) -> list[dict]:
    """GPU (or other) results committed under ``results/<hardware>/``, whose ``bench`` field or
    file name starts with ``bench``; each gets ``_path``. Never measured here, only read."""
    out = []
    for p in sorted(RESULTS_DIR.glob("*/*.json")):
        try:
            d = json.loads(p.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if p.name.startswith(bench) or d.get("bench") == bench:
            d["_path"] = str(p.relative_to(REPO_ROOT))
            out.append(d)
    return out


def save(fig, out_dir: Path, name: str) -> Path:
    """Save a matplotlib figure as PNG and SVG under ``out_dir``; returns the PNG path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out_dir / f"{name}.svg")
    fig.savefig(out_dir / f"{name}.png", dpi=110)
    return out_dir / f"{name}.png"


def flamegraph(bench_argv: list[str], out_dir: Path, name: str, *, speedscope: bool = True,
               rate: int = 50) -> Path | None:
    """py-spy flame graph (SVG, and speedscope JSON) of one ``--worker`` bench run in a fresh
    process. ``bench_argv`` is e.g. ``["startup", "--model", ..., "--variant", "no-cache"]``.
    Returns the SVG path, or None when py-spy could not record (never raises for that)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = out_dir / f"{name}.run.json"
    cmd = [sys.executable, "-m", f"refimpl.bench.{bench_argv[0]}", *bench_argv[1:], "--worker",
           "--output-json", str(tmp)]
    ok = profile_with_pyspy(cmd, out_dir / f"{name}.svg",
                            out_dir / f"{name}.speedscope.json" if speedscope else None, rate=rate)
    return out_dir / f"{name}.svg" if ok else None
