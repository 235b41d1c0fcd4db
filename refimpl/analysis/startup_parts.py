"""Where the start-up seconds go (vLLM PR #17935): each run's measured parts.

Splits a start-up (or one ``compute_encoder_budget`` call of the reviewer's experiment) into
the parts the benchmark timed (``parts_s``: building dummy data, hashing, HF processor calls
with and without multimodal items, per-item split) and the rest; tabulates them, explains
call 1's extra seconds and how much of the cache's saving hashing ate. Used by
refimpl/analysis/startup.py and notebook 01.
"""
from __future__ import annotations

from typing import Optional

from refimpl.analysis import md_table, spread
from refimpl.bench.schema import Result
from refimpl.stats import median

PART_COLUMNS = (("dummy data s", "dummy_s"), ("hashing s", "hash_s"), ("HF mm s", "hf_mm_s"),
                ("HF text-only s", "hf_text_only_s"), ("split per item s", "split_s"), ("rest s", "rest_s"))


def _parts(run: dict, parts: dict, total: float) -> dict:
    """Seconds per part of one run (or one budget call): the measured ``parts_s`` fields, HF
    time split into calls with and without multimodal items, and ``rest_s`` = ``total`` minus
    all parts (engine work outside the multimodal processor). Parts a run did not record
    (results from before they were measured) are None and stay in ``rest_s`` / ``hf_mm_s``."""
    text, split = parts.get("hf_text_only_s"), parts.get("split_s")
    return {"dummy_s": parts["dummy_s"], "hash_s": parts["hash_s"],
            "hf_mm_s": parts["hf_processor_s"] - (text or 0.0), "hf_text_only_s": text, "split_s": split,
            "rest_s": total - parts["dummy_s"] - parts["hash_s"] - parts["hf_processor_s"] - (split or 0.0)}


def _cell(values: list) -> str:
    return "-" if any(x is None for x in values) else spread(values)


def has_parts(res: Result, variants: tuple[str, ...]) -> bool:
    """Whether every run of ``variants`` carries the per-part timings (``parts_s``); results
    written before those timings existed (results/cpu-intel-xeon-2c) do not."""
    return all("parts_s" in run for v in variants for run in res.runs(v))


def part_values(res: Result, variant: str, call: Optional[int] = None) -> dict[str, list[float]]:
    """Per part (keys of PART_COLUMNS plus ``total_s``), the seconds of each run of ``variant``:
    the whole start-up, or budget call ``call`` (0-based). All from measured JSON fields."""
    out: dict[str, list[float]] = {}
    for run in res.runs(variant):
        if call is None:
            total, parts = run["total_s"], run["parts_s"]
        else:
            total, parts = run["calls_s"][call], run["parts_s"][call]
        for k, x in {"total_s": total, **_parts(run, parts, total)}.items():
            out.setdefault(k, []).append(x)
    return out


def parts_table(res: Result) -> str:
    """Markdown: per variant (and per budget call), median [min, max] seconds of the whole
    start-up (or call) and of each measured part (PART_COLUMNS: building dummy data, hashing,
    HF calls with multimodal items, text-only HF calls, per-item split and copies, the rest),
    and peak RSS GiB."""
    rows = []
    for v, r in res.variants.items():
        runs = r["runs"]
        if not runs:
            continue
        calls = range(len(runs[0]["calls_s"])) if res.bench == "budget" else [None]
        for c in calls:
            vals = part_values(res, v, c)
            rows.append([v if c is None else f"{v} call {c + 1}", spread(vals["total_s"]),
                         *[_cell(vals[k]) for _, k in PART_COLUMNS],
                         spread([run["peak_rss_bytes"] / 2**30 for run in runs])])
    return md_table(["variant", "total s", *[h for h, _ in PART_COLUMNS], "peak RSS GiB"], rows)


