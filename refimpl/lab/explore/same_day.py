"""The same-day benchmark table of the start-up cost model (issue 30's goals): per ladder measured
on the calibration's day and per release row, seconds, peak RSS and the ratio to 0.8.5 predicted
against measured, that ratio against every committed ladder at the same max_model_len, and for each
miss beyond its goal the part that misses most (``part_gaps``: the benches' parts, the profile run's
rest, i.e. the encoder forward and the text dummy run, and the rest of start-up).

    python -m refimpl.lab.explore.cost_check --same-day CALIBRATION LADDER [LADDER ...] [--carry-from CAL]

``carry_rates`` lends a calibration of a day that cannot be re-measured the rates it lacks.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional

from refimpl.engine.startup_plan import StartupPlan
from refimpl.lab.bench.fits import pair_price
from refimpl.lab.bench.rates import SizedRate
from refimpl.lab.bench.schema import Result
from refimpl.lab.bench.specs import spec_from_params
from refimpl.lab.bench.startup import make_vllm_config
from refimpl.lab.env import REPO_ROOT
from refimpl.lab.explore.cost_check import GOAL, RATIO_GOAL, GiB, sources
from refimpl.lab.explore.cost_model import PARTS, Calibration, Prediction, predict
from refimpl.lab.stats import median
from refimpl.lab.studies import md, md_table

RSS_GOAL = 0.10  # peak RSS, the benchmark table's goal
AFTER = "0.9.0"  # PR #17935's row: its ratio to the reference gets a line of its own


def part_gaps(pred: Prediction, plan: StartupPlan, runs: list[dict]) -> dict[str, tuple[float, float]]:
    """Predicted and measured seconds (medians over ``runs``) per part of one start-up row: the
    benches' PARTS (HF with its text-only calls), ``profile_rest`` (the profile run's phase less
    the parts spent in it: the encoder forward and the text dummy run) and ``other`` (the rest of
    the total). Measured parts are totals over the phases; the share spent in the profile run is
    taken as predicted (the plan's steps per phase)."""
    parts = [p for p in PARTS if p != "hf_text_only_s"]
    pr = [k for k, s in enumerate(plan.steps) if s.phase == "profile_run"]
    out: dict[str, tuple[float, float]] = {}
    in_pr_pred = in_pr_meas = 0.0
    for p in parts:
        meas = median(r["parts_s"].get(p, 0.0) for r in runs)
        share = sum(pred.step_parts[k][p] for k in pr) / pred.seconds[p] if pred.seconds[p] else (1.0 if pr else 0.0)
        out[p] = (pred.seconds[p], meas)
        in_pr_pred += share * pred.seconds[p]
        in_pr_meas += share * meas
    out["profile_rest"] = (pred.phases["profile_run"] - in_pr_pred,
                           median(r["phases"]["profile_run"] for r in runs) - in_pr_meas)
    total = (pred.total_s, median(r["total_s"] for r in runs))
    out["other"] = tuple(total[j] - sum(v[j] for k, v in out.items()) for j in (0, 1))  # type: ignore[assignment]
    return out


@dataclass(frozen=True)
class LadderRow:
    """One release row of a same-day ladder: seconds and peak RSS predicted / measured (medians),
    its ratio to the reference predicted / measured, the part gaps (``part_gaps``) and the
    predicted peak's largest holder."""
    source: str
    max_model_len: int
    variant: str
    seconds: tuple[float, float]
    rss: tuple[float, float]
    gaps: dict[str, tuple[float, float]]
    peak: str
    ratio: Optional[tuple[float, float]] = None


def ladder_rows(cal: Calibration, path: Path, reference: str = "0.8.5") -> list[LadderRow]:
    """``LadderRow`` per variant of the start-up Result at ``path``."""
    res, rows, full = Result.load(path), [], Path(path).resolve()
    src = str(full.relative_to(REPO_ROOT)) if full.is_relative_to(REPO_ROOT) else str(path)
    for variant, v in res.variants.items():
        runs = v["runs"]
        if not runs:
            continue
        params = {**res.params, "max_model_len": runs[0].get("max_model_len", res.params.get("max_model_len"))}
        vc = make_vllm_config(spec_from_params(res.bench, params).replace(device="cpu"))
        plan = StartupPlan.build(vc, variant)
        pred = predict(plan, cal)
        holder = max(pred.peak_rss, key=lambda h: pred.peak_rss[h])
        rows.append(LadderRow(src, vc.model_config.max_model_len, variant, (pred.total_s, median(r["total_s"] for r in runs)),
                              (pred.peak_rss_bytes, median(r["peak_rss_bytes"] for r in runs)), part_gaps(pred, plan, runs),
                              f"{pred.peak_at}: {holder} {pred.peak_rss[holder] / GiB:.2f} GiB"))
    ref = next((r for r in rows if r.variant == reference), None)
    return [LadderRow(**{**r.__dict__, "ratio": (r.seconds[0] / ref.seconds[0], r.seconds[1] / ref.seconds[1])})
            if ref is not None and r is not ref else r for r in rows]


def committed_ratios(cal: Calibration, n: int, results_dir: Path = REPO_ROOT / "results",
                     reference: str = "0.8.5") -> dict[str, dict[str, float]]:
    """Measured ratio to ``reference`` per variant of every committed start-up ladder at max_model_len
    ``n`` (the calibration's folder and its -shared sibling), by source path."""
    out: dict[str, dict[str, float]] = {}
    for path in (p for p in sources(cal, results_dir) if p.name.startswith("startup_")):
        res = Result.load(path)
        totals = {v: median(r["total_s"] for r in x["runs"]) for v, x in res.variants.items()
                  if x["runs"] and x["runs"][0].get("max_model_len") == n}
        if reference in totals:
            src = str(path.relative_to(results_dir)) if path.is_relative_to(results_dir) else str(path)
            out[src] = {v: t / totals[reference] for v, t in totals.items() if v != reference}
    return out


def carry_rates(old: Calibration, new: Calibration) -> Calibration:
    """``old`` with the rates only ``new`` has, scaled to ``old``'s day by a rate both have: each
    large-size rate as old's small x new's large / new's small; the encoder's per-pair rates as
    new's, times old's seconds at its ``encoder_tokens`` over new's per-pair price there. For a
    calibration of a day that cannot be recalibrated (its rates measured before these existed)."""
    o, n = old.rates, new.rates

    def carried(mine: SizedRate, theirs: Optional[SizedRate]) -> SizedRate:
        if mine.large is not None or theirs is None or theirs.large is None:
            return mine
        return SizedRate(mine.small, mine.small * theirs.large / theirs.small)
    models = dict(o.models)
    for m, x in o.models.items():
        y = n.models.get(m)
        if y is None or x.encoder_pair_s_per_token is not None or y.encoder_pair_s_per_token is None \
                or y.encoder_pair_s_per_token2 is None or x.encoder_s_at_tokens is None or x.encoder_tokens is None:
            continue
        a, b, c, t = y.encoder_pair_s_per_token, y.encoder_pair_s_per_token2, y.encoder_pair_s or 0.0, x.encoder_tokens
        scale = x.encoder_s_at_tokens / pair_price(c, a, b, t)
        models[m] = replace(x, encoder_pair_s_per_token=a * scale, encoder_pair_s_per_token2=b * scale,
                            encoder_pair_s=y.encoder_pair_s and c * scale)
    rates = replace(
        o, large_gib=o.large_gib or n.large_gib,
        fill_s_per_gib={k: carried(r, n.fill_s_per_gib.get(k)) for k, r in o.fill_s_per_gib.items()},
        hash_s_per_gib={k: carried(r, n.hash_s_per_gib.get(k)) for k, r in o.hash_s_per_gib.items()},
        copy_s_per_gib=carried(o.copy_s_per_gib, n.copy_s_per_gib), models=models)
    return replace(old, rates=rates)


def _err(pair: tuple[float, float]) -> float:
    return pair[0] / pair[1] - 1


def worst_part(gaps: dict[str, tuple[float, float]]) -> str:
    """The part whose predicted seconds are furthest from the measured: name, both and the gap."""
    name = max(gaps, key=lambda p: abs(gaps[p][0] - gaps[p][1]))
    pr, me = gaps[name]
    return f"{name}: {pr:.1f} s predicted, {me:.1f} s measured ({pr - me:+.1f} s)"


def same_day_table(cal: Calibration, ladders: list[Path], results_dir: Path = REPO_ROOT / "results",
                   reference: str = "0.8.5") -> str:
    """Markdown benchmark table: per ladder and release row, predicted against measured seconds
    (GOAL), peak RSS (RSS_GOAL), ratio to ``reference`` in this run and against each committed
    ladder at that size (RATIO_GOAL), and for a miss the part that misses most."""
    def pct(x: float, goal: float) -> str:
        return f"{100 * x:+.0f}%" + ("" if abs(x) <= goal else " ✗")
    blocks = [f"Predictions: {cal.label}. Goals: seconds within {100 * GOAL:.0f}%, peak RSS within "
              f"{100 * RSS_GOAL:.0f}%, ratio to {reference} within {100 * RATIO_GOAL:.0f}% (✗: beyond)."]
    for path in ladders:
        rows = ladder_rows(cal, Path(path), reference)
        if not rows:
            continue
        n = rows[0].max_model_len
        committed = committed_ratios(cal, n, results_dir, reference)
        table = []
        for r in rows:
            misses = []
            if abs(_err(r.seconds)) > GOAL or (r.ratio and abs(_err(r.ratio)) > RATIO_GOAL):
                misses.append(worst_part(r.gaps))
            if abs(_err(r.rss)) > RSS_GOAL:
                misses.append(f"RSS: predicted peak at {r.peak}")
            vs = [f"{c}: {m[r.variant]:.2f}x ({pct(r.ratio[0] / m[r.variant] - 1, RATIO_GOAL)})"
                  for c, m in committed.items() if r.ratio and r.variant in m]
            table.append([r.variant, f"{r.seconds[0]:.1f}", f"{r.seconds[1]:.1f}", pct(_err(r.seconds), GOAL),
                          f"{r.rss[0] / GiB:.2f}", f"{r.rss[1] / GiB:.2f}", pct(_err(r.rss), RSS_GOAL),
                          f"{r.ratio[0]:.2f}x / {r.ratio[1]:.2f}x ({pct(_err(r.ratio), RATIO_GOAL)})" if r.ratio else "-",
                          "; ".join(vs) or "-", "; ".join(misses) or "-"])
        res = Result.load(path)
        setting = ", ".join(f"{k} {v}" for k in ("limit_mm_per_prompt", "mm_processor_kwargs")
                            for v in [res.params.get(k)] if v)
        blocks.append(f"**{rows[0].source}**, max_model_len {n}{', ' + setting if setting else ''}, "
                      f"measured {res.env.get('date', '')[:10]}")
        pr = next((r for r in rows if r.variant == AFTER and r.ratio), None)
        if pr is not None and pr.ratio is not None:  # PR #17935's ratio, the finding's headline
            blocks.append(f"{AFTER} / {reference}: predicted {pr.ratio[0]:.2f}x, measured {pr.ratio[1]:.2f}x "
                          f"({pct(_err(pr.ratio), RATIO_GOAL)})")
        blocks.append(md_table(["row", "predicted s", "measured s", "error", "predicted peak GiB", "measured peak GiB",
                                "error", f"ratio to {reference} predicted / measured",
                                "predicted ratio against committed ladders' measured", "largest miss"], table))
    return md(*blocks)
