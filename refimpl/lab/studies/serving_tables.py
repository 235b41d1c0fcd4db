"""The tables, sentences and figures of notebook 02's workload and WER sections and the serving part
of summary.md, as functions of a Result (ServingStudy in serving.py calls them)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from refimpl.lab.bench.schema import Result
from refimpl.lab.bench.specs import command_of
from refimpl.lab.stats import MIN_PAIRS
from refimpl.lab.studies import figure, md, md_table, provenance, save
from refimpl.lab.studies.throughput import paired_table

MODEL = "whisper-tiny.en"  # the model with real weights (refimpl[weights]): notebook 02's own


def is_sweep(res: Result) -> bool:
    return any("@" in v for v in res.variants)


def command(res: Result) -> str:
    return command_of(res.bench, res.params)


def corpus_wer(res: Result) -> float:
    return next(iter(res.variants.values()))["summary"]["corpus_wer"]


def _median_run(runs: list[dict]) -> dict:
    return {k: float(np.median([r[k] for r in runs])) for k, v in runs[0].items()
            if isinstance(v, (int, float))}


def workload_table(res: Result) -> str:
    """Markdown per engine: req/s, out tok/s, TTFT and E2E p50 / p90 / p99 s (medians over the runs)."""
    out = []
    for v in (v for v in res.variants if res.runs(v)):
        runs = res.runs(v)
        x, rps = _median_run(runs), [y["requests_per_s"] for y in runs]
        out.append([v, int(x["num_requests"]), len(runs),
                    f"{x['requests_per_s']:.3f} [{min(rps):.3f}, {max(rps):.3f}]",
                    f"{x['output_tokens_per_s']:.1f}",
                    *(f"{x[f'{m}_s_p{p}']:.2f}" for m in ("ttft", "e2e") for p in (50, 90, 99))])
    return md_table(["engine", "requests", "runs", "req/s median [min, max]", "out tok/s", "TTFT p50",
                     "p90", "p99", "E2E p50", "p90", "p99"], out)


def engine_over_hf_sentence(res: Result, min_pairs: int = 1) -> str:
    """The engine over generate() in requests/s and CPU seconds: ratio, 95% CI, pairs, state."""
    out = []
    for c in res.comparisons:
        what = ("requests/s, engine / generate()" if c["metric"] == "requests_per_s"
                else "CPU seconds, generate() / engine")
        value = (f"**{c['ratio']:.2f}x** [{c['low']:.2f}, {c['high']:.2f}]" if c["pairs"] >= min_pairs
                 else f"not shown (fewer than {min_pairs} pairs)")
        out.append(f"{what}: {value} ({c['pairs']} pair{'s' * (c['pairs'] != 1)}, "
                   f"{'resolved' if c['resolved'] else 'not resolved'})")
    return "; ".join(out)


def workload_md(res: Result) -> str:
    """What ``refimpl bench serve --design workload`` prints: the table and the engine-over-HF sentence."""
    return md(workload_table(res), engine_over_hf_sentence(res))


def workload_figure(res: Result, out_dir: Path):
    """TTFT and E2E percentiles (s) per engine, medians over the runs (req/s: workload_table)."""
    fig, ax = figure(8, 3.8)
    for i, v in enumerate(res.variants):
        x = _median_run(res.runs(v))
        for m, style in (("e2e", "o-"), ("ttft", "s--")):
            ax.plot([50, 90, 99], [x[f"{m}_s_p{p}"] for p in (50, 90, 99)], style, color=f"C{2 * i}",
                    label=f"{v} {m.upper()}")
    ax.set_xticks([50, 90, 99])
    ax.set_xlabel("percentile")
    ax.set_ylabel("seconds from arrival")
    fig.legend(loc="outside right upper", fontsize=8)
    p = res.params
    ax.set_title(f"Latency, engine against generate(): {p['num_requests']} requests\n(EOS stops, <= "
                 f"{p['max_tokens']} tokens), batch {p['max_num_seqs']}, {p['repeats']} pair(s)\n"
                 f"{provenance(res)}", fontsize=9)
    return save(fig, out_dir, "workload_engine_vs_hf")


def wer_table(res: Result) -> str:
    """Markdown: WER per clip with reference and hypothesis, the pooled WER, and how many outputs the
    ``max_new_tokens`` cap cut short (their missing words count as deletions)."""
    runs = [x for v in res.variants for x in res.runs(v)]
    out = [[x["clip"], f"{x['wer']:.3f}", x["reference"], x["hypothesis"]] for x in runs]
    out += [["corpus (pooled words)", f"{corpus_wer(res):.3f}", "", ""]] if out else []
    return md(md_table(["clip", "WER", "reference", "hypothesis"], out), truncation_note(res, runs))


def truncation_note(res: Result, runs: list[dict]) -> str:
    """A sentence naming the clips whose output stopped at the cap rather than at EOS ('' if none)."""
    cap = res.params.get("max_new_tokens")
    cut = [x["clip"] for x in runs if cap and x.get("tokens", 0) >= cap]
    if not cut:
        return "" if all("tokens" in x for x in runs) else (
            f"Outputs capped at {cap} new tokens (this run did not record how many each clip generated).")
    return (f"**Truncated**: {len(cut)} of {len(runs)} outputs stopped at the {cap}-token cap "
            f"(`--max-new-tokens {cap}`), not at EOS ({', '.join(cut)}): the words cut off count as "
            "deletions, so this WER measures the cap as much as the model.")


def summary_md(out_dir: Path) -> str:
    """The paired, workload and WER sections of summary.md from ``out_dir`` ('' if none): the real-weight
    model's (``MODEL``) first, then one section per other model (random weights: a GPU run's
    whisper-large-v3, say)."""
    pr, wl, wr = ([Result.load(p) for p in sorted(Path(out_dir).glob(pattern))
                   if not p.name.startswith(f"workload_{MODEL}_") or p.name == f"workload_{MODEL}_both_all.json"]
                  for pattern in ("paired_*.json", "workload_*_both*.json", f"wer_{MODEL}.json"))
    models = sorted({r.params["model"] for r in pr + wl}, key=lambda m: (m != MODEL, m))
    blocks = []
    for m in models or ([MODEL] if wr else []):
        mp, mw = [r for r in pr if r.params["model"] == m], [r for r in wl if r.params["model"] == m]
        first = (mp or mw or wr)[0]
        blocks.append(f"## Throughput, real weights: {m}, {provenance(first)}" if m == MODEL else
                      f"## Throughput (PRs #24866 / #24989), random weights: {m}, {provenance(first)}")
        if mp:
            blocks += ["Paired gains (CPU seconds, 95% CI): " + "; ".join(f"`{command(r)}`" for r in mp),
                       paired_table(mp, min_pairs=MIN_PAIRS)]
        blocks += [x for r in mw for x in (f"Engine against generate(): {engine_over_hf_sentence(r, MIN_PAIRS)}. "
                                           f"`{command(r)}`", workload_table(r))]
        if m == MODEL:
            blocks += [x for r in wr for x in (f"WER: `{command(r)}`", wer_table(r))]
    if not blocks:
        return ""
    return md(*blocks) + "\n"  # a trailing newline, as summary.md has always had after this section
