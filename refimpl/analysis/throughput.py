"""The throughput study (vLLM PRs #24866, #24989) behind notebooks/02_encoder_len_throughput.ipynb.

Runs ``refimpl bench throughput`` for the three encoder-length variants side by side and the
transformers generate() baseline, a py-spy flame graph of the ``registry`` variant, and a sweep
of output length showing how the gain of ``scheduler-config`` over ``runner-config`` shrinks as
the work per request grows, against the model gain = registry cost per request / work per request.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import matplotlib.pyplot as plt

from refimpl.analysis import by_variant, flamegraph, md_table, save, spread
from refimpl.stats import median
from refimpl.variants import ENCODER_LEN_VARIANTS

SPLIT_ORDER = ("schedule", "prepare", "model", "sample", "update")


@dataclass
class ThroughputStudy:
    """Parameters of one study run; ``quick`` shrinks it for the test suite: a handful of short
    requests, one repeat, runs in the notebook's process (not fresh-process figures)."""
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

    def __post_init__(self):
        self.out_dir = Path(self.out_dir)
        if self.quick:
            self.repeats, self.num_requests, self.max_tokens, self.max_num_seqs = 1, 6, 6, 3
            self.sweep_max_tokens, self.sweep_num_requests = (8,), 6

    def argv(self, **over) -> list[str]:
        v = {"model": self.model, "device": self.device, "num-requests": self.num_requests,
             "max-tokens": self.max_tokens, "max-num-seqs": self.max_num_seqs,
             "repeats": self.repeats, **over}
        a = [x for k, val in v.items() for x in (f"--{k}", str(val))]
        return a + (["--no-warmup", "--in-process", "--warmup-requests", "1"] if self.quick else [])


def _run(argv: list[str], out: Path) -> dict:
    from refimpl.bench.throughput import main
    main(argv + ["--output-json", str(out)])
    return json.loads(out.read_text())


def run_variants(s: ThroughputStudy) -> dict:
    """The three variants interleaved; writes ``throughput_<model>.json``."""
    return _run(s.argv() + ["--variant", ",".join(ENCODER_LEN_VARIANTS)],
                s.out_dir / f"throughput_{s.model}.json")


def run_hf(s: ThroughputStudy) -> dict:
    """transformers generate() on the same requests in static batches; ``throughput_hf_<model>.json``."""
    return _run(s.argv() + ["--engine", "hf"], s.out_dir / f"throughput_hf_{s.model}.json")


def _med(xs):
    return median(xs) if xs else float("nan")


def table(res: dict, hf: Optional[dict] = None) -> str:
    """Markdown: req/s and tok/s median [min, max], registry calls and share of wall time."""
    rows = []
    items = list(by_variant(res).items()) + ([("hf generate()", hf)] if hf else [])
    for v, r in items:
        runs = r["runs"]
        rows.append([v, spread([x["requests_per_s"] for x in runs]),
                     spread([x["output_tokens_per_s"] for x in runs]), len(runs),
                     runs[0]["registry_calls"] if runs else "-",
                     f"{100 * _med([x['registry_s_total'] / x['wall_s'] for x in runs]):.1f}%",
                     runs[0]["steps"] if runs else "-",
                     f"{_med([x.get('step_time_ms_median', x.get('batch_time_ms_median', 0)) for x in runs]):.1f}"])
    return md_table(["variant", "req/s median [min, max]", "out tok/s", "runs", "registry calls",
                     "registry share of wall", "steps (hf: batches)", "ms per step (hf: batch)"], rows)


def gains(res: dict, hf: Optional[dict] = None) -> dict[str, float]:
    """Measured ratios of median req/s: runner-config/registry, scheduler-config/runner-config,
    and the engine (scheduler-config) over transformers generate()."""
    m = {v: _med([x["requests_per_s"] for x in r["runs"]]) for v, r in by_variant(res).items()}
    out = {}
    if "registry" in m and "runner-config" in m:
        out["runner-config over registry"] = m["runner-config"] / m["registry"] - 1
    if "runner-config" in m and "scheduler-config" in m:
        out["scheduler-config over runner-config"] = m["scheduler-config"] / m["runner-config"] - 1
    if hf and "scheduler-config" in m:
        out["engine / hf generate() (ratio)"] = m["scheduler-config"] / _med([x["requests_per_s"] for x in hf["runs"]])
    return out


def throughput_figure(res: dict, hf: Optional[dict], out_dir: Path):
    """Bars of req/s (median, min-max whiskers) per variant and for the HF baseline."""
    fig, ax = plt.subplots(figsize=(7, 3.8))
    items = list(by_variant(res).items()) + ([("hf generate()", hf)] if hf else [])
    for i, (_, r) in enumerate(items):
        xs = [x["requests_per_s"] for x in r["runs"]]
        m = _med(xs)
        ax.bar(i, m, yerr=[[m - min(xs)], [max(xs) - m]], capsize=4)
    ax.set_xticks(range(len(items)), [v for v, _ in items])
    ax.set_ylabel("requests / s")
    ax.set_title(f"{res['model']}: {res['num_requests']} requests x {res['max_tokens']} tokens, "
                 f"batch {res['max_num_seqs']}, {res['hardware']['name']}", fontsize=9)
    save(fig, out_dir, "throughput_variants")
    return fig


