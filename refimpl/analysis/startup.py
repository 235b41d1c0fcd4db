"""The start-up study (vLLM PR #17935) behind notebooks/01_startup_dummy_data_cache.ipynb.

Runs ``refimpl bench startup`` and ``refimpl bench budget`` (fresh process per repeat,
variants interleaved) and py-spy flame graphs of one start-up per variant; returns Results,
markdown tables and matplotlib figures. The real-photo pass is refimpl/analysis/photos.py.
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import matplotlib.pyplot as plt

from refimpl.analysis import flamegraph, md_table, measure, ratio_table, save, spread
from refimpl.bench.budget import BudgetSpec
from refimpl.bench.orchestrate import wait_for_memory
from refimpl.bench.schema import Result
from refimpl.bench.startup import StartupSpec, parse_limits, preflight
from refimpl.stats import median, ratio_of_medians, summarize
from refimpl.variants import STARTUP_VARIANTS

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
        if self.quick:  # image only: the later-fix rows differ from cache-reset only on video
            self.repeats, self.budget_repeats, self.limits = 1, 1, self.limits or ["video=0"]
            self.variants = ("no-cache", "cache-reset", "formula", "shape-only")

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
    res = measure(s.spec(warmup=False if warmed else None), s.quick)
    res.write(s.out_dir / f"startup_{s.model}.json")
    return res


def run_budget(s: StartupStudy, calls: int = 2,
               variants: tuple[str, ...] = ("no-cache", "cache-reset"), warmed: bool = True) -> Result:
    """The reviewer's call-1 / call-2 experiment, ``s.budget_repeats`` fresh processes per
    variant; writes ``budget_<model>.json``. ``warmed`` (default: run after the ladder, which
    warmed the machine): no warm-up of its own."""
    spec = BudgetSpec(**{**dataclasses.asdict(s.spec(warmup=False if warmed else None)),
                         "variants": variants, "repeats": s.budget_repeats}, calls=calls)
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


PART_COLUMNS = (("dummy data s", "dummy_s"), ("hashing s", "hash_s"), ("HF mm s", "hf_mm_s"),
                ("HF text-only s", "hf_text_only_s"), ("split per item s", "split_s"), ("rest s", "rest_s"))


def _parts(run: dict, parts: dict, total: float) -> dict:
    """Seconds per part of one run (or one budget call): the measured ``parts_s`` fields, HF
    time split into calls with and without multimodal items, and ``rest_s`` = ``total`` minus
    all parts (engine work outside the multimodal processor). Parts a run did not record
    (results from before they were measured) are None and stay in ``rest_s`` / ``hf_mm_s``."""
    text, split = parts.get("hf_text_only_s"), parts.get("split_s")
    return {"dummy_s": parts["dummy_s"], "hash_s": parts["hash_s"],
            "hf_mm_s": parts["hf_processor_s"] - (text or 0.0), "hf_text_only_s": text, "split_s": split,
            "rest_s": total - parts["dummy_s"] - parts["hash_s"] - parts["hf_processor_s"] - (split or 0.0)}


def _cell(values: list) -> str:
    return "-" if any(x is None for x in values) else spread(values)


def part_values(res: Result, variant: str, call: Optional[int] = None) -> dict[str, list[float]]:
    """Per part (keys of PART_COLUMNS plus ``total_s``), the seconds of each run of ``variant``:
    the whole start-up, or budget call ``call`` (0-based). All from measured JSON fields."""
    out: dict[str, list[float]] = {}
    for run in res.runs(variant):
        if call is None:
            total, parts = run["total_s"], run["parts_s"]
        else:
            total, parts = run["calls_s"][call], run["parts_s"][call]
        for k, x in {"total_s": total, **_parts(run, parts, total)}.items():
            out.setdefault(k, []).append(x)
    return out


def parts_table(res: Result) -> str:
    """Markdown: per variant (and per budget call), median [min, max] seconds of the whole
    start-up (or call) and of each measured part (PART_COLUMNS: building dummy data, hashing,
    HF calls with multimodal items, text-only HF calls, per-item split and copies, the rest),
    and peak RSS GiB."""
    rows = []
    for v, r in res.variants.items():
        runs = r["runs"]
        if not runs:
            continue
        calls = range(len(runs[0]["calls_s"])) if res.bench == "budget" else [None]
        for c in calls:
            vals = part_values(res, v, c)
            rows.append([v if c is None else f"{v} call {c + 1}", spread(vals["total_s"]),
                         *[_cell(vals[k]) for _, k in PART_COLUMNS],
                         spread([run["peak_rss_bytes"] / 2**30 for run in runs])])
    return md_table(["variant", "total s", *[h for h, _ in PART_COLUMNS], "peak RSS GiB"], rows)


def call1_explained(res: Result, num: str = "cache-reset", den: str = "no-cache") -> str:
    """Markdown: where call 1 of ``num`` spends its extra seconds over call 1 of ``den``: per
    part, median of ``num`` minus median of ``den`` (s) and its share of the difference of the
    call medians, then one sentence naming the largest part. Medians of measured fields only."""
    a, b = part_values(res, num, 0), part_values(res, den, 0)
    known = [k for k in a if None not in a[k] + b[k]]
    diff = {k: median(a[k]) - median(b[k]) for k in known}
    total = diff["total_s"]
    rows = [[h, f"{median(b[k]):.2f}", f"{median(a[k]):.2f}", f"{diff[k]:+.2f}",
             f"{100 * diff[k] / total:+.0f}%" if total else "-"] for h, k in PART_COLUMNS if k in diff]
    rows.append(["call 1 (whole)", f"{median(b['total_s']):.2f}", f"{median(a['total_s']):.2f}",
                 f"{total:+.2f}", "100%"])
    top_h, top_k = max((hk for hk in PART_COLUMNS if hk[1] in diff), key=lambda hk: diff[hk[1]])
    line = (f"Call 1 of `{num}` takes {total:+.2f} s over `{den}` (medians of {len(a['total_s'])} and "
            f"{len(b['total_s'])} fresh processes); the largest measured part of that difference is "
            f"**{top_h[:-2]}** ({diff[top_k]:+.2f} s, {100 * diff[top_k] / total:.0f}% of it).") if total else ""
    return md_table(["part (median s)", den, num, "difference s", "share of difference"], rows) + "\n\n" + line


def hashing_share(res: Result, before: str = "no-cache", after: str = "cache-reset") -> dict:
    """How much of ``after``'s start-up saving over ``before`` its hashing ate (medians, s):
    ``saved_s`` = total(before) - total(after) (the net saving; negative when ``after`` is
    slower); ``hash_s`` = hashing seconds in ``after`` minus those in ``before``;
    ``gross_s`` = saved_s + hash_s, the saving had hashing been free; ``share`` =
    hash_s / gross_s, the part of the gross saving spent hashing (> 1: more than all of it)."""
    tot = {k: median(res.values(k, "total_s")) for k in (before, after)}
    h = {k: median(run["parts_s"]["hash_s"] for run in res.runs(k)) for k in (before, after)}
    saved, hash_s = tot[before] - tot[after], h[after] - h[before]
    gross = saved + hash_s
    return {"saved_s": saved, "hash_s": hash_s, "gross_s": gross,
            "share": hash_s / gross if gross > 0 else float("nan")}


def hashing_sentence(res: Result, before: str = "no-cache", after: str = "cache-reset") -> str:
    """One plain sentence, from ``hashing_share``'s medians, on how much of ``after``'s saving
    over ``before`` the hashing ate."""
    sh = hashing_share(res, before, after)
    n = min(len(res.runs(before)), len(res.runs(after)))
    head = (f"Medians of {n} fresh-process start-ups: `{after}` hashed for {sh['hash_s']:.1f} s; without "
            f"that it would have saved {sh['gross_s']:.1f} s over `{before}`; ")
    if sh["gross_s"] <= 0:
        return head + f"it saved nothing even before hashing (net {sh['saved_s']:+.1f} s)."
    if sh["saved_s"] < 0:
        return head + (f"hashing ate all of that saving and {-sh['saved_s']:.1f} s more "
                       f"({100 * sh['share']:.0f}% of the gross saving): `{after}` starts up slower.")
    return head + (f"hashing ate {100 * sh['share']:.0f}% of it, leaving a net saving of "
                   f"{sh['saved_s']:.1f} s.")


def hash_paths_sentence(res: Result, variants=("cache-reset", "hash-nocopy", "hash-stream")) -> str:
    """One sentence comparing the variants that share the int64 dummy video and differ only in
    the hasher's byte path: median hashing seconds and median start-up seconds of each."""
    have = [v for v in variants if res.runs(v)] if all(v in res.variants for v in variants) else []
    if len(have) < 2:
        return ""
    parts = [f"`{v}` {median(r['parts_s']['hash_s'] for r in res.runs(v)):.1f} s hashing, "
             f"{median(res.values(v, 'total_s')):.1f} s start-up" for v in have]
    return ("Same int64 dummy video, only the hasher's copies differ (medians): " + "; ".join(parts) + ".")


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


