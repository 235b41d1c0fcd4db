"""The start-up study (vLLM PR #17935) behind notebooks/01_startup_dummy_data_cache.ipynb.

Runs ``refimpl bench startup`` and ``refimpl bench budget`` (fresh process per repeat,
variants interleaved) and py-spy flame graphs of one start-up per variant; returns Results,
markdown tables and matplotlib figures. The real-photo pass is refimpl/analysis/photos.py.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import matplotlib.pyplot as plt

from refimpl.analysis import flamegraph, md_table, measure, ratio_table, save, spread
from refimpl.bench.budget import BudgetSpec
from refimpl.bench.schema import Result
from refimpl.bench.startup import StartupSpec, parse_limits
from refimpl.stats import median, ratio_of_medians, summarize
from refimpl.variants import STARTUP_VARIANTS

PHASE_ORDER = ("config", "runner_init", "load_model", "profile_run", "kv_cache_init",
               "capture_model", "scheduler_init", "reset_mm_cache")


@dataclass
class StartupStudy:
    """Parameters of one study run; ``quick`` shrinks it for the test suite: image only, one
    repeat, four variants, runs in the notebook's process (not fresh-process figures), one
    flame graph."""
    model: str = "qwen2.5-vl-3b"
    device: str = "auto"
    repeats: int = 3
    quick: bool = False
    max_model_len: Optional[int] = None
    limits: list[str] = field(default_factory=list)
    out_dir: Path = Path("reports/latest")
    variants: tuple[str, ...] = tuple(STARTUP_VARIANTS)

    def __post_init__(self):
        self.out_dir = Path(self.out_dir)
        if self.quick:  # image only: the later-fix rows differ from cache-reset only on video
            self.repeats, self.limits = 1, self.limits or ["video=0"]
            self.variants = ("no-cache", "cache-reset", "formula", "shape-only")

    def spec(self, variants: Optional[tuple[str, ...]] = None) -> StartupSpec:
        """The start-up benchmark's spec for this study (default: the study's variants)."""
        return StartupSpec(model=self.model, device=self.device, variants=variants or self.variants,
                           repeats=self.repeats, warmup=not self.quick,
                           max_model_len=self.max_model_len,
                           limit_mm_per_prompt=parse_limits(self.limits))


def run_startup(s: StartupStudy) -> Result:
    """All start-up variants side by side; writes ``startup_<model>.json`` in ``out_dir``."""
    res = measure(s.spec(), s.quick)
    res.write(s.out_dir / f"startup_{s.model}.json")
    return res


def run_budget(s: StartupStudy, calls: int = 2,
               variants: tuple[str, ...] = ("no-cache", "cache-reset")) -> Result:
    """The reviewer's call-1 / call-2 experiment; writes ``budget_<model>.json``."""
    spec = BudgetSpec(**{**dataclasses.asdict(s.spec()), "variants": variants}, calls=calls)
    res = measure(spec, s.quick)
    res.write(s.out_dir / f"budget_{s.model}.json")
    return res


def phases_figure(res: Result, out_dir: Path):
    """Stacked bars: median seconds per phase, one bar per variant. Saved as startup_phases."""
    fig, ax = plt.subplots(figsize=(7, 4))
    variants = res.variants
    bottom = [0.0] * len(variants)
    for ph in PHASE_ORDER:
        vals = [median(run["phases"].get(ph, 0.0) for run in r["runs"]) if r["runs"] else 0.0
                for r in variants.values()]
        if any(vals):
            ax.bar(list(variants), vals, bottom=bottom, label=ph)
            bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_ylabel("seconds (median per phase)")
    ax.set_title(f"{res.params['model']} start-up on {res.hardware_name} ({res.env['device']})")
    ax.legend(fontsize=8)
    save(fig, out_dir, "startup_phases")
    return fig


