"""The throughput study (vLLM PRs #24866, #24989) behind notebooks/02_encoder_len_throughput.ipynb.

Runs ``refimpl bench throughput`` for the three encoder-length variants side by side and the
transformers generate() baseline, a py-spy flame graph of the ``registry`` variant, and a sweep
of output length showing how the gain of ``0.11.0`` over ``0.10.2+#24866`` shrinks as
the work per request grows, against the model gain = registry cost per request / work per request.
The sweep's tables and figure are in refimpl/analysis/throughput_sweep.py (re-exported here).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import matplotlib.pyplot as plt

from refimpl.analysis import compare, flamegraph, md_table, measure, partial_note, ratio_table, save, spread
from refimpl.analysis.throughput_sweep import sweep_figure, sweep_points, sweep_table  # noqa: F401
from refimpl.bench.schema import Result
from refimpl.bench.specs import HF as HF_VARIANT
from refimpl.bench.specs import ServeSpec, command_of, spec_from_params
from refimpl.stats import median
from refimpl.variants import ENCODER_LEN_VARIANTS

# the encoder-length ladder of PRs #24866 / #24989; audios-per-step is measured paired (analysis/serving.py)
LADDER = ("0.10.2", "0.10.2+#24866", "0.11.0")


@dataclass
class ThroughputStudy:
    """Parameters of one study run; ``quick`` shrinks it for the test suite: a handful of short
    requests, one repeat, two variants, runs in the notebook's process (not fresh-process
    figures)."""
    model: str = "whisper-tiny"
    device: str = "auto"
    repeats: int = 3
    quick: bool = False
    num_requests: int = 64
    max_tokens: int = 32
    max_num_seqs: int = 16
    sweep_max_tokens: Sequence[int] = (8, 64, 256)
    sweep_num_requests: int = 32
    out_dir: Path = Path("reports/latest")
    warmup_process: bool = True  # an untimed fresh process per variant before the timed ones
    variants: Sequence[str] = LADDER

    def __post_init__(self):
        self.out_dir = Path(self.out_dir)
        if self.quick:
            self.repeats, self.num_requests, self.max_tokens, self.max_num_seqs = 1, 6, 6, 3
            self.sweep_max_tokens, self.sweep_num_requests = (8,), 6
            self.variants = ("0.10.2", "0.11.0")  # the ladder's ends, one engine less

    def spec(self, variants: Optional[Sequence[str]] = None, **over) -> ServeSpec:
        """The throughput benchmark's spec for this study (``over``: spec fields to change)."""
        kw = dict(model=self.model, device=self.device, variants=tuple(variants or self.variants),
                  repeats=self.repeats, num_requests=self.num_requests,
                  max_tokens=self.max_tokens, max_num_seqs=self.max_num_seqs,
                  warmup=self.warmup_process and not self.quick,
                  **({"warmup_requests": 1} if self.quick else {}))
        return ServeSpec(design="fresh", **{**kw, **over})


def _measure(s: ThroughputStudy, spec: ServeSpec, name: str) -> Result:
    return measure(spec, s.quick, s.out_dir / name)


def run_variants(s: ThroughputStudy) -> Result:
    """The three variants of the ladder interleaved; writes ``throughput_<model>.json``."""
    return _measure(s, s.spec(), f"throughput_{s.model}.json")


def run_hf(s: ThroughputStudy) -> Result:
    """transformers generate() on the same requests in static batches; ``throughput_hf_<model>.json``."""
    return _measure(s, s.spec(variants=(HF_VARIANT,)), f"throughput_hf_{s.model}.json")


def _med(xs):
    xs = list(xs)
    return median(xs) if xs else float("nan")


