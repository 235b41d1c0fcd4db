"""Notebook 02's gains of the encoder-length fixes (vLLM PRs #24866, #24989). Paired (``bench serve
--design paired``): tables and figures; a gain from fewer than ``min_pairs`` pairs is not shown;
``stored``: (path, Result) pairs drawn hollow. The unpaired check (``--design fresh``, Result bench
"throughput"): the ladder in fresh processes, random-weight Whisper decoding a fixed number of tokens."""
from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

from refimpl.lab.bench.schema import Result
from refimpl.lab.stats import MIN_PAIRS, median
from refimpl.lab.studies import (
    compare_pairs,
    figure,
    md,
    md_table,
    provenance,
    ratio_md,
    save,
    section_md,
    spread,
)
from refimpl.lab.studies.gain_parts import parts_gain_of
from refimpl.variants import ENCODER_LEN_VARIANTS


def pairs_of(c: dict) -> int:
    return c.get("pairs", c.get("rounds", 0))


def rows(results: Sequence[Result], metric: str = "cpu_s", pairing: str = "round",
         min_pairs: int = 1) -> list[dict]:
    """The comparisons of ``results`` for ``metric`` / ``pairing`` with ``min_pairs`` pairs or more."""
    return [c for r in results for c in r.comparisons if c["metric"] == metric
            and c.get("pairing", "round") == pairing and pairs_of(c) >= min_pairs]


def _pct(x: float) -> str:
    return f"{100 * x:+.2f}%"


def paired_table(results: Sequence[Result], stored: Sequence[tuple[str, Result]] = (),
                 metric: str = "cpu_s", pairing: str = "round", min_pairs: int = 1,
                 where: str = "here") -> str:
    """Markdown per comparison: gain, 95% CI, resolved, pairs, cost model, the gain from its parts with its
    95% CI (gain_parts.parts_gain_of: removed calls x cost per call over steps x step time), timed s,
    where and on what."""
    out = []
    for where, r in [(where, r) for r in results] + list(stored):
        for c in rows([r], metric, pairing):
            shown, n = pairs_of(c) >= min_pairs, pairs_of(c)
            out.append([c["variant"], c["over"], _pct(c["gain"]) if shown else "-",
                        f"[{_pct(c['low'])}, {_pct(c['high'])}]" if shown else "-",
                        f"{100 * c['half_width']:.2f} pp" if shown else "-",
                        "yes" if c["resolved"] else f"no (< {MIN_PAIRS} pairs)" if n < MIN_PAIRS
                        else "no (holds 0)", n, _pct(c["cost_model_gain"]), _parts(r, c) if shown else "-",
                        f"{r.params['benchmark_s']:.0f}" if "benchmark_s" in r.params else "-", where,
                        provenance(r)])
    return md_table(["variant", "over", f"gain ({metric})", "95% CI", "half-width", "resolved", "pairs",
                     "cost model", "from its parts, 95% CI", "timed s", "measured", "on"], out)


def _parts(r: Result, c: dict) -> str:
    """The gain from its parts of comparison ``c`` with its interval, or "-" where the runs have no counters."""
    pg = parts_gain_of(r, c)
    iv = pg.interval if pg else None
    return f"{_pct(iv.estimate)} [{_pct(iv.low)}, {_pct(iv.high)}]" if iv else "-"


def _gains(fig, ax, what: str, results: Sequence[Result], stored: Sequence[tuple[str, Result]],
           metric: str, min_pairs: int, where: str, place) -> None:
    """Gains of ``results`` (filled) and ``stored`` (hollow) at x = ``place(r, c, hollow)``, titled."""
    live = "measured here (95% CI)" if where == "here" else f"{where} (95% CI)"
    for r, hollow in [(r, False) for r in results] + [(r, True) for _, r in stored]:
        for c in rows([r], metric, min_pairs=min_pairs):
            ax.errorbar(place(r, c, hollow), 100 * c["gain"], capsize=3, fmt="o",
                        yerr=[[100 * (c["gain"] - c["low"])], [100 * (c["high"] - c["gain"])]],
                        color="C1" if hollow else "C0", mfc="white" if hollow else None,
                        label=f"stored: {provenance(r)}" if hollow else live)
    shown = rows(results, metric, min_pairs=min_pairs)
    if not ax.get_legend_handles_labels()[0]:
        ax.text(0.5, 0.5, f"no gain shown: fewer than {min_pairs} pairs", ha="center", va="center",
                transform=ax.transAxes)
    ax.axhline(0, color="grey", lw=0.6)
    handles = dict(zip(*reversed(ax.get_legend_handles_labels())))
    if handles:
        fig.legend(handles.values(), handles.keys(), loc="outside lower center", fontsize=8, ncols=2)
    src = (list(results) if shown else [r for _, r in stored])[:1]
    ax.set_title(f"{what}, 95% CI" + (f"\n{provenance(src[0])}" if src else "")
                 + (f"\nmeasured {where}: no gain shown (fewer than {min_pairs} pairs)"
                    if results and not shown else ""), fontsize=9)


