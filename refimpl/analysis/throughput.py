"""Notebook 02's unpaired check (``refimpl bench serve --design fresh``, Result bench "throughput"): the
encoder-length ladder in fresh processes, random-weight Whisper decoding a fixed number of tokens."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from refimpl.analysis import compare_pairs, figure, md_table, provenance, ratio_md, save, section_md, spread
from refimpl.bench.schema import Result
from refimpl.stats import MIN_PAIRS, median
from refimpl.variants import ENCODER_LEN_VARIANTS


def _items(res: Result, hf: Optional[Result]) -> list[tuple[str, dict]]:
    return list(res.variants.items()) + (list(hf.variants.items()) if hf else [])


def table(res: Result, hf: Optional[Result] = None) -> str:
    """Markdown per variant: req/s, tok/s, runs, registry calls and share of wall, steps, ms per step."""
    rows = []
    for v, r in _items(res, hf):
        runs = r["runs"]
        if not runs:
            rows.append([v, "no runs", "-", 0, "-", "-", "-", "-"])
            continue
        ms = [x.get("step_time_ms_median", x.get("batch_time_ms_median", 0)) for x in runs]
        rows.append([v, spread([x["requests_per_s"] for x in runs]),
                     spread([x["output_tokens_per_s"] for x in runs]), len(runs), runs[0]["registry_calls"],
                     f"{100 * median([x['registry_s_total'] / x['wall_s'] for x in runs]):.1f}%",
                     runs[0]["steps"], f"{median(ms):.1f}"])
    return md_table(["variant", "req/s median [min, max]", "out tok/s", "runs", "registry calls",
                     "registry share of wall", "steps (hf: batches)", "ms per step (hf: batch)"], rows)


def gains(res: Result, min_n: int = 1) -> dict[str, dict]:
    """``compare`` of median req/s of each ladder variant over the one before it."""
    order = [v for v in ENCODER_LEN_VARIANTS if v in res.variants]
    return compare_pairs(res, "requests_per_s", zip(order[1:], order), min_n)


def gains_table(res: Result, min_n: int = 1) -> str:
    return ratio_md(gains(res, min_n), "req/s")


def throughput_figure(res: Result, hf: Optional[Result], out_dir: Path):
    """req/s per variant (median, min-max), the generate() baseline beside it when given."""
    fig, ax = figure(7, 3.8)
    items = _items(res, hf)
    for i, (_v, r) in enumerate(items):
        xs = [x["requests_per_s"] for x in r["runs"]]
        if xs:
            m = median(xs)
            ax.bar(i, m, yerr=[[m - min(xs)], [max(xs) - m]], capsize=4, color=f"C{i}")
    ax.set_xticks(range(len(items)), [v for v, _ in items])
    ax.set_ylabel("requests / s (median, min-max)")
    p = res.params
    ax.set_title(f"Unpaired check: {p['model']}, {p['num_requests']} requests x {p['max_tokens']} tokens, "
                 f"batch {p['max_num_seqs']}\n{provenance(res)}", fontsize=9)
    return save(fig, out_dir, "throughput_variants")


def summary_md(res: Result, out_dir: Optional[Path] = None) -> str:
    """The unpaired check's section of summary.md (a gain from MIN_PAIRS runs a side, as notebook 02)."""
    p = res.params
    return section_md(f"## Throughput (PRs #24866 / #24989): {p['model']}, {p['num_requests']} requests x "
                      f"{p['max_tokens']} tokens, batch {p['max_num_seqs']}", res, ".", table(res),
                      gains_table(res, MIN_PAIRS))