def call1_explained(res: Result, num: str = "0.9.0", den: str = "0.8.5") -> str:
    """Markdown: where call 1 of ``num`` spends its extra seconds over call 1 of ``den``: per
    part, median of ``num`` minus median of ``den`` (s) and its share of the difference of the
    call medians, then one sentence naming the largest part. Medians of measured fields only."""
    a, b = part_values(res, num, 0), part_values(res, den, 0)
    known = [k for k in a if None not in a[k] + b[k]]
    diff = {k: median(a[k]) - median(b[k]) for k in known}
    total = diff["total_s"]
    rows = [[h, f"{median(b[k]):.2f}", f"{median(a[k]):.2f}", f"{diff[k]:+.2f}",
             f"{100 * diff[k] / total:+.0f}%" if total else "-"] for h, k in PART_COLUMNS if k in diff]
    rows.append(["call 1 (whole)", f"{median(b['total_s']):.2f}", f"{median(a['total_s']):.2f}",
                 f"{total:+.2f}", "100%"])
    top_h, top_k = max((hk for hk in PART_COLUMNS if hk[1] in diff), key=lambda hk: diff[hk[1]])
    line = (f"Call 1 of `{num}` takes {total:+.2f} s over `{den}` (medians of {len(a['total_s'])} and "
            f"{len(b['total_s'])} fresh processes); the largest measured part of that difference is "
            f"**{top_h[:-2]}** ({diff[top_k]:+.2f} s, {100 * diff[top_k] / total:.0f}% of it).") if total else ""
    return md_table(["part (median s)", den, num, "difference s", "share of difference"], rows) + "\n\n" + line


def hashing_share(res: Result, before: str = "0.8.5", after: str = "0.9.0") -> dict:
    """How much of ``after``'s start-up saving over ``before`` its hashing ate (medians, s):
    ``saved_s`` = total(before) - total(after) (the net saving; negative when ``after`` is
    slower); ``hash_s`` = hashing seconds in ``after`` minus those in ``before``;
    ``gross_s`` = saved_s + hash_s, the saving had hashing been free; ``share`` =
    hash_s / gross_s, the part of the gross saving spent hashing (> 1: more than all of it)."""
    tot = {k: median(res.values(k, "total_s")) for k in (before, after)}
    h = {k: median(run["parts_s"]["hash_s"] for run in res.runs(k)) for k in (before, after)}
    saved, hash_s = tot[before] - tot[after], h[after] - h[before]
    gross = saved + hash_s
    return {"saved_s": saved, "hash_s": hash_s, "gross_s": gross,
            "share": hash_s / gross if gross > 0 else float("nan")}


def hashing_sentence(res: Result, before: str = "0.8.5", after: str = "0.9.0") -> str:
    """One plain sentence, from ``hashing_share``'s medians, on how much of ``after``'s saving
    over ``before`` the hashing ate."""
    sh = hashing_share(res, before, after)
    n = min(len(res.runs(before)), len(res.runs(after)))
    head = (f"Medians of {n} fresh-process start-ups: `{after}` hashed for {sh['hash_s']:.1f} s; without "
            f"that it would have saved {sh['gross_s']:.1f} s over `{before}`; ")
    if sh["gross_s"] <= 0:
        return head + f"it saved nothing even before hashing (net {sh['saved_s']:+.1f} s)."
    if sh["saved_s"] < 0:
        return head + (f"hashing ate all of that saving and {-sh['saved_s']:.1f} s more "
                       f"({100 * sh['share']:.0f}% of the gross saving): `{after}` starts up slower.")
    return head + (f"hashing ate {100 * sh['share']:.0f}% of it, leaving a net saving of "
                   f"{sh['saved_s']:.1f} s.")


def hash_paths_sentence(res: Result, variants=("0.9.0", "0.9.0+#19484", "0.9.0+#24925")) -> str:
    """One sentence comparing the variants that share the int64 dummy video and differ only in
    the hasher's byte path: median hashing seconds and median start-up seconds of each."""
    have = [v for v in variants if res.runs(v)] if all(v in res.variants for v in variants) else []
    if len(have) < 2:
        return ""
    parts = [f"`{v}` {median(r['parts_s']['hash_s'] for r in res.runs(v)):.1f} s hashing, "
             f"{median(res.values(v, 'total_s')):.1f} s start-up" for v in have]
    return ("Same int64 dummy video, only the hasher's copies differ (medians): " + "; ".join(parts) + ".")