def table(res: Result, hf: Optional[Result] = None) -> str:
    """Markdown: req/s and tok/s median [min, max], registry calls and share of wall time
    ("no runs" for a variant without runs)."""
    rows = []
    items = list(res.variants.items()) + (list(hf.variants.items()) if hf else [])
    for v, r in items:
        runs = r["runs"]
        if not runs:  # a partial result: this variant has no run
            rows.append([v, "no runs", "-", 0, "-", "-", "-", "-"])
            continue
        rows.append([v, spread([x["requests_per_s"] for x in runs]),
                     spread([x["output_tokens_per_s"] for x in runs]), len(runs),
                     runs[0]["registry_calls"],
                     f"{100 * _med([x['registry_s_total'] / x['wall_s'] for x in runs]):.1f}%",
                     runs[0]["steps"],
                     f"{_med([x.get('step_time_ms_median', x.get('batch_time_ms_median', 0)) for x in runs]):.1f}"])
    return md_table(["variant", "req/s median [min, max]", "out tok/s", "runs", "registry calls",
                     "registry share of wall", "steps (hf: batches)", "ms per step (hf: batch)"], rows)


def gains_table(res: Result) -> str:
    """Markdown: ratio of median req/s of each variant over the one before it (registry ->
    0.10.2+#24866 -> 0.11.0) with its 95% bootstrap interval."""
    order = [v for v in ENCODER_LEN_VARIANTS if v in res.variants]
    return ratio_table(res, "requests_per_s", list(zip(order[1:], order)), "req/s")


def gains(res: Result, hf: Optional[Result] = None) -> dict[str, dict]:
    """Measured ratios of median req/s: 0.10.2+#24866 over 0.10.2, 0.11.0 over
    0.10.2+#24866 (as gains: ratio - 1), and the engine (0.11.0) over transformers
    generate() (as a ratio); each a ``refimpl.analysis.compare`` dict of the ratio (estimate,
    low, high, n, state): no ratio for a side without runs, and fewer than MIN_PAIRS runs a
    side is "not resolved" whatever the value."""
    v = res.variants
    out = {}
    for cur, base in (("0.10.2+#24866", "0.10.2"), ("0.11.0", "0.10.2+#24866")):
        if cur in v and base in v:
            out[f"{cur} over {base}"] = compare(res.values(cur, "requests_per_s"),
                                                res.values(base, "requests_per_s"), cur, base)
    if hf and "0.11.0" in v:
        out["engine / hf generate() (ratio)"] = compare(
            res.values("0.11.0", "requests_per_s"), hf.values(HF_VARIANT, "requests_per_s"),
            "0.11.0", HF_VARIANT)
    return out


def gains_md(g: dict[str, dict]) -> str:
    """Markdown of ``gains``: each value (a gain in %, the engine over generate() as a ratio)
    with its 95% interval and state; "-" where a side has no runs."""
    def fmt(k: str, x: Optional[float]) -> str:
        if x is None:
            return "-"
        return f"{x:.2f}x" if "ratio" in k else f"{100 * (x - 1):+.1f}%"
    return md_table(["measured", "value", "95% CI", ""],
                    [[k, fmt(k, c["estimate"]),
                      "-" if c["low"] is None else f"[{fmt(k, c['low'])}, {fmt(k, c['high'])}]", c["state"]]
                     for k, c in g.items()])


def throughput_figure(res: Result, hf: Optional[Result], out_dir: Path):
    """Bars of req/s (median, min-max whiskers) per variant and for the HF baseline."""
    fig, ax = plt.subplots(figsize=(7, 3.8))
    items = list(res.variants.items()) + (list(hf.variants.items()) if hf else [])
    for i, (_v, r) in enumerate(items):
        xs = [x["requests_per_s"] for x in r["runs"]]
        if xs:  # a partial result may hold a variant without runs: no bar
            m = _med(xs)
            ax.bar(i, m, yerr=[[m - min(xs)], [max(xs) - m]], capsize=4)
    ax.set_xticks(range(len(items)), [v for v, _ in items])
    ax.set_ylabel("requests / s")
    p = res.params
    ax.set_title(f"{p['model']}: {p['num_requests']} requests x {p['max_tokens']} tokens, "
                 f"batch {p['max_num_seqs']}, {res.hardware_name}", fontsize=9)
    save(fig, out_dir, "throughput_variants")
    return fig


def flame_registry(s: ThroughputStudy) -> Optional[Path]:
    """py-spy flame graph of one ``registry`` run: get_encdec_max_encoder_len in the hot path."""
    return flamegraph(s.spec(), "0.10.2", s.out_dir, "flame_throughput_registry",
                      speedscope=not s.quick)


