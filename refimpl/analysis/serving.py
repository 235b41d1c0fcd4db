"""The throughput study's second stage (notebooks/02, issue 7): real whisper-tiny.en weights.

Each ``run_*`` function measures live, in this process, through the bench's own ``run(spec)``
(``refimpl bench paired | workload | wer``: ``PairedSpec`` / ``WorkloadSpec`` / ``WerSpec``), writes the result JSON under ``out_dir`` with the
name it has under ``results/<hardware>/``, and returns the Result; ``command(result)`` is the
CLI line that repeats it. Tables and figures take live Results and, beside them, the stored
ones (``refimpl.analysis.stored_results``) as a comparison, never as this machine's figure.

Budgets: every live part is sized by a parameter (seconds of timed rounds for the paired runs,
requests for the workload) and ``Stage.timings`` records the wall seconds each part took.
The paired tables and figures are in refimpl/analysis/paired.py (re-exported here).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np

from refimpl.analysis import md_table, save
from refimpl.analysis.paired import (  # noqa: F401  (re-exported: notebook 02 calls S.<name>)
    encoder_batch_figure,
    model_curve_figure,
    paired_figure,
    paired_table,
)
from refimpl.bench import trial
from refimpl.bench.schema import Result
from refimpl.bench.specs import ServeSpec, WerSpec, command_of

MODEL = "whisper-tiny.en"


@dataclass
class Stage:
    """Parameters of the second stage. ``paired_budget_s``: {variant ladder: seconds of timed
    rounds}; ``sweep_n``: audios per step of the audios-per-step sweep; ``quick`` (the tests):
    one paired run of the three variants, 2 rounds of 2 requests x 4 tokens, 4 workload
    requests in one pair, 8 WER tokens. ``workload_repeats``: pairs of the engine against
    generate() (E H H E ...). ``timings``: wall seconds per part, filled as parts run."""
    out_dir: Path = Path("reports/latest")
    quick: bool = False
    paired_budget_s: dict[str, float] = field(default_factory=lambda: {
        "0.10.2,0.10.2+#24866": 150.0, "0.10.2+#24866,0.11.0": 450.0})
    block_requests: int = 8
    block_max_tokens: int = 16
    sweep_n: Sequence[int] = (2, 4, 8)
    sweep_budget_s: float = 240.0
    workload_requests: int = 64
    workload_max_tokens: int = 96
    workload_repeats: int = 5
    max_num_seqs: int = 16
    wer_max_new_tokens: int = 64
    timings: dict[str, float] = field(default_factory=dict)

    def __post_init__(self):
        self.out_dir = Path(self.out_dir)
        if self.quick:
            self.paired_budget_s = {"0.10.2,0.10.2+#24866,0.11.0": 0.0}
            self.block_requests, self.block_max_tokens, self.sweep_n = 2, 4, (2,)
            self.workload_requests, self.workload_max_tokens, self.wer_max_new_tokens = 4, 8, 8
            self.workload_repeats = 1

    def timed(self, part: str, fn, *a, **kw):
        t0 = time.perf_counter()
        try:
            return fn(*a, **kw)
        finally:
            self.timings[part] = time.perf_counter() - t0

    def _paired(self, variant: str, budget_s: float, **over) -> Result:
        spec = ServeSpec(design="paired", model=MODEL, variants=tuple(variant.split(",")), **over,
                         num_requests=self.block_requests, max_tokens=self.block_max_tokens,
                         max_num_seqs=max(8, self.block_requests))
        spec = spec.replace(repeats=2, warmup=False) if self.quick else spec.replace(budget_s=budget_s)
        return trial.run(spec, check=True)


def run_paired(s: Stage) -> list[Result]:
    """The seed's fix, paired: one ``refimpl bench paired`` run per ladder of
    ``s.paired_budget_s`` (fixed-time design); ``paired_<model>_<first>_<last>.json``."""
    out = []
    for variant, budget in s.paired_budget_s.items():
        vs = variant.split(",")
        res = s.timed(f"paired {variant}", s._paired, variant, budget)
        res.write(s.out_dir / f"paired_{MODEL}_{vs[0]}_{vs[-1]}.json")
        out.append(res)
    return out


def run_encoder_batch(s: Stage) -> Result:
    """The next bottleneck: ``audios-per-step@N`` for N in ``s.sweep_n``, each against
    0.11.0, paired; ``paired_<model>_encoder-batch_sweep.json``."""
    variant = ",".join(["0.11.0"] + [f"audios-per-step@{n}" for n in s.sweep_n])
    res = s.timed("audios-per-step sweep", s._paired, variant, s.sweep_budget_s, against="first")
    res.write(s.out_dir / f"paired_{MODEL}_encoder-batch_sweep.json")
    return res


def run_workload(s: Stage) -> list[Result]:
    """The engine (0.11.0) and transformers' generate() in static batches on the
    same EOS-stopping workload (all arrivals at 0 s), ``s.workload_repeats`` pairs in this
    process (``--engine both``); ``workload_<model>_both_all.json``. A list of one Result."""
    spec = ServeSpec(design="workload", model=MODEL, num_requests=s.workload_requests,
                     max_tokens=s.workload_max_tokens, max_num_seqs=s.max_num_seqs,
                     repeats=s.workload_repeats)
    spec = spec.replace(warmup_requests=1) if s.quick else spec
    res = s.timed("workload engine vs generate()", trial.run, spec, check=True)
    res.write(s.out_dir / f"workload_{MODEL}_both_all.json")
    return [res]


def run_wer(s: Stage) -> Result:
    """WER per clip of generate() with the real weights; ``wer_<model>.json``."""
    res = s.timed("wer", trial.run, WerSpec(max_new_tokens=s.wer_max_new_tokens), check=True)
    res.write(s.out_dir / f"wer_{MODEL}.json")
    return res


def command(res: Result) -> str:
    """The CLI line that repeats ``res`` (paired, workload or wer): its spec's ``command()``."""
    return command_of(res.bench, res.params)


