"""Notebook 01's two-process section: each process's memory before and after ``reset_mm_cache``, for
both reset scopes of 0.9.0's row (measured in full mode) beside the committed rows."""
from __future__ import annotations

from refimpl.analysis import md_table
from refimpl.analysis.startup_tables import AFTER
from refimpl.bench.specs import StartupSpec, parse_limits
from refimpl.bench.startup import summarize_two_process

SCOPES = ("v0.9.0", "all")
REPEATS = 3
MAX_MODEL_LEN = 8192  # the smallest dummy video (the same up to ~32k tokens); the mechanism is the same
_COLS = [("p0", "cache_bytes"), ("p0", "rss"), ("p1", "cache_bytes"), ("p1", "rss")]
_TRANSPORT = (("bytes_miss", 1, ",.0f"), ("bytes_hit", 1, ",.0f"), ("encode_s_miss", 1e-3, ".2f"),
              ("encode_s_hit", 1e-3, ".2f"), ("decode_s", 1e-3, ".2f"))


def run_two_process(s, repeats: int = REPEATS, max_model_len: int = MAX_MODEL_LEN) -> dict[str, dict]:
    """{row label: {"runs", "_path"}}: full mode's runs of StartupStudy ``s``, then the committed ones."""
    rows: dict[str, dict] = {}
    names = {scope: f"twoproc_startup_{s.model}_{scope}.json" for scope in SCOPES}
    for scope, name in names.items() if s.mode == "full" else ():
        spec = StartupSpec(model=s.model, device=s.device, variants=(AFTER,), repeats=repeats, warmup=False,
                           max_model_len=max_model_len, limit_mm_per_prompt=parse_limits(s.limits),
                           process_mode="mp", reset_scope=scope)
        rows[f"{scope} (this run)"] = {"runs": s.obtain(name, spec).runs(AFTER), "_path":
                                       f"{s.out_dir / name}, command: {spec.command(output_json=name)}"}
    for scope, name in names.items():
        res = s.stored(name)
        if res is not None:
            rows[f"{scope} (stored {name})"] = {"_path": f"results/{s.hardware}/{name}", "runs": [
                r for v in res.variants.values() for r in v["runs"] if r.get("process_mode") == "mp"]}
    return rows


def _spread(summary: dict, scale: float, fmt: str) -> str:
    lo, med, hi = (summary[k] / scale for k in ("min", "median", "max"))
    return f"{med:{fmt}}" if lo == hi else f"{med:{fmt}} [{lo:{fmt}}, {hi:{fmt}}]"


def memory_table(records: dict[str, dict]) -> str:
    """Markdown per row: P0's and P1's cache and RSS MiB before -> after the reset, then the transport."""
    head = ["row", "runs", "max_model_len", "limits"] + [
        f"{p.upper()} {'cache' if k == 'cache_bytes' else 'RSS'} MiB before -> after" for p, k in _COLS]
    rows, trows = [], []
    for label, rec in records.items():
        runs = rec["runs"]
        if not runs:
            rows.append([label, 0, "-", "-"] + ["no runs"] * len(_COLS))
            continue
        s = summarize_two_process(runs)
        lim = ", ".join(f"{k}={v}" for k, v in (runs[0].get("limit_mm_per_prompt") or {}).items())
        rows.append([label, len(runs), runs[0].get("max_model_len"), lim or "default"] + [
            " -> ".join(_spread(s[f"{p}_{k}_{w}_reset"], 2**20, ".0f") for w in ("before", "after"))
            for p, k in _COLS])
        if "transport_bytes_miss" in s:
            trows.append([label, runs[0]["transport"].get("modality", "audio"),
                          *[_spread(s[f"transport_{k}"], scale, fmt) for k, scale, fmt in _TRANSPORT]])
    out = md_table(head, rows)
    if trows:
        out += "\n\nTransport of one real request (median [min, max] over the runs):\n\n" + md_table(
            ["row", "item", "bytes, mirror miss", "bytes, mirror hit", "serialise ms, miss",
             "serialise ms, hit", "P1 decode ms, both"], trows)
    return out
