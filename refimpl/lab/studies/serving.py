"""The throughput study (vLLM PRs #24866, #24989) of notebook 02: ``ServingStudy``, the workload and
WER tables and figures (the paired gains and the unpaired check: throughput.py)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Optional, Sequence

import numpy as np

from refimpl.lab.bench.schema import Result
from refimpl.lab.bench.specs import ServeSpec, WerSpec, command_of
from refimpl.lab.stats import MIN_PAIRS
from refimpl.lab.studies import (
    REFERENCE,
    RESULTS_DIR,
    Shown,
    Study,
    figure,
    flamegraph,
    md,
    md_table,
    provenance,
    save,
)
from refimpl.lab.studies import gpu as G
from refimpl.lab.studies import throughput as T
from refimpl.lab.studies import whisper_sites as W
from refimpl.lab.studies.throughput import gains, paired_table, pairs_of, rows

MODEL = "whisper-tiny.en"


@dataclass
class ServingStudy(Study):
    """Notebook 02: paired ladders (``paired_budget_s``: {ladder: timed s}), the audios-per-step sweep,
    the engine against generate(), WER, the unpaired check. No gain from fewer than ``min_n`` pairs."""
    values_name: ClassVar[str] = "values_serving.json"
    device: str = "cpu"
    paired_budget_s: dict = field(default_factory=lambda: {
        "0.10.2,0.10.2+#24866": 120.0, "0.10.2+#24866,0.11.0": 240.0})  # these, the sweep's 120 s and 32
    # workload requests: make report's hour on a slow day (64 requests took 88 s a run on 2026-12-03 evening);
    # the README's +#24989 figure is the committed 840 s run
    block_requests: int = 8
    block_max_tokens: int = 16
    encoder_batch_n: Sequence[int] = (2, 4, 8)
    sweep_budget_s: float = 120.0
    workload_requests: int = 32
    workload_max_tokens: int = 96
    workload_repeats: int = 5
    max_num_seqs: int = 16
    wer_max_new_tokens: int = 64
    fresh_model: str = "whisper-tiny"
    repeats: int = 2
    num_requests: int = 16
    max_tokens: int = 16
    min_n: int = MIN_PAIRS
    paired_runs: list = field(default_factory=list, init=False, repr=False)  # paired_section's, for abba_section

    def __post_init__(self):
        super().__post_init__()
        if self.quick:
            self.paired_budget_s = {"0.10.2,0.10.2+#24866,0.11.0": 0.0}
            self.block_requests, self.block_max_tokens, self.encoder_batch_n = 2, 4, (2,)
            self.workload_requests, self.workload_max_tokens, self.wer_max_new_tokens = 4, 8, 8
            self.workload_repeats, self.repeats, self.num_requests, self.max_tokens = 1, 1, 6, 6

    def _paired(self, name: str, ladder: str, budget_s: float, **over) -> Result:
        """``paired_<model>_<name>.json``: ``ladder`` in paired blocks for ``budget_s`` (QUICK: 2 rounds)."""
        spec = ServeSpec(design="paired", model=MODEL, variants=tuple(ladder.split(",")), **over,
                         num_requests=self.block_requests, max_tokens=self.block_max_tokens,
                         max_num_seqs=max(8, self.block_requests))
        spec = spec.replace(repeats=2, warmup=False) if self.quick else spec.replace(budget_s=budget_s)
        return self.obtain(f"paired_{MODEL}_{name}.json", spec)

    def paired(self) -> list[Result]:
        """One paired run per ladder of ``paired_budget_s``: ``paired_<model>_<first>_<last>.json``."""
        out = [self._paired(f"{ladder.split(',')[0]}_{ladder.split(',')[-1]}", ladder, budget)
               for ladder, budget in self.paired_budget_s.items()]
        self.record(paired=self._gains(out))
        return out

    def encoder_batch(self) -> Result:
        """audios-per-step@N for N in ``encoder_batch_n`` against 0.11.0, paired."""
        ladder = ",".join(["0.11.0"] + [f"audios-per-step@{n}" for n in self.encoder_batch_n])
        res = self._paired("audios-per-step_sweep", ladder, self.sweep_budget_s, against="first")
        self.record(encoder_batch=self._gains([res]))
        return res

    def _gains(self, results: list[Result]) -> dict:
        return {f"{c['variant']} over {c['over']}": {
            "pairs": pairs_of(c), "resolved": c["resolved"], "cost_model_gain": c["cost_model_gain"],
            **({k: c[k] for k in ("gain", "low", "high")} if pairs_of(c) >= self.min_n else {"gain": None}),
            "provenance": provenance(r), "tokens_identical": r.params.get("tokens_identical"),
            "registry_calls": {v: sum(x["registry_calls"] for x in r.runs(v))
                               for v in (c["variant"], c["over"])}} for r in results for c in rows([r])}

    def workload(self) -> Result:
        """The engine (0.11.0) and generate() on one EOS workload, pairs E H H E."""
        spec = ServeSpec(design="workload", model=MODEL, num_requests=self.workload_requests,
                         max_tokens=self.workload_max_tokens, max_num_seqs=self.max_num_seqs,
                         repeats=self.workload_repeats, **self._warmup())
        res = self.obtain(f"workload_{MODEL}_both_all.json", spec)
        self.record(workload={c["metric"]: {"pairs": c["pairs"], "resolved": c["resolved"], **(
            {k: c[k] for k in ("ratio", "low", "high")} if c["pairs"] >= self.min_n else {"ratio": None})}
            for c in res.comparisons} | {"provenance": provenance(res)})
        return res

    def wer(self) -> Result:
        """WER per clip of generate() with the real weights: ``wer_<model>.json``."""
        res = self.obtain(f"wer_{MODEL}.json", WerSpec(max_new_tokens=self.wer_max_new_tokens))
        self.record(wer={"corpus_wer": corpus_wer(res),
                         "clips": sum(len(r["runs"]) for r in res.variants.values())})
        return res

    def _warmup(self) -> dict:  # QUICK: one untimed request instead of the benches' default
        return {"warmup_requests": 1} if self.quick else {}

    def throughput_spec(self) -> ServeSpec:
        return ServeSpec(design="fresh", model=self.fresh_model, device=self.device, repeats=self.repeats,
                         variants=("0.10.2", "0.10.2+#24866", "0.11.0"), warmup=False,
                         num_requests=self.num_requests, max_tokens=self.max_tokens,
                         max_num_seqs=min(self.max_num_seqs, self.num_requests), **self._warmup())

    def unpaired(self) -> Result:
        """The ladder in fresh processes (QUICK: in this process): ``throughput_<model>.json``."""
        res = self.obtain(f"throughput_{self.fresh_model}.json", self.throughput_spec(), self.quick)
        calls = {v: r["runs"][0]["registry_calls"] for v, r in res.variants.items() if r["runs"]}
        self.record(unpaired={"provenance": provenance(res), "registry_calls": calls,
                              "gains": gains(res, min_n=self.min_n)})
        return res

    def flame_registry(self) -> Optional[Path]:
        """py-spy flame graph of one ``0.10.2`` run, the registry in the hot path (full mode only)."""
        return (flamegraph(self.throughput_spec(), "0.10.2", self.out_dir, "flame_throughput_registry")
                if self.mode == "full" else None)

    def paired_section(self) -> Shown:
        """(1) The seed's fix: the paired gains (``paired``) beside the other committed runs, each command."""
        self.paired_runs = paired = self.paired()
        stored = [(p, r) for p, r in self.comparison("paired_") if not is_sweep(r)]
        return Shown([paired_table(paired, stored, min_pairs=self.min_n, where=self.where), "\n".join(
            f"* `{command(r)}`: {r.params['rounds_run']} rounds in {r.params['benchmark_s']:.0f} s, "
            f"tokens identical: {r.params['tokens_identical']}" for r in paired),
            T.paired_figure(paired, stored, self.out_dir, "paired_gains", min_pairs=self.min_n, where=self.where)])

    def abba_section(self) -> Shown:
        """The same blocks paired A B B A, and the same in wall seconds."""
        return Shown([paired_table(self.paired_runs, pairing=p, metric=m, min_pairs=self.min_n, where=self.where)
                      for p, m in (("abba", "cpu_s"), ("round", "wall_s"))])

    def sites_section(self) -> Shown:
        """(2) Each registry call site: the seed's and the kit's sentences, the gain model against step time."""
        live = sorted(self.out_dir.glob("paired_*.json")) if self.mode != "stored" else None
        points = W.measured_points() + (W.measured_points(live) if live is not None else [])
        out = Shown([W.seed_sentence(points) + "\n\n" + W.kit_sentence(points)])
        if ref := W.reference(points):
            fig = W.gain_figure(W.model_of(ref), points, title=f"Whisper registry-call fixes: model at the call cost, "
                                f"calls and steps of {ref['source']}\n({ref['hardware']}, {ref['requests']} requests per block)")
            fig.savefig(self.out_dir / "gain_vs_step_time.png", dpi=110)
            out.append(fig)
        return out

    def gpu_section(self) -> Shown:
        """The committed GPU runs (``results/gpu-*/``): gains, workload, registry share per row beside this machine's."""
        cpu = REFERENCE if self.hardware.startswith("gpu-") else self.hardware
        self.record(gpu_registry=[r for r in G.registry_rows() if r["gpu"]])
        return Shown([G.serving_md(cpu=cpu)])

    def workload_section(self) -> Shown:
        """(3) The engine against generate() (``workload``): table, ratio sentence, latency figure."""
        wl = self.workload()
        return Shown([workload_table(wl), f"Engine against generate(): {engine_over_hf_sentence(wl, self.min_n)}. "
                      f"`{command(wl)}`", workload_figure(wl, self.out_dir)])

    def encoder_batch_section(self) -> Shown:
        """(4) audios-per-step@N against 0.11.0 (``encoder_batch``) beside the committed sweep."""
        eb = self.encoder_batch()
        stored = [(p, r) for p, r in self.comparison("paired_") if is_sweep(r)]
        return Shown([paired_table([eb], stored, min_pairs=self.min_n, where=self.where),
                      f"`{command(eb)}`: {eb.params['rounds_run']} rounds in {eb.params['benchmark_s']:.0f} s",
                      T.encoder_batch_figure(eb, self.out_dir, min_pairs=self.min_n, stored=stored, where=self.where)])

    def wer_section(self) -> Shown:
        w = self.wer()
        return Shown([f"`{command(w)}`\n\n" + wer_table(w)])

    def unpaired_section(self) -> Shown:
        """The unpaired check (``unpaired``): medians, gains, figure."""
        res = self.unpaired()
        return Shown([T.table(res), T.gains_table(res, self.min_n), T.throughput_figure(res, self.out_dir)])

    def flame_section(self) -> Shown:
        """The py-spy flame graph of the 0.10.2 row (``flame_registry``; full mode only)."""
        p = self.flame_registry()
        return Shown([f"`{p}`", p] if p else [f"{self.mode} mode: no flame graph" if self.mode != "full"
                                              else "py-spy could not record here"])

    def comparison(self, prefix: str) -> list[tuple[str, Result]]:
        """The committed ``<prefix>*.json`` of ``hardware`` not already shown: beside live runs every one,
        in stored mode the further runs of the same ladders (e.g. the 840 s paired run)."""
        paths = sorted((RESULTS_DIR / self.hardware).glob(f"{prefix}*.json"))
        return [(f"results/{self.hardware}/{p.name}", Result.load(p)) for p in paths if p.name not in self.shown]


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
