"""What the notebooks show, as functions: run the benchmarks, tabulate, plot, profile.

The notebooks under ``notebooks/`` stay thin: a parameters cell, then calls into
``refimpl.analysis.startup`` and ``refimpl.analysis.throughput``. Shared helpers here:
markdown tables, stored GPU results under ``results/``, saving figures.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

from refimpl.bench import trial
from refimpl.bench.common import profile_with_pyspy
from refimpl.bench.fresh import worker_command
from refimpl.bench.schema import Result
from refimpl.bench.specs import Spec
from refimpl.env import REPO_ROOT
from refimpl.stats import median, ratio_of_medians, summarize

RESULTS_DIR = REPO_ROOT / "results"


def md_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A GitHub-markdown table; floats shown with 3 significant digits."""
    def fmt(x: Any) -> str:
        return f"{x:.3g}" if isinstance(x, float) else str(x)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(fmt(x) for x in r) + " |" for r in rows]
    return "\n".join(lines)


def spread(values: Sequence[float]) -> str:
    """'median [min, max]' of ``values``."""
    if not values:
        return "-"
    s = summarize(values)
    return f"{s['median']:.3g} [{s['min']:.3g}, {s['max']:.3g}]"


def compare(a: Sequence[float], b: Sequence[float], a_name: str = "a", b_name: str = "b") -> dict:
    """median(a) / median(b) with the resolution rule of the paired gains
    (refimpl.bench.gains.MIN_PAIRS): {"estimate": ratio or None, "low", "high": 95% bootstrap
    interval (refimpl.stats.ratio_of_medians) or None, "n": runs of the smaller side, "state":
    a word}. A side without runs (a partial result) has no ratio ("no runs of <name>"); one run a
    side no interval; fewer than ``MIN_PAIRS`` runs a side is "not resolved (< 5 runs a side)"
    whatever its interval (with 2 or 3 runs a side the bootstrap medians take a handful of
    values and the interval is degenerate; even wholly separated ranges of 3 runs a side have a
    two-sided rank-test p of 2 / C(6, 3) = 0.10). Otherwise "resolved" when the interval
    excludes 1, "unresolved (interval holds 1)" when not."""
    from refimpl.stats import MIN_PAIRS
    n = min(len(a), len(b))
    out: dict[str, Any] = {"estimate": None, "low": None, "high": None, "n": n}
    if n == 0:  # a partial result (interrupted, or a run failed): nothing to compare
        out["state"] = "no runs a side" if not a and not b else f"no runs of {a_name if not a else b_name}"
    elif n < 2:
        out.update(estimate=median(a) / median(b), state=f"not resolved ({n} run a side)")
    else:
        ci = ratio_of_medians(a, b)
        out.update(estimate=ci.estimate, low=ci.low, high=ci.high,
                   state=(f"not resolved (< {MIN_PAIRS} runs a side)" if n < MIN_PAIRS
                          else "resolved" if ci.resolved else "unresolved (interval holds 1)"))
    return out


def ratio_table(res: Result, metric: str, pairs: Sequence[tuple[str, str]], label: str = "") -> str:
    """Markdown: for each (variant, base) pair, median(metric of variant) / median(metric of
    base) with a 95% bootstrap interval and whether it is resolved (``compare``: fewer than
    ``MIN_PAIRS`` runs a side is never resolved; a side without runs gets no ratio)."""
    rows = []
    for v, base in pairs:
        c = compare(res.values(v, metric), res.values(base, metric), v, base)
        rows.append([f"{v} / {base}", "-" if c["estimate"] is None else f"{c['estimate']:.3f}",
                     "-" if c["low"] is None else f"[{c['low']:.3f}, {c['high']:.3f}]", c["state"]])
    return md_table([f"ratio of median {label or metric}", "value", "95% CI", ""], rows)


def partial_note(res: Result) -> str:
    """A markdown line saying that ``res`` is partial (``params["interrupted"]``: Ctrl-C ended
    its runs; ``params["failed"]``: a run failed, first line of the error), else ''."""
    runs = ", ".join(f"{v} {len(r['runs'])}" for v, r in res.variants.items())
    if res.params.get("failed"):
        return f"**Partial result** (runs per variant: {runs}): {res.params['failed'].splitlines()[0]}"
    if res.params.get("interrupted"):
        return f"**Partial result** (runs per variant: {runs}): interrupted (Ctrl-C) before the last run"
    return ""


def stored_results(bench: str) -> list[tuple[str, Result]]:
    """Results committed under ``results/<hardware>/`` whose ``bench`` is ``bench``, as
    (path relative to the repository, Result). Never measured here, only read; a file that
    does not validate raises SchemaError (tests/test_results_schema.py keeps them valid)."""
    out = []
    for p in sorted(RESULTS_DIR.glob("*/*.json")):
        res = Result.load(p)
        if res.bench == bench:
            out.append((str(p.relative_to(REPO_ROOT)), res))
    return out


def measure(spec: Spec, quick: bool, out: Optional[Path] = None) -> Result:
    """``spec`` measured in this process (QUICK: smoke figures) or in fresh processes, written
    to ``out`` (a JSON path) when given - a partial Result too: after Ctrl-C
    (``params["interrupted"]``), and before a failing run raises RuntimeError
    (``params["failed"]``, refimpl.bench.trial.run), so a failed notebook still leaves the
    runs that finished."""
    return trial.run(spec, in_process=quick, out=out, check=True)


def save(fig, out_dir: Path, name: str) -> Path:
    """Save a matplotlib figure as PNG and SVG under ``out_dir``; returns the PNG path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out_dir / f"{name}.svg")
    fig.savefig(out_dir / f"{name}.png", dpi=110)
    return out_dir / f"{name}.png"


def flamegraph(spec: Spec, variant: str, out_dir: Path, name: str, *,
               speedscope: bool = True, rate: int = 50) -> Path | None:
    """py-spy flame graph (SVG, and speedscope JSON) of one run of ``variant`` of ``spec`` in a
    fresh worker process (``python -m refimpl.bench.worker``). Returns the SVG path, or None
    when py-spy could not record (never raises for that)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    cmd = worker_command(spec, variant, str(out_dir / f"{name}.run.json"))
    ok = profile_with_pyspy(cmd, out_dir / f"{name}.svg",
                            out_dir / f"{name}.speedscope.json" if speedscope else None, rate=rate)
    return out_dir / f"{name}.svg" if ok else None
