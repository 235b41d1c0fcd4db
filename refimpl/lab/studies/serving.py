"""The throughput study (vLLM PRs #24866, #24989) of notebook 02: ``ServingStudy`` (its workload and
WER tables and figures: serving_tables.py; the paired gains and the unpaired check: throughput.py;
the GPU runs: gpu.py)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Optional, Sequence

from refimpl.lab.bench.schema import Result
from refimpl.lab.bench.specs import ServeSpec, WerSpec
from refimpl.lab.stats import MIN_PAIRS
from refimpl.lab.studies import (
    REFERENCE,
    RESULTS_DIR,
    Shown,
    Study,
    flamegraph,
    provenance,
)
from refimpl.lab.studies import gain_map as GM
from refimpl.lab.studies import gain_parts as GP
from refimpl.lab.studies import gpu as G
from refimpl.lab.studies import throughput as T
from refimpl.lab.studies import whisper_sites as W
from refimpl.lab.studies.serving_tables import (  # noqa: F401  (notebook 02's and the CLI's names)
    MODEL,
    command,
    corpus_wer,
    engine_over_hf_sentence,
    is_sweep,
    summary_md,
    truncation_note,
    wer_table,
    workload_figure,
    workload_md,
    workload_table,
)
from refimpl.lab.studies.throughput import gains, paired_table, pairs_of, rows


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

    def prediction_section(self) -> Shown:
        """(2) continued: each fix's paired gain beside its gain from its parts (gain_parts), and the
        predicted gain over concurrency C and output length L from the reference run's measured c and T
        (gain_map; a prediction), the ~3% contour drawn, the measured gains marked at their block."""
        live = sorted(self.out_dir.glob("paired_*.json")) if self.mode != "stored" else None
        points = W.measured_points() + (W.measured_points(live) if live is not None else [])
        ref = W.reference(points)
        if ref is None:
            return Shown(["No paired run of #24989: no measured call cost and step time to predict from."])
        marks = [{"C": p["max_num_seqs"], "L": p["max_tokens"], **{k: p[k] for k in ("fix", "gain", "low", "high")}}
                 for p in (W.reference(points, f) for f in W.FIXES) if p is not None]
        fig = GM.prediction_figure(ref["registry_call_s"], ref["step_s"], measured=marks, source=ref["source"])
        fig.savefig(self.out_dir / "gain_over_concurrency_and_length.png", dpi=110)
        where = GM.seed_gain_boundary(GM.predicted_gains(ref["registry_call_s"], ref["step_s"])["#24989"])
        self.record(prediction={"call_s": ref["registry_call_s"], "step_s": ref["step_s"], "source": ref["source"],
                                "seed_gain_between_l": {str(c): ab for c, ab in where.items()}},
                    parts_gain=GP.points_gains(points))
        return Shown([GP.points_table(points), "Prediction (not a measurement), #24989 at c = "
                      f"{1e3 * ref['registry_call_s']:.2f} ms and T = {1e3 * ref['step_s']:.1f} ms: ~3% falls "
                      + ("; ".join(f"at C = {c} between L = {a} and {b}" for c, a, b in
                                   ((c, *ab) for c, ab in where.items())) or "nowhere on the grid") + ".", fig])

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