def paired_figure(results: Sequence[Result], stored: Sequence[tuple[str, Result]], out_dir: Path,
                  name: str, metric: str = "cpu_s", min_pairs: int = 1, where: str = "here"):
    """Gains per comparison (filled: ``results``; hollow: ``stored``) and the cost model (x)."""
    fig, ax = figure(9, 4.2)
    labels: list[str] = []

    def place(r: Result, c: dict, hollow: bool) -> float:
        lab = f"{c['variant']} / {c['over']}"
        labels.extend([lab] * (lab not in labels))
        x = labels.index(lab) + (0.15 if hollow else -0.15)
        if c.get("cost_model_gain"):
            ax.plot(x, 100 * c["cost_model_gain"], "kx", label="cost model")
        return x
    _gains(fig, ax, "Paired gains of the encoder-length fixes", results, stored, metric, min_pairs, where,
           place)
    ax.set_xticks(range(len(labels)), labels, fontsize=8)
    ax.set_xlim(-0.6, max(len(labels), 1) - 0.4)
    ax.set_ylabel(f"paired gain, {metric.replace('_s', ' seconds')} (%)")
    return save(fig, out_dir, name)


def encoder_batch_figure(res: Result, out_dir: Path, metric: str = "cpu_s", min_pairs: int = 1,
                         stored: Sequence[tuple[str, Result]] = (), where: str = "here"):
    """Gain of audios-per-step@N over the first variant against N, steps per block beside each point."""
    fig, ax = figure(8, 4.2)
    ns: set[int] = set()

    def place(r: Result, c: dict, hollow: bool) -> float:
        ns.add(n := int(c["variant"].split("@")[1]))
        runs = r.runs(c["variant"])
        ax.annotate(f"{sorted(x['steps'] for x in runs)[len(runs) // 2]} steps",
                    (pos := n * (1.06 if hollow else 1), 100 * c["gain"]), fontsize=7, xytext=(6, 0),
                    textcoords="offset points")
        return pos
    _gains(fig, ax, "Several audios per step (audios-per-step@N)", [res], stored, metric, min_pairs, where,
           place)
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(ns), [str(n) for n in sorted(ns)])
    ax.set_xlabel("N = max audios encoded per step")
    ax.set_ylabel(f"gain over {next(iter(res.variants))}, {metric} (%)")
    return save(fig, out_dir, "encoder_batch_sweep")


def table(res: Result) -> str:
    """Markdown per variant: req/s, tok/s, runs, registry calls and share of wall, steps, ms per step."""
    rows = []
    for v, r in res.variants.items():
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


def throughput_figure(res: Result, out_dir: Path):
    """req/s per variant (median, min-max; hf-generate among them when measured)."""
    fig, ax = figure(7, 3.8)
    items = list(res.variants.items())
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


def paired_md(res: Result) -> str:
    """What ``refimpl bench serve --design paired`` prints: the paired table and whether the tokens matched."""
    return md(paired_table([res]), f"Tokens identical across variants and rounds: "
                                   f"{res.params.get('tokens_identical', 'not recorded')}.")


def summary_md(res: Result, out_dir: Optional[Path] = None) -> str:
    """The unpaired check's section of summary.md (a gain from MIN_PAIRS runs a side, as notebook 02)."""
    p = res.params
    return section_md(f"## Throughput (PRs #24866 / #24989): {p['model']}, {p['num_requests']} requests x "
                      f"{p['max_tokens']} tokens, batch {p['max_num_seqs']}", res, ".", table(res),
                      gains_table(res, MIN_PAIRS))
