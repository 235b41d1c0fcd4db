"""Notebook 01's tables: start-up and budget Results per variant, per phase, per measured part (``parts_s``:
dummy data, hashing, HF calls with and without items, the per-item split, the rest); two-process memory."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from refimpl.engine.startup_plan import CHECK_PHASE, PHASES, RESET_PHASE
from refimpl.lab.bench.schema import Result
from refimpl.lab.bench.startup import summarize_two_process
from refimpl.lab.stats import median
from refimpl.lab.studies import compare, compare_pairs, md_table, ratio_md, spread
from refimpl.variants import STARTUP_VARIANTS

PHASE_ORDER = ("config", CHECK_PHASE, *PHASES, RESET_PHASE)  # the bench's config phase, then the engine's
PART_COLUMNS = (("dummy data s", "dummy_s"), ("hashing s", "hash_s"), ("HF mm s", "hf_mm_s"),
                ("HF text-only s", "hf_text_only_s"), ("split per item s", "split_s"), ("rest s", "rest_s"))
NO_PARTS = "No split by part: these runs predate the per-part timings (`parts_s`)."


def parts_note(res: Result, before: str, after: str) -> Optional[str]:
    """Why the split of ``after`` against ``before`` cannot be shown (a row not measured, runs without
    ``parts_s``), or None when it can."""
    missing = [v for v in (before, after) if v not in measured(res)]
    if missing:
        return (f"No split by part: it compares `{after}` with `{before}`, and this run has no runs of "
                + ", ".join(f"`{v}`" for v in missing) + ".")
    return None if has_parts(res, (before, after)) else NO_PARTS
_MEM_COLS = [("p0", "cache_bytes"), ("p0", "rss"), ("p1", "cache_bytes"), ("p1", "rss")]
_TRANSPORT = (("bytes_miss", 1, ",.0f"), ("bytes_hit", 1, ",.0f"), ("encode_s_miss", 1e-3, ".2f"),
              ("encode_s_hit", 1e-3, ".2f"), ("decode_s", 1e-3, ".2f"))
TIME_LABEL = {"cpu_s": "start-up CPU s", "total_s": "start-up wall s"}
# vLLM 0.8.5's row (no cache during profiling) and 0.9.0's (the cache, 0.9.0's copying hasher)
BEFORE = next(v.name for v in STARTUP_VARIANTS.values() if not v.cache_during_profiling)
AFTER = next(v.name for v in STARTUP_VARIANTS.values()
             if v.cache_during_profiling and v.mm.hash_byte_path == "v0.9.0")


def measured(res: Result) -> list[str]:
    """Variants of ``res`` with runs, in STARTUP_VARIANTS (ladder) order."""
    order = list(STARTUP_VARIANTS)
    return sorted((v for v, r in res.variants.items() if r["runs"]),
                  key=lambda v: order.index(v) if v in order else len(order))


def time_key(res: Result) -> str:
    """"cpu_s" when every run records it (less inflated by other processes), else "total_s" (wall)."""
    runs = [x for r in res.variants.values() for x in r["runs"]]
    return "cpu_s" if runs and all("cpu_s" in x for x in runs) else "total_s"


def medians_table(res: Result) -> str:
    """Markdown per variant: start-up wall s (and CPU s when every run records it), HF passes and calls,
    cache hits/misses, cache and RSS MiB."""
    rows, cpu = [], int(time_key(res) == "cpu_s")
    for v, r in res.variants.items():
        runs = r["runs"]
        if not runs:
            rows.append([v, "-", *["-"] * cpu, 0, "no runs", *["-"] * 6])
            continue
        x = runs[0]
        rows.append([v, spread([y["total_s"] for y in runs]), *([spread([y["cpu_s"] for y in runs])] if cpu else []),
                     len(runs), x.get("hf_mm_passes"),
                     x.get("hf_processor_calls"), f"{x.get('cache_hits')}/{x.get('cache_misses')}",
                     *[f"{x.get(f'cache_bytes_{w}_reset', 0) / 2**20:.0f}" for w in ("before", "after")],
                     " -> ".join(spread([y[k] / 2**20 for y in runs if y.get(k) is not None], ".0f")
                                 for k in ("rss_before_reset", "rss_after_reset")),
                     spread([y["peak_rss_bytes"] / 2**30 for y in runs])])
    return md_table(["variant", "start-up wall s: median [min, max]", *["CPU s: median [min, max]"] * cpu, "runs", "HF mm passes", "HF calls (all)",
                     "cache hits/misses", "cache MiB before reset", "after reset",
                     "RSS MiB before -> after reset", "peak RSS GiB"], rows)


def base_row(res: Result) -> Optional[str]:
    """The row ratios are taken over: BEFORE (0.8.5) when the run has it, else the first row asked for."""
    return BEFORE if BEFORE in res.variants else next(iter(res.variants), None)


def ratios(res: Result, min_n: int = 1) -> dict[str, dict]:
    """``compare`` of each variant's start-up seconds (``time_key``) over ``base_row``'s."""
    base = base_row(res)
    return {} if base is None else compare_pairs(res, time_key(res), [(v, base) for v in res.variants
                                                                       if v != base], min_n)


def ratios_table(res: Result, min_n: int = 1) -> str:
    return ratio_md(ratios(res, min_n), TIME_LABEL[time_key(res)]) if len(res.variants) > 1 else ""


def passes_table(res: Result) -> str:
    """Markdown: HF-processor passes carrying multimodal data, per start-up phase and variant."""
    firsts = {v: res.runs(v)[0] for v in measured(res)}
    phases = [p for p in PHASE_ORDER if any(p in x.get("passes_by_phase", {}) for x in firsts.values())]
    return md_table(["variant", *phases, "total"], [[v, *[x["passes_by_phase"].get(p, 0) for p in phases],
                                                     x["hf_mm_passes"]] for v, x in firsts.items()])


def has_parts(res: Result, variants: tuple[str, ...] = (BEFORE, AFTER)) -> bool:
    """Whether every run of ``variants`` has them and carries ``parts_s``."""
    return all(v in res.variants and res.runs(v) for v in variants) and all(
        "parts_s" in run for v in variants for run in res.runs(v))


def part_values(res: Result, variant: str, call: Optional[int] = None) -> dict[str, list]:
    """Seconds per part (and ``total_s``) of each run of ``variant``: the start-up, or budget ``call``."""
    out: dict[str, list] = {}
    for run in res.runs(variant):
        total = run["total_s"] if call is None else run["calls_s"][call]
        p = run["parts_s"] if call is None else run["parts_s"][call]
        text, split = p.get("hf_text_only_s"), p.get("split_s")
        parts = {"total_s": total, "dummy_s": p["dummy_s"], "hash_s": p["hash_s"],
                 "hf_mm_s": p["hf_processor_s"] - (text or 0.0), "hf_text_only_s": text, "split_s": split,
                 "rest_s": total - p["dummy_s"] - p["hash_s"] - p["hf_processor_s"] - (split or 0.0)}
        for k, x in parts.items():
            out.setdefault(k, []).append(x)
    return out


def parts_table(res: Result) -> str:
    """Markdown per variant (and budget call): median [min, max] s of the whole and each part."""
    rows = []
    for v in measured(res):
        runs = res.runs(v)
        for c in range(len(runs[0]["calls_s"])) if res.bench == "budget" else [None]:
            vals = part_values(res, v, c)
            rows.append([v if c is None else f"{v} call {c + 1}", spread(vals["total_s"]),
                         *["-" if None in vals[k] else spread(vals[k]) for _, k in PART_COLUMNS],
                         spread([x["peak_rss_bytes"] / 2**30 for x in runs])])
    return md_table(["variant", "total wall s", *[h for h, _ in PART_COLUMNS], "peak RSS GiB"], rows)


def runs_word(res: Result) -> str:
    return "in-process runs" if res.env.get("in_process") else "fresh-process runs"


def hashing_share(res: Result, before: str = BEFORE, after: str = AFTER) -> dict:
    """Medians (s): HF time with items saved by ``after`` over ``before``, hashing added, their ratio (None
    unless every run of ``after`` spent less in HF calls with items than every run of ``before``: a share of
    a saving inside the runs' spread says nothing)."""
    a, b = part_values(res, after), part_values(res, before)
    saved, hash_s = median(b["hf_mm_s"]) - median(a["hf_mm_s"]), median(a["hash_s"]) - median(b["hash_s"])
    apart = max(a["hf_mm_s"]) < min(b["hf_mm_s"])
    return {"hf_saved_s": saved, "hash_s": hash_s, "share": hash_s / saved if apart else None}


def hashing_sentence(res: Result, before: str = BEFORE, after: str = AFTER) -> str:
    """One sentence, from ``hashing_share``: what share of what the cache saved its hashing cost."""
    if (why := parts_note(res, before, after)) is not None:
        return why
    sh, n = hashing_share(res, before, after), min(len(res.runs(before)), len(res.runs(after)))
    passes = [res.runs(v)[0]["hf_mm_passes"] for v in (after, before)]
    head = (f"Medians of {n} {runs_word(res)}: with {passes[0]} HF passes against {passes[1]}, `{after}` "
            f"spent {sh['hf_saved_s']:.1f} s less in HF calls with items than `{before}` and "
            f"{sh['hash_s']:.1f} s more hashing: ")
    if sh["share"] is None:
        return head + "the HF time saved lies within the spread of the runs, so no share of it is given."
    return head + (f"the hashing cost {100 * sh['share']:.0f}% of what the cache saved"
                   + (f", so `{after}` loses by it." if sh["share"] > 1 else "."))


def budget_table(res: Result) -> str:
    """Markdown: seconds of each successive budget call, median [min, max], HF passes per call."""
    n = max((len(r["runs"][0]["calls_s"]) for r in res.variants.values() if r["runs"]), default=0)
    rows = [[v, *([spread(c) for c in zip(*[x["calls_s"] for x in r["runs"]])] or ["-"] * n),
             r["runs"][0]["passes"] if r["runs"] else "no runs"] for v, r in res.variants.items()]
    return md_table(["variant", *[f"call {i + 1} wall s: median [min, max]" for i in range(n)],
                     "HF mm passes per call"], rows)


def call1_ratio(res: Result, num: str = AFTER, den: str = BEFORE, min_n: int = 1) -> dict:
    """Call 1 of ``num`` over ``den`` (``compare``) and whether their min-max ranges overlap."""
    a, b = ([run["calls_s"][0] for run in res.runs(k)] for k in (num, den))
    overlap = None if not (a and b) else not (min(a) > max(b) or min(b) > max(a))
    return {**compare(a, b, num, den, min_n), "ranges_overlap": overlap}


def call1_explained(res: Result, num: str = AFTER, den: str = BEFORE) -> str:
    """Markdown: per part, call 1 of ``num`` minus ``den`` (medians, wall s); each part's share of the
    difference and the largest named only when call 1's min-max ranges are apart (a difference within the
    runs' spread has no meaningful share)."""
    if (why := parts_note(res, den, num)) is not None:
        return why
    a, b = part_values(res, num, 0), part_values(res, den, 0)
    diff = {k: median(a[k]) - median(b[k]) for k in a if None not in a[k] + b[k]}
    total, apart = diff["total_s"], call1_ratio(res, num, den)["ranges_overlap"] is False
    rows = [[h, f"{median(b[k]):.2f}", f"{median(a[k]):.2f}", f"{diff[k]:+.2f}",
             f"{100 * diff[k] / total:+.0f}%" if apart else "-"] for h, k in PART_COLUMNS if k in diff]
    rows.append(["call 1 (whole)", f"{median(b['total_s']):.2f}", f"{median(a['total_s']):.2f}",
                 f"{total:+.2f}", "100%" if apart else "-"])
    top_h, top_k = max((hk for hk in PART_COLUMNS if hk[1] in diff), key=lambda hk: diff[hk[1]])
    said = (f"Call 1 of `{num}` takes {total:+.2f} s over `{den}` (medians of {len(a['total_s'])} and "
            f"{len(b['total_s'])} {runs_word(res)})")
    line = (f"{said}; the largest measured part of that difference is **{top_h[:-2]}** "
            f"({diff[top_k]:+.2f} s, {100 * diff[top_k] / total:.0f}% of it)." if apart else
            f"{said}, within the spread of the runs (their min-max ranges overlap): no part's share of it is shown.")
    head = ["part (median wall s)", den, num, "difference s", "share of difference"]
    return md_table(head, rows) + "\n\n" + line


def _spread(summary: dict, scale: float, fmt: str) -> str:
    lo, med, hi = (summary[k] / scale for k in ("min", "median", "max"))
    return f"{med:{fmt}}" if lo == hi else f"{med:{fmt}} [{lo:{fmt}}, {hi:{fmt}}]"


def memory_table(records: dict[str, dict]) -> str:
    """Markdown per row: P0's and P1's cache and RSS MiB before -> after the reset, then the transport."""
    head = ["row", "runs", "max_model_len", "limits"] + [
        f"{p.upper()} {'cache' if k == 'cache_bytes' else 'RSS'} MiB before -> after" for p, k in _MEM_COLS]
    rows, trows = [], []
    for label, rec in records.items():
        runs = rec["runs"]
        if not runs:
            rows.append([label, 0, "-", "-"] + ["no runs"] * len(_MEM_COLS))
            continue
        s = summarize_two_process(runs)
        lim = ", ".join(f"{k}={v}" for k, v in (runs[0].get("limit_mm_per_prompt") or {}).items())
        rows.append([label, len(runs), runs[0].get("max_model_len"), lim or "default"] + [
            " -> ".join(_spread(s[f"{p}_{k}_{w}_reset"], 2**20, ".0f") for w in ("before", "after"))
            for p, k in _MEM_COLS])
        if "transport_bytes_miss" in s:
            trows.append([label, runs[0]["transport"].get("modality", "audio"),
                          *[_spread(s[f"transport_{k}"], scale, fmt) for k, scale, fmt in _TRANSPORT]])
    out = md_table(head, rows)
    if trows:
        out += "\n\nTransport of one real request (median [min, max] over the runs):\n\n" + md_table(
            ["row", "item", "bytes, mirror miss", "bytes, mirror hit", "serialise ms, miss",
             "serialise ms, hit", "P1 decode ms, both"], trows)
    return out


def reporting_ab(folder: str | Path) -> dict[str, dict[str, list[float]]]:
    """Total seconds per row and mode ("on", "off") of a paired reporting on / off run's Results in ``folder``
    (``startup_*_reporting-<mode>_<round>.json``; the committed one was made by scripts/page_reporting_ab.sh,
    removed at issue 47, last at b9adc62), in round order."""
    out: dict[str, dict[str, list[float]]] = {}
    for f in sorted(Path(folder).glob("startup_*_reporting-*.json")):
        mode = f.name.rsplit("reporting-", 1)[1].split("_")[0]
        for v, x in Result.load(f).variants.items():
            out.setdefault(v, {}).setdefault(mode, []).extend(r["total_s"] for r in x["runs"])
    return out


def reporting_ab_table(folder: str | Path) -> str:
    """``reporting_ab`` as markdown: each row's seconds with reporting on and off, and on / off of the medians."""
    rows = [[v, ", ".join(f"{s:.1f}" for s in m.get("on", [])), ", ".join(f"{s:.1f}" for s in m.get("off", [])),
             f"{median(m['on']) / median(m['off']):.2f}x" if m.get("on") and m.get("off") else "-"]
            for v, m in reporting_ab(folder).items()]
    return md_table(["row", "reporting on: s", "reporting off: s", "on / off (median)"], rows)
