"""Notebook 01's two-process section: each process's memory before and after ``reset_mm_cache``.

``run_two_process`` runs the start-up bench with ``--process-mode mp`` (refimpl.bench.two_process)
for both reset scopes (``v0.9.0``: the engine core P1 keeps what its profiling passes cached;
``all``), ``repeats`` fresh start-ups each (every repeat a fresh front end P0 and a fresh P1),
and puts the committed two-process runs (``results/<hardware>/``, ``process_mode`` "mp") of
the same model beside them. QUICK mode runs nothing and shows the committed runs only.
``memory_table`` shows, per row, the median [min, max] of both processes' processing-cache
bytes and RSS before / after the reset, then what one real request costs on the wire with and
without a mirror hit.
"""
from __future__ import annotations

from typing import Optional

from refimpl.analysis import md_table, stored_results
from refimpl.analysis.startup import StartupStudy
from refimpl.bench import trial
from refimpl.bench.specs import StartupSpec, parse_limits
from refimpl.bench.two_process import summarize_two_process

SCOPES = ("v0.9.0", "all")
REPEATS = 3
# 8192 tokens: Qwen2.5-VL-3B's dummy video is then its smallest (2 frames of the largest
# size, 16384 tokens, as at any length up to ~32k; 128000 gives 12 frames and ~14 GiB peak),
# so P1 peaks near 4.4 GiB RSS and one fresh two-process start-up takes ~25-45 s on this
# 2-core machine: 2 scopes x 3 repeats fit in ~3-4 min. Image and video both stay in, as in
# full mode; the mechanism (P1 keeps its profiling entries under v0.9.0) does not depend on
# the length, the bytes kept grow with it (measured: 588 MiB at 8192 and at 32768).
MAX_MODEL_LEN = 8192
_COLS = [("p0", "cache_bytes"), ("p0", "rss"), ("p1", "cache_bytes"), ("p1", "rss")]


def stored_two_process(model: str) -> dict[str, dict]:
    """{"<scope> (stored <file name>)": {"runs", "_path"}} of the committed two-process
    start-up results of ``model`` (results/<hardware>/, runs with ``process_mode`` "mp")."""
    found: dict[str, dict] = {}
    for path, res in stored_results("startup"):
        if res.params["model"] != model:
            continue
        runs = [r for v in res.variants.values() for r in v["runs"] if r.get("process_mode") == "mp"]
        for scope in SCOPES:
            mine = [r for r in runs if r["reset_scope"] == scope]
            if mine:
                found[f"{scope} (stored {path.rsplit('/', 1)[-1]})"] = {"runs": mine, "_path": path}
    return dict(sorted(found.items(), key=lambda kv: (SCOPES.index(kv[0].split()[0]), kv[0])))


def run_two_process(s: StartupStudy, repeats: int = REPEATS,
                    max_model_len: Optional[int] = MAX_MODEL_LEN) -> dict[str, dict]:
    """{row label: {"runs": [run record], "_path": where it comes from}}: the live runs
    (``"<scope> (this run)"``, full mode only; written to
    ``<out_dir>/twoproc_startup_<model>_<scope>.json``) then the committed ones
    (``"<scope> (stored <file>)"``). Warm-up off: the figures are bytes, not timings."""
    rows: dict[str, dict] = {}
    if not s.quick:
        for scope in SCOPES:
            spec = StartupSpec(model=s.model, device=s.device, variants=("0.9.0",),
                               repeats=repeats, warmup=False, max_model_len=max_model_len,
                               limit_mm_per_prompt=parse_limits(s.limits), process_mode="mp",
                               reset_scope=scope)
            res = trial.run(spec)
            path = s.out_dir / f"twoproc_startup_{s.model}_{scope}.json"
            res.write(path)
            rows[f"{scope} (this run)"] = {
                "runs": res.runs("0.9.0"),
                "_path": f"{path}, command: {spec.command(output_json=str(path))}"}
    return rows | stored_two_process(s.model)


def _spread(summary: dict, scale: float, fmt: str) -> str:
    lo, med, hi = (summary[k] / scale for k in ("min", "median", "max"))
    return f"{med:{fmt}}" if lo == hi else f"{med:{fmt}} [{lo:{fmt}}, {hi:{fmt}}]"


def memory_table(records: dict[str, dict]) -> str:
    """Markdown: per row, median [min, max] over the runs of P0's and P1's processing-cache
    MiB and RSS MiB before -> after the reset; then a table of the transport probe (bytes
    of one request with and without a mirror hit, ms to serialise it in P0, to decode both
    in P1) where the runs have one. A row without runs shows "no runs"."""
    head = ["row", "runs", "max_model_len", "limits"] + [
        f"{p.upper()} {'cache' if k == 'cache_bytes' else 'RSS'} MiB before -> after" for p, k in _COLS]
    rows, trows = [], []
    for label, rec in records.items():
        runs = rec["runs"]
        if not runs:  # a partial result (interrupted or failed before a start-up finished)
            rows.append([label, 0, "-", "-"] + ["no runs"] * len(_COLS))
            continue
        s = summarize_two_process(runs)
        limits = runs[0].get("limit_mm_per_prompt") or {}
        rows.append([label, len(runs), runs[0].get("max_model_len"),
                     ", ".join(f"{k}={v}" for k, v in limits.items()) or "default"] + [
            f"{_spread(s[f'{p}_{k}_before_reset'], 2**20, '.0f')} -> "
            f"{_spread(s[f'{p}_{k}_after_reset'], 2**20, '.0f')}" for p, k in _COLS])
        if "transport_bytes_miss" in s:
            trows.append([label, runs[0]["transport"].get("modality", "audio"),
                          _spread(s["transport_bytes_miss"], 1, ",.0f"),
                          _spread(s["transport_bytes_hit"], 1, ",.0f"),
                          _spread(s["transport_encode_s_miss"], 1e-3, ".2f"),
                          _spread(s["transport_encode_s_hit"], 1e-3, ".2f"),
                          _spread(s["transport_decode_s"], 1e-3, ".2f")])
    out = md_table(head, rows)
    if trows:
        out += "\n\nTransport of one real request (median [min, max] over the runs):\n\n" + md_table(
            ["row", "item", "bytes, mirror miss", "bytes, mirror hit", "serialise ms, miss",
             "serialise ms, hit", "P1 decode ms, both"], trows)
    return out