def timings_table(s: Stage) -> str:
    """Markdown: wall seconds each live part took here."""
    return md_table(["part", "wall s"], [[k, f"{v:.0f}"] for k, v in s.timings.items()]
                    + [["total", f"{sum(s.timings.values()):.0f}"]])


def _median_run(runs: list[dict]) -> dict:
    """Each numeric field's median over ``runs`` (one run: itself)."""
    return {k: float(np.median([r[k] for r in runs])) for k, v in runs[0].items()
            if isinstance(v, (int, float))}


def workload_table(results: Sequence[Result], stored: Sequence[tuple[str, Result]] = ()) -> str:
    """Markdown: requests/s, output tokens/s, TTFT and E2E p50 / p90 / p99 (s) per engine,
    each the median over the result's runs (``runs`` column)."""
    rows = []
    for where, r in [("here", r) for r in results] + list(stored):
        for v in r.variants:
            runs = r.runs(v)
            x, rps = _median_run(runs), [y["requests_per_s"] for y in runs]
            spread = f" [{min(rps):.3f}, {max(rps):.3f}]" if len(runs) > 1 else ""
            rows.append([v, int(x["num_requests"]), len(runs), f"{x['requests_per_s']:.3f}{spread}",
                         f"{x['output_tokens_per_s']:.1f}",
                         *(f"{x[f'ttft_s_p{p}']:.2f}" for p in (50, 90, 99)),
                         *(f"{x[f'e2e_s_p{p}']:.2f}" for p in (50, 90, 99)), where])
    return md_table(["engine", "requests", "runs", "req/s median [min, max]", "out tok/s", "TTFT p50",
                     "p90", "p99", "E2E p50", "p90", "p99", "measured"], rows)


def _comparison(results: Sequence[Result], metric: str) -> dict | None:
    return next((c for r in results for c in r.comparisons if c["metric"] == metric), None)


def engine_over_hf(results: Sequence[Result]) -> float:
    """requests/s of the engine over generate()'s: the paired median ratio of an
    ``--engine both`` Result, else the ratio of two single-engine Results' first runs."""
    c = _comparison(results, "requests_per_s")
    if c is not None:
        return float(c["ratio"])
    rps = {r.params["engine"]: r.runs(next(iter(r.variants)))[0]["requests_per_s"] for r in results}
    return rps["refimpl"] / rps["hf"]