def ladder_figure(res: Result, out_dir: Path):
    """The start-up ladder: per variant in STARTUP_VARIANTS order (0.8.5 -> 0.9.0 -> later
    fixes -> formula -> shape-only), median start-up seconds with min-max whiskers and HF
    passes written on each bar (left), median peak RSS GiB with min-max (right). Saved as
    startup_ladder."""
    variants = res.variants
    names = [v for v in STARTUP_VARIANTS if v in variants and variants[v]["runs"]]
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for axis, key, scale, label in ((ax, "total_s", 1, "start-up s"), (ax2, "peak_rss_bytes", 2**30, "peak RSS GiB")):
        stats = [summarize(x / scale for x in res.values(v, key)) for v in names]
        meds = [st["median"] for st in stats]
        err = [[st["median"] - st["min"] for st in stats], [st["max"] - st["median"] for st in stats]]
        bars = axis.bar(names, meds, yerr=err, capsize=3, color="tab:blue" if scale == 1 else "tab:gray")
        axis.set_ylabel(f"{label} (median, min-max of {min(st['n'] for st in stats)}+ processes)")
        axis.tick_params(axis="x", rotation=35)
        if scale == 1:
            for b, v in zip(bars, names):
                axis.annotate(f"{res.runs(v)[0]['hf_mm_passes']} HF", (b.get_x() + b.get_width() / 2, 0),
                              xytext=(0, 3), textcoords="offset points", ha="center", color="white", fontsize=8)
    fig.suptitle(f"{res.params['model']} start-up per variant on {res.hardware_name} ({res.env['device']})")
    fig.tight_layout()
    save(fig, out_dir, "startup_ladder")
    return fig


def parts_table(res: Result) -> str:
    """Markdown: per variant, median seconds building dummy data, hashing items and inside the
    HF processor over the whole start-up (or per budget call), and peak RSS GiB."""
    rows = []
    for v, r in res.variants.items():
        runs = r["runs"]
        if not runs:
            continue
        per_run = [run["parts_s"] if res.bench == "budget" else [run["parts_s"]] for run in runs]
        for i in range(len(per_run[0])):
            rows.append([v if len(per_run[0]) == 1 else f"{v} call {i + 1}",
                         *[spread([p[i][k] for p in per_run]) for k in ("dummy_s", "hash_s", "hf_processor_s")],
                         spread([run["peak_rss_bytes"] / 2**30 for run in runs])])
    return md_table(["variant", "dummy data s", "hashing s", "HF processor s", "peak RSS GiB"], rows)


def hashing_share(res: Result, before: str = "no-cache", after: str = "cache-reset") -> dict:
    """How much of ``after``'s start-up saving over ``before`` its hashing ate (medians, s):
    ``saved_s`` = total(before) - total(after); ``hash_s`` = hashing seconds in ``after``;
    ``share`` = hash_s / (saved_s + hash_s), the part of the gross saving spent hashing."""
    tot = {k: median(res.values(k, "total_s")) for k in (before, after)}
    h = median(run["parts_s"]["hash_s"] for run in res.runs(after))
    saved = tot[before] - tot[after]
    return {"saved_s": saved, "hash_s": h, "share": h / (saved + h) if saved + h > 0 else float("nan")}


def medians_table(res: Result) -> str:
    """Markdown: per variant, total start-up median [min, max], HF passes, hits/misses, memory."""
    rows = []
    for v, r in res.variants.items():
        runs = r["runs"]
        run0 = runs[0] if runs else {}
        rows.append([v, spread([x["total_s"] for x in runs]), len(runs),
                     run0.get("hf_mm_passes"), run0.get("hf_processor_calls"),
                     f"{run0.get('cache_hits')}/{run0.get('cache_misses')}",
                     f"{run0.get('cache_bytes_before_reset', 0) / 2**20:.0f}",
                     f"{run0.get('cache_bytes_after_reset', 0) / 2**20:.0f}",
                     f"{run0.get('rss_before_reset', 0) / 2**20:.0f} -> {run0.get('rss_after_reset', 0) / 2**20:.0f}",
                     f"{spread([x['peak_rss_bytes'] / 2**30 for x in runs])}"])
    return md_table(["variant", "total s: median [min, max]", "runs", "HF mm passes",
                     "HF calls (all)", "cache hits/misses", "cache MiB before reset",
                     "after reset", "RSS MiB before -> after reset", "peak RSS GiB"], rows)


def ratios_table(res: Result, base: str = "no-cache") -> str:
    """Markdown: median start-up seconds of each variant over ``base``, with 95% intervals."""
    if base not in res.variants:
        return ""
    return ratio_table(res, "total_s", [(v, base) for v in res.variants if v != base], "start-up s")