def flamegraphs(s: StartupStudy) -> dict[str, Optional[Path]]:
    """One py-spy-recorded start-up per variant of ``s`` (QUICK: the last, cheapest), in a fresh
    worker process at ``s.flame_rate`` samples/s: ``flame_startup_<variant>.svg``. Untimed,
    so in full mode they are also the ladder's warm-up (``run_startup(s, warmed=True)``).
    None for a variant py-spy could not record (missing, or ptrace not permitted)."""
    variants = s.variants[-1:] if s.quick else s.variants
    spec = s.spec(warmup=False)
    out = {}
    for v in variants:
        wait_for_memory(functools.partial(preflight, spec.replace(variants=(v,))), spec.memory_wait_s)
        out[v] = flamegraph(spec, v, s.out_dir, f"flame_startup_{v}", speedscope=False, rate=s.flame_rate)
    return out


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
    if all(v in res.variants and res.runs(v) for v in ("no-cache", "cache-reset")):
        parts += ["", hashing_sentence(res)]
    if budget:
        parts += ["", "The reviewer's experiment (successive compute_encoder_budget calls, one fresh "
                  "process each):", "", budget_table(budget)]
        if all(v in budget.variants and len(budget.runs(v)) >= 2 for v in ("no-cache", "cache-reset")):
            r = call1_ratio(budget)
            parts += ["", f"Call 1, cache-reset / no-cache: {r['estimate']:.2f} [{r['low']:.2f}, "
                      f"{r['high']:.2f}] (95% bootstrap interval), min-max ranges "
                      f"{'overlap' if r['ranges_overlap'] else 'apart'}.", "", call1_explained(budget)]
    return "\n".join(parts)
