"""Notebook 01's two-process section: each process's memory before and after ``reset_mm_cache``, for
both reset scopes of 0.9.0's row (StartupStudy.two_process: measured in full mode), committed rows beside."""
from __future__ import annotations

from refimpl.analysis import md_table
from refimpl.bench.two_process import summarize_two_process

SCOPES = ("v0.9.0", "all")
REPEATS = 3
MAX_MODEL_LEN = 8192  # the smallest dummy video (the same up to ~32k tokens); the mechanism is the same
_COLS = [("p0", "cache_bytes"), ("p0", "rss"), ("p1", "cache_bytes"), ("p1", "rss")]
_TRANSPORT = (("bytes_miss", 1, ",.0f"), ("bytes_hit", 1, ",.0f"), ("encode_s_miss", 1e-3, ".2f"),
              ("encode_s_hit", 1e-3, ".2f"), ("decode_s", 1e-3, ".2f"))


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