def split_figure(res: dict, out_dir: Path):
    """Stacked bars: ms per step spent in schedule / prepare (incl. metadata build) / model /
    sample / update, per variant (first run of each)."""
    fig, ax = plt.subplots(figsize=(7, 3.8))
    variants = by_variant(res)
    bottom = [0.0] * len(variants)
    for part in SPLIT_ORDER:
        vals = [1e3 * r["runs"][0]["step_split_s"].get(part, 0.0) / max(r["runs"][0]["steps"], 1)
                for r in variants.values()]
        ax.bar(list(variants), vals, bottom=bottom, label=part)
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_ylabel("ms per engine step (mean)")
    ax.set_title("per-step time split")
    ax.legend(fontsize=8)
    save(fig, out_dir, "throughput_step_split")
    return fig


def flame_registry(s: ThroughputStudy) -> Optional[Path]:
    """py-spy flame graph of one ``registry`` run: get_encdec_max_encoder_len in the hot path."""
    argv = [a for a in s.argv() if a not in ("--no-warmup", "--in-process")]
    i = argv.index("--repeats")
    del argv[i:i + 2]
    return flamegraph(["throughput", *argv, "--variant", "registry"], s.out_dir,
                      "flame_throughput_registry", speedscope=not s.quick)


def run_sweep(s: ThroughputStudy) -> dict:
    """runner-config vs scheduler-config over ``sweep_max_tokens``; ``throughput_sweep_<model>.json``.

    For each output length: measured gain, and the model gain = registry seconds per request
    (measured in runner-config: the scheduler's per-admission calls) / wall seconds per request
    (scheduler-config)."""
    points = []
    for t in s.sweep_max_tokens:
        argv = s.argv(**{"max-tokens": t, "num-requests": s.sweep_num_requests})
        r = _run(argv + ["--variant", "runner-config,scheduler-config"]
                 + ([] if s.quick else ["--no-warmup"]),  # the main runs warmed the machine
                 s.out_dir / f"throughput_sweep_{s.model}_t{t}.json")
        bv = by_variant(r)
        rc, sc = bv["runner-config"]["runs"], bv["scheduler-config"]["runs"]
        cost = _med([x["registry_s_total"] / x["num_requests"] for x in rc])
        work = _med([x["wall_s"] / x["num_requests"] for x in sc])
        points.append({"max_tokens": t, "gain": _med([x["requests_per_s"] for x in sc])
                       / _med([x["requests_per_s"] for x in rc]) - 1,
                       "registry_s_per_request": cost, "work_s_per_request": work,
                       "model_gain": cost / work, "runs": len(sc)})
    out = {"model": s.model, "points": points, "max_num_seqs": s.max_num_seqs,
           "num_requests": s.sweep_num_requests}
    (s.out_dir / f"throughput_sweep_{s.model}.json").write_text(json.dumps(out, indent=1))
    return out


def sweep_figure(sweep: dict, out_dir: Path):
    """Measured gain of scheduler-config over runner-config vs work per request, with the model."""
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    pts = sweep["points"]
    w = [p["work_s_per_request"] for p in pts]
    ax.plot(w, [100 * p["gain"] for p in pts], "o-", label="measured")
    ax.plot(w, [100 * p["model_gain"] for p in pts], "s--", label="model: registry s / work s per request")
    for p in pts:
        ax.annotate(f"{p['max_tokens']} tok", (p["work_s_per_request"], 100 * p["gain"]), fontsize=7)
    ax.axhline(3, color="grey", lw=0.8, ls=":", label="3% (PR #24989)")
    ax.set_xscale("log")
    ax.set_xlabel("work per request (s, scheduler-config)")
    ax.set_ylabel("gain over runner-config (%)")
    ax.legend(fontsize=8)
    save(fig, out_dir, "throughput_sweep")
    return fig


def summary_md(res: dict, out_dir: Path) -> str:
    """The throughput section of reports/latest/summary.md."""
    hf_p = out_dir / f"throughput_hf_{res['model']}.json"
    hf = json.loads(hf_p.read_text()) if hf_p.exists() else None
    g = gains(res, hf)
    parts = [f"## Throughput (PRs #24866 / #24989): {res['model']} on {res['hardware']['name']} "
             f"({res['device']}), {res['num_requests']} requests x {res['max_tokens']} tokens, "
             f"batch {res['max_num_seqs']}", "",
             f"Command: `refimpl bench throughput --model {res['model']} --variant "
             f"{','.join(by_variant(res))} --num-requests {res['num_requests']} --max-tokens "
             f"{res['max_tokens']} --max-num-seqs {res['max_num_seqs']}` (+ `--engine hf`)", "",
             table(res, hf), "", md_table(["measured", "value"],
                                          [[k, f"{100 * v:+.1f}%" if "ratio" not in k else f"{v:.2f}x"]
                                           for k, v in g.items()])]
    sw = out_dir / f"throughput_sweep_{res['model']}.json"
    if sw.exists():
        pts = json.loads(sw.read_text())["points"]
        parts += ["", "Sweep (gain of scheduler-config over runner-config by output length):", "",
                  md_table(["max_tokens", "work s/request", "registry s/request", "measured gain", "model gain"],
                           [[p["max_tokens"], p["work_s_per_request"], p["registry_s_per_request"],
                             f"{100 * p['gain']:+.1f}%", f"{100 * p['model_gain']:+.1f}%"] for p in pts])]
    return "\n".join(parts)
