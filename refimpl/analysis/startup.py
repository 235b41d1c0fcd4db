"""The start-up study (vLLM PR #17935) behind notebooks/01_startup_dummy_data_cache.ipynb.

Runs ``refimpl bench startup`` and ``refimpl bench budget`` (fresh process per repeat,
variants interleaved) and py-spy flame graphs of one start-up per variant; returns Results,
markdown tables and matplotlib figures. The real-photo pass is refimpl/analysis/photos.py;
where the seconds go is refimpl/analysis/startup_parts.py; the reviewer's budget-call tables
are refimpl/analysis/budget.py (both re-exported here: notebook 01 calls them as ``S.<name>``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import matplotlib.pyplot as plt

from refimpl.analysis import flamegraph, md_table, measure, partial_note, ratio_table, save, spread
from refimpl.analysis.budget import budget_figure, budget_table, call1_ratio  # noqa: F401
from refimpl.analysis.startup_parts import (  # noqa: F401
    PART_COLUMNS,
    call1_explained,
    has_parts,
    hash_paths_sentence,
    hashing_sentence,
    hashing_share,
    part_values,
    parts_table,
)
from refimpl.bench import guard
from refimpl.bench.schema import Result
from refimpl.bench.specs import StartupSpec, command_of, parse_limits
from refimpl.stats import median, summarize
from refimpl.variants import STARTUP_VARIANTS

NO_PARTS = "No split by part: these runs predate the per-part timings (`parts_s`)."
PHASE_ORDER = ("config", "runner_init", "load_model", "profile_run", "kv_cache_init",
               "capture_model", "scheduler_init", "reset_mm_cache")


@dataclass
class StartupStudy:
    """Parameters of one study run. Full mode: one py-spy-recorded start-up per variant
    (``flamegraphs``, untimed: it is also the ladder's warm-up), ``repeats`` interleaved
    fresh-process start-ups per variant (the ladder), then the reviewer's experiment with
    ``budget_repeats`` fresh processes per variant, sharing that warm-up. ``flame_rate``:
    py-spy samples per second. ``numpy_hugepage``: see refimpl/bench/startup.py (off: numpy's
    huge-page madvise, the seed's call-1 variance source, is off in every measured process).
    ``quick`` shrinks it for the test suite: image only, one repeat, four variants, runs in
    the notebook's process (not fresh-process figures), one flame graph (shape-only)."""
    model: str = "qwen2.5-vl-3b"
    device: str = "auto"
    repeats: int = 3
    budget_repeats: int = 5
    flame_rate: int = 20
    quick: bool = False
    max_model_len: Optional[int] = None
    limits: list[str] = field(default_factory=list)
    numpy_hugepage: str = "off"
    out_dir: Path = Path("reports/latest")
    variants: tuple[str, ...] = tuple(STARTUP_VARIANTS)

    def __post_init__(self):
        self.out_dir = Path(self.out_dir)
        if self.quick:  # image only: the later-fix rows differ from 0.9.0 only on video
            self.repeats, self.budget_repeats, self.limits = 1, 1, self.limits or ["video=0"]
            self.variants = ("0.8.5", "0.9.0", "0.9.2", "shape-only")

    def spec(self, variants: Optional[tuple[str, ...]] = None, warmup: Optional[bool] = None) -> StartupSpec:
        """The start-up benchmark's spec for this study (default: the study's variants; an
        untimed warm-up per variant unless QUICK or ``warmup`` is False)."""
        return StartupSpec(model=self.model, device=self.device, variants=variants or self.variants,
                           repeats=self.repeats, warmup=not self.quick if warmup is None else warmup,
                           max_model_len=self.max_model_len, numpy_hugepage=self.numpy_hugepage,
                           limit_mm_per_prompt=parse_limits(self.limits))


def run_startup(s: StartupStudy, warmed: bool = False) -> Result:
    """All start-up variants side by side, interleaved; writes ``startup_<model>.json`` in
    ``out_dir``. ``warmed``: the untimed warm-up already ran (e.g. ``flamegraphs``), skip it."""
    return measure(s.spec(warmup=False if warmed else None), s.quick, s.out_dir / f"startup_{s.model}.json")


def run_budget(s: StartupStudy, calls: int = 2,
               variants: tuple[str, ...] = ("0.8.5", "0.9.0"), warmed: bool = True) -> Result:
    """The reviewer's call-1 / call-2 experiment, ``s.budget_repeats`` fresh processes per
    variant; writes ``budget_<model>.json``. ``warmed`` (default: run after the ladder, which
    warmed the machine): no warm-up of its own."""
    spec = s.spec(warmup=False if warmed else None).replace(variants=variants, repeats=s.budget_repeats, calls=calls)
    return measure(spec, s.quick, s.out_dir / f"budget_{s.model}.json")


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
    passes written on each bar (left), median peak RSS GiB with min-max (right). Variants
    without runs (a partial result) are left out and named in the title. Saved as
    startup_ladder."""
    variants = res.variants
    names = [v for v in STARTUP_VARIANTS if v in variants and variants[v]["runs"]]
    left_out = [v for v in variants if v not in names]
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for axis, key, scale, label in ((ax, "total_s", 1, "start-up s"), (ax2, "peak_rss_bytes", 2**30, "peak RSS GiB")):
        if not names:  # a partial result without a run (e.g. Ctrl-C in the warm-up)
            axis.text(0.5, 0.5, "no runs", ha="center", va="center", transform=axis.transAxes)
            axis.set_ylabel(label)
            continue
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
    fig.suptitle(f"{res.params['model']} start-up per variant on {res.hardware_name} ({res.env['device']})"
                 + (f"; no runs of {', '.join(left_out)}" if left_out else ""))
    fig.tight_layout()
    save(fig, out_dir, "startup_ladder")
    return fig


def _mib(runs: list[dict], key: str) -> str:
    """'median [min, max]' of ``run[key]`` bytes over ``runs``, in whole MiB ('-' when absent)."""
    xs = [x[key] / 2**20 for x in runs if x.get(key) is not None]
    if not xs:
        return "-"
    s = summarize(xs)
    return f"{s['median']:.0f} [{s['min']:.0f}, {s['max']:.0f}]"


def medians_table(res: Result) -> str:
    """Markdown: per variant, total start-up median [min, max], HF passes, hits/misses and the
    cache (first run: the same in every run), RSS before -> after reset_mm_cache and peak RSS
    (median [min, max] over the runs); "no runs" and "-" for a variant without runs."""
    rows = []
    for v, r in res.variants.items():
        runs = r["runs"]
        if not runs:  # a partial result: this variant has no run
            rows.append([v, "-", 0, "no runs", *["-"] * 6])
            continue
        run0 = runs[0]
        rows.append([v, spread([x["total_s"] for x in runs]), len(runs),
                     run0.get("hf_mm_passes"), run0.get("hf_processor_calls"),
                     f"{run0.get('cache_hits')}/{run0.get('cache_misses')}",
                     f"{run0.get('cache_bytes_before_reset', 0) / 2**20:.0f}",
                     f"{run0.get('cache_bytes_after_reset', 0) / 2**20:.0f}",
                     f"{_mib(runs, 'rss_before_reset')} -> {_mib(runs, 'rss_after_reset')}",
                     f"{spread([x['peak_rss_bytes'] / 2**30 for x in runs])}"])
    return md_table(["variant", "total s: median [min, max]", "runs", "HF mm passes",
                     "HF calls (all)", "cache hits/misses", "cache MiB before reset",
                     "after reset", "RSS MiB before -> after reset", "peak RSS GiB"], rows)


def ratios_table(res: Result, base: str = "0.8.5") -> str:
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


def flamegraphs(s: StartupStudy) -> dict[str, Optional[Path]]:
    """One py-spy-recorded start-up per variant of ``s`` (QUICK: the last, cheapest), in a fresh
    worker process at ``s.flame_rate`` samples/s: ``flame_startup_<variant>.svg``. Untimed,
    so in full mode they are also the ladder's warm-up (``run_startup(s, warmed=True)``).
    None for a variant py-spy could not record (missing, or ptrace not permitted)."""
    variants = s.variants[-1:] if s.quick else s.variants
    spec = s.spec(warmup=False)
    out = {}
    for v in variants:
        guard.wait_for_memory(spec, v)
        out[v] = flamegraph(spec, v, s.out_dir, f"flame_startup_{v}", speedscope=False, rate=s.flame_rate)
    return out


def summary_md(res: Result, budget: Optional[Result] = None) -> str:
    """The start-up section of reports/latest/summary.md (figures from ``res`` / ``budget``)."""
    p = res.params
    n = max(len(r["runs"]) for r in res.variants.values())
    head = (f"## Start-up (PR #17935): {p['model']} on {res.hardware_name} ({res.env['device']}), "
            f"max_model_len {p.get('max_model_len') or 'default'}, "
            f"limits {p.get('limit_mm_per_prompt') or 'default'}")
    cmd = command_of(res.bench, p, in_process=res.env.get("in_process", False))
    parts = [head, "", f"Command: `{cmd}` ({n} runs per variant)",
             *(["", partial_note(res)] if partial_note(res) else []), "", medians_table(res), "", ratios_table(res), "", "HF-processor passes with multimodal data per phase:", "",
             passes_table(res)]
    pair = ("0.8.5", "0.9.0")
    if all(v in res.variants and res.runs(v) for v in pair):
        parts += ["", hashing_sentence(res) if has_parts(res, pair) else NO_PARTS]
    if budget:
        parts += ["", "The reviewer's experiment (successive compute_encoder_budget calls, one fresh "
                  "process each):", "", budget_table(budget)]
        if all(v in budget.variants and len(budget.runs(v)) >= 2 for v in ("0.8.5", "0.9.0")):
            r = call1_ratio(budget)
            parts += ["", f"Call 1, 0.9.0 / 0.8.5: {r['estimate']:.2f} [{r['low']:.2f}, "
                      f"{r['high']:.2f}] (95% bootstrap interval, {r['state']}), min-max ranges "
                      f"{'overlap' if r['ranges_overlap'] else 'apart'}.", "",
                      call1_explained(budget) if has_parts(budget, pair) else NO_PARTS]
    return "\n".join(parts)