def passes_table(res: Result) -> str:
    """Markdown: HF-processor passes carrying multimodal data, per start-up phase and variant."""
    variants = res.variants
    phases = [p for p in PHASE_ORDER if any(r["runs"] and p in r["runs"][0].get("passes_by_phase", {})
                                            for r in variants.values())]
    rows = [[v] + [r["runs"][0]["passes_by_phase"].get(p, 0) for p in phases]
            + [r["runs"][0]["hf_mm_passes"]] for v, r in variants.items() if r["runs"]]
    return md_table(["variant", *phases, "total"], rows)


def budget_figure(res: Result, out_dir: Path):
    """Bars of call 1 and call 2 of compute_encoder_budget per variant (median, min-max)."""
    fig, ax = plt.subplots(figsize=(6, 3.5))
    variants = res.variants
    width = 0.38
    for i, (v, r) in enumerate(variants.items()):
        calls = list(zip(*[run["calls_s"] for run in r["runs"]]))
        meds = [median(c) for c in calls]
        err = [[m - min(c) for m, c in zip(meds, calls)], [max(c) - m for m, c in zip(meds, calls)]]
        ax.bar([k + i * width for k in range(len(meds))], meds, width, yerr=err, label=v, capsize=3)
    ax.set_xticks([k + width / 2 for k in range(len(meds))], [f"call {k + 1}" for k in range(len(meds))])
    ax.set_ylabel("seconds")
    ax.set_title(f"compute_encoder_budget, {res.params['model']} ({res.env['device']})")
    ax.legend()
    save(fig, out_dir, "budget_calls")
    return fig


def call1_ratio(res: Result, num: str = "cache-reset", den: str = "no-cache") -> dict:
    """Call 1 of ``num`` over call 1 of ``den``: ratio of medians with a 95% bootstrap interval
    (refimpl.stats.ratio_of_medians) and whether the two min-max ranges overlap."""
    a, b = ([run["calls_s"][0] for run in res.runs(k)] for k in (num, den))
    ci = ratio_of_medians(a, b).as_dict()
    return {**ci, "ranges_overlap": not (min(a) > max(b) or min(b) > max(a)), "n": (len(a), len(b))}


def budget_table(res: Result) -> str:
    """Markdown: seconds of each successive call, median [min, max], and HF passes per call."""
    rows = []
    for v, r in res.variants.items():
        calls = list(zip(*[run["calls_s"] for run in r["runs"]]))
        rows.append([v, *[spread(c) for c in calls], r["runs"][0]["passes"] if r["runs"] else "-"])
    n = max((len(r["runs"][0]["calls_s"]) for r in res.variants.values() if r["runs"]), default=0)
    return md_table(["variant", *[f"call {i + 1} s: median [min, max]" for i in range(n)],
                     "HF mm passes per call"], rows)


def flamegraphs(s: StartupStudy, variants=("no-cache", "cache-reset")) -> dict[str, Optional[Path]]:
    """One py-spy-recorded start-up per variant: ``flame_startup_<variant>.svg`` (+ speedscope)."""
    variants = variants[:1] if s.quick else variants
    return {v: flamegraph(s.spec(), v, s.out_dir, f"flame_startup_{v}", speedscope=not s.quick)
            for v in variants}


def summary_md(res: Result, budget: Optional[Result] = None) -> str:
    """The start-up section of reports/latest/summary.md (figures from ``res`` / ``budget``)."""
    p = res.params
    n = max(len(r["runs"]) for r in res.variants.values())
    head = (f"## Start-up (PR #17935): {p['model']} on {res.hardware_name} ({res.env['device']}), "
            f"max_model_len {p.get('max_model_len') or 'default'}, "
            f"limits {p.get('limit_mm_per_prompt') or 'default'}")
    parts = [head, "", f"Command: `refimpl bench startup --model {p['model']} --variant "
             f"{','.join(res.variants)} --repeats {n} ...` (see the JSON beside this file)",
             "", medians_table(res), "", ratios_table(res), "", "HF-processor passes with multimodal data per phase:", "",
             passes_table(res)]
    if budget:
        parts += ["", "The reviewer's experiment (successive compute_encoder_budget calls, one fresh "
                  "process each):", "", budget_table(budget)]
    return "\n".join(parts)
