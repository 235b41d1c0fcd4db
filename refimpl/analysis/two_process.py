"""Notebook 01's two-process section: each process's memory before and after ``reset_mm_cache``.

``run_two_process`` runs ``refimpl bench startup --process-mode mp`` once per reset scope
(``v0.9.0``: the engine core keeps its profiling entries; ``all``), one fresh process each:
the figures are bytes, not timings. QUICK mode runs nothing and shows the committed runs
(start-up results under ``results/`` whose runs have ``process_mode`` "mp").
"""
from __future__ import annotations

from refimpl.analysis import md_table, stored_results
from refimpl.analysis.startup import StartupStudy
from refimpl.bench.orchestrate import run_fresh

SCOPES = ("v0.9.0", "all")
_COLS = [("p0", "cache_bytes"), ("p0", "rss"), ("p1", "cache_bytes"), ("p1", "rss")]


def run_two_process(s: StartupStudy) -> dict[str, dict]:
    """{reset scope: the run record}; QUICK: the committed records of ``s.model`` instead."""
    if s.quick:
        found = {}
        for path, res in stored_results("startup"):
            for run in (r for v in res.variants.values() for r in v["runs"]):
                if res.params["model"] == s.model and run.get("process_mode") == "mp":
                    found[run["reset_scope"]] = run | {"_path": path}
        return {scope: found[scope] for scope in SCOPES if scope in found}
    out = {}
    for scope in SCOPES:
        spec = s.spec(("cache-reset",)).replace(repeats=1, warmup=False, process_mode="mp",
                                                reset_scope=scope)
        res = run_fresh(spec)
        res.write(s.out_dir / f"twoproc_startup_{s.model}_{scope}.json")
        out[scope] = res.runs("cache-reset")[0]
    return out


def memory_table(records: dict[str, dict]) -> str:
    """Markdown: per reset scope, cache bytes and RSS of P0 and P1 before / after (MiB)."""
    head = ["reset scope"] + [f"{p.upper()} {'cache' if k == 'cache_bytes' else 'RSS'} before / after (MiB)"
                              for p, k in _COLS]
    rows = [[scope] + [f"{r[f'{p}_{k}_before_reset'] / 2**20:.0f} / {r[f'{p}_{k}_after_reset'] / 2**20:.0f}"
                       for p, k in _COLS]
            for scope, r in records.items()]
    return md_table(head, rows)