def engine_over_hf_sentence(results: Sequence[Result]) -> str:
    """Markdown: the engine over generate() in requests/s and in CPU seconds, each with its
    95% interval, pairs and whether it is resolved (one line per metric)."""
    out = []
    for metric, what in (("requests_per_s", "requests/s, engine / generate()"),
                         ("cpu_s", "CPU seconds, generate() / engine")):
        c = _comparison(results, metric)
        if c is None:
            continue
        state = "resolved" if c["resolved"] else "not resolved"
        out.append(f"{what}: **{c['ratio']:.2f}x** [{c['low']:.2f}, {c['high']:.2f}] "
                   f"({c['pairs']} pair{'' if c['pairs'] == 1 else 's'}, {state})")
    return "; ".join(out) or f"requests/s, engine / generate(): {engine_over_hf(results):.2f}x (one run each)"


def workload_figure(results: Sequence[Result], out_dir: Path):
    """Left: requests/s per engine (median, bars from min to max over runs); right: TTFT and
    E2E percentiles (s) per engine (median over runs)."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(8, 3.4))
    pairs = [(v, r.runs(v)) for r in results for v in r.variants]
    names = [v for v, _ in pairs]
    meds = [_median_run(runs) for _, runs in pairs]
    rps = [[y["requests_per_s"] for y in runs] for _, runs in pairs]
    mid = [m["requests_per_s"] for m in meds]
    a.bar(names, mid, color=["C0", "C2"][:len(names)],
          yerr=[[m - min(x) for m, x in zip(mid, rps)], [max(x) - m for m, x in zip(mid, rps)]], capsize=4)
    a.set_ylabel("requests / s")
    for i, (n, x) in enumerate(zip(names, meds)):
        b.plot([50, 90, 99], [x[f"e2e_s_p{p}"] for p in (50, 90, 99)], "o-", color=f"C{2 * i}", label=f"{n} E2E")
        b.plot([50, 90, 99], [x[f"ttft_s_p{p}"] for p in (50, 90, 99)], "s--", color=f"C{2 * i}", label=f"{n} TTFT")
    b.set_xlabel("percentile")
    b.set_ylabel("seconds from arrival")
    b.legend(fontsize=7)
    p = results[0].params
    fig.suptitle(f"{p['model']}: {p['num_requests']} requests (EOS stops, <= {p['max_tokens']} tokens), "
                 f"batch {p['max_num_seqs']}, {len(rps[0])} run(s) each, {results[0].hardware_name}", fontsize=8)
    return save(fig, out_dir, "workload_engine_vs_hf")


def wer_table(res: Result) -> str:
    """Markdown: WER per clip with reference and hypothesis, and the pooled WER."""
    rows = [[x["clip"], f"{x['wer']:.3f}", x["reference"], x["hypothesis"]] for v in res.variants for x in res.runs(v)]
    rows.append(["corpus (pooled words)", f"{next(iter(res.variants.values()))['summary']['corpus_wer']:.3f}", "", ""])
    return md_table(["clip", "WER", "reference", "hypothesis"], rows)


def summary_md(out_dir: Path) -> str:
    """The second stage's section of summary.md, from the JSONs ``run_*`` wrote in ``out_dir``
    (empty string when none is there): each table with the command that produced it."""
    def load(pattern: str) -> list[Result]:
        return [Result.load(p) for p in sorted(Path(out_dir).glob(pattern))]
    paired, wl, wer = load(f"paired_{MODEL}_*.json"), load(f"workload_{MODEL}_*_all.json"), load(f"wer_{MODEL}.json")
    if not (paired or wl or wer):
        return ""
    hw = (paired or wl or wer)[0].hardware_name
    parts = [f"## Throughput, second stage: {MODEL} real weights on {hw}", ""]
    if paired:
        parts += ["Paired gains (CPU seconds, 95% CI): " + "; ".join(f"`{command(r)}`" for r in paired), "",
                  paired_table(paired), ""]
    both = [r for r in wl if r.params.get("engine") == "both"]
    wl = both[-1:] or sorted(wl, key=lambda r: r.params["engine"] != "refimpl")
    if both or len(wl) == 2:
        parts += [f"Engine against generate(): {engine_over_hf_sentence(wl)}. "
                  + "; ".join(f"`{command(r)}`" for r in wl), "", workload_table(wl), ""]
    for r in wer:
        parts += [f"WER: `{command(r)}`", "", wer_table(r), ""]
    return "\n".join(parts)