def run_sweep(s: ThroughputStudy) -> Result:
    """0.10.2+#24866 vs 0.11.0 over ``sweep_max_tokens``; ``throughput_sweep_<model>.json``.

    Each point is a throughput Result (``throughput_sweep_<model>_t<N>.json``); the sweep is a
    Result of bench ``throughput-sweep`` with one variant per point (``max_tokens=N``) whose
    runs are the point's runs and whose summary holds: measured ``gain`` (ratio of median
    req/s - 1, None when a side has no runs, with its 95% interval ``gain_low`` /
    ``gain_high``), ``n`` (runs of the smaller side) and ``state`` (refimpl.analysis.compare:
    fewer than MIN_PAIRS runs a side is not resolved), and the model gain =
    registry seconds per request (measured in 0.10.2+#24866: the scheduler's per-admission
    calls) / wall seconds per request (0.11.0)."""
    points, env = {}, {}
    for t in s.sweep_max_tokens:
        spec = s.spec(variants=("0.10.2+#24866", "0.11.0"), max_tokens=t,
                      num_requests=s.sweep_num_requests,
                      warmup=False)  # the main runs warmed the machine
        r = _measure(s, spec, f"throughput_sweep_{s.model}_t{t}.json")
        env = r.env
        rc, sc = r.runs("0.10.2+#24866"), r.runs("0.11.0")
        cost = _med(x["registry_s_total"] / x["num_requests"] for x in rc)
        work = _med(x["wall_s"] / x["num_requests"] for x in sc)
        c = compare(r.values("0.11.0", "requests_per_s"),
                    r.values("0.10.2+#24866", "requests_per_s"), "0.11.0", "0.10.2+#24866")
        summary = {"max_tokens": t, "registry_s_per_request": cost, "work_s_per_request": work,
                   "model_gain": cost / work, "n": c["n"], "state": c["state"],
                   "gain": None if c["estimate"] is None else c["estimate"] - 1}
        if c["low"] is not None:
            summary.update(gain_low=c["low"] - 1, gain_high=c["high"] - 1)
        points[f"max_tokens={t}"] = {"runs": rc + sc, "summary": summary}
    out = Result("throughput-sweep", env, {
        "model": s.model, "variants": ["0.10.2+#24866", "0.11.0"],
        "max_tokens": list(s.sweep_max_tokens), "num_requests": s.sweep_num_requests,
        "max_num_seqs": s.max_num_seqs, "repeats": s.repeats}, points)
    out.write(s.out_dir / f"throughput_sweep_{s.model}.json")
    return out


def hf_command(hf: Result, output_json: str) -> str:
    """The command that repeats a stored generate() Result, written to ``output_json`` (the
    name the report reads it from, so it does not overwrite the engine's JSON)."""
    spec = spec_from_params("throughput", hf.params)
    return spec.command(output_json=output_json, in_process=hf.env.get("in_process", False))


def summary_md(res: Result, out_dir: Path) -> str:
    """The throughput section of reports/latest/summary.md."""
    p = res.params
    hf_p = out_dir / f"throughput_hf_{p['model']}.json"
    hf = Result.load(hf_p) if hf_p.exists() else None
    g = gains(res, hf)
    parts = [f"## Throughput (PRs #24866 / #24989): {p['model']} on {res.hardware_name} "
             f"({res.env['device']}), {p['num_requests']} requests x {p['max_tokens']} tokens, "
             f"batch {p['max_num_seqs']}", "",
             f"Command: `{command_of(res.bench, p, in_process=res.env.get('in_process', False))}`"
             + (f"; generate(): `{hf_command(hf, hf_p.name)}`" if hf else ""), "",
             *([partial_note(res), ""] if partial_note(res) else []), table(res, hf), "", gains_table(res), "",
             gains_md(g)]
    sw = out_dir / f"throughput_sweep_{p['model']}.json"
    if sw.exists():
        parts += ["", "Sweep (gain of 0.11.0 over 0.10.2+#24866 by output length):", "",
                  sweep_table(Result.load(sw))]
    return "\n".join(parts)
