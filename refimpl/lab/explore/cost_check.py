"""Prediction against measurement: the start-up cost model beside the committed Results.

``compare(cal)`` predicts every variant of the start-up and budget Results (Qwen2.5-VL) in the
calibration's results/ folder and its ``-shared`` sibling (runs made while other jobs ran) and
pairs each prediction with the measured median: start-up total seconds and peak RSS, each
budget call's seconds and the peak RSS. For seconds it names the part that misses most (the
benches' parts, and the rest of the time as "other"). ``comparison_table`` renders the rows,
headed by the calibration's label; ``GOAL`` is the error the model aims under. Any committed
max_model_len is taken (the 128k ladder, a 50k run when one is committed). Seconds drift up to
2x between days on this VM, so each row says whether it was measured on the calibration's day,
and ``ratio_rows`` holds each start-up row's seconds over a reference row's (0.8.5) predicted
against measured, for every committed ladder (``RATIO_GOAL``).

    python -m refimpl.lab.explore.cost_check [--calibration results/<hw>/calibration.json] [--quiet-only]

prints the table and, per max_model_len and metric, how many variants are within GOAL.

    python -m refimpl.lab.explore.cost_check --same-day CALIBRATION LADDER [LADDER ...]

prints the benchmark table (``same_day_table``): per ladder (start-up Results of the calibration's
day) and release row, seconds, peak RSS and the ratio to 0.8.5 predicted against measured, that
ratio against every committed ladder at the same max_model_len, and for each miss beyond its
goal the part that misses most (``part_gaps``: the benches' parts, the profile run's rest, i.e.
the encoder forward and the text dummy run, and the rest of start-up).
"""
from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable, Optional

from refimpl.engine.startup_plan import StartupPlan
from refimpl.lab.bench.rates import SizedRate
from refimpl.lab.bench.schema import Result
from refimpl.lab.bench.specs import spec_from_params
from refimpl.lab.bench.startup import make_vllm_config
from refimpl.lab.env import REPO_ROOT
from refimpl.lab.explore.cost_model import PARTS, Calibration, Prediction, predict
from refimpl.lab.studies import md, md_table

GOAL = 0.15  # |predicted / measured - 1| the model aims under, per variant
RATIO_GOAL = 0.10  # the same for a row's ratio to the reference row
GiB = 1 << 30


@dataclass(frozen=True)
class Row:
    """One prediction beside its measurement (seconds or bytes); ``miss``: the part with the
    largest absolute gap (name, predicted, measured seconds), for seconds only."""
    source: str
    note: str
    max_model_len: int
    variant: str
    metric: str
    predicted: float
    measured: float
    miss: Optional[tuple[str, float, float]] = None
    date: str = ""  # the Result's day (YYYY-MM-DD)

    @property
    def error(self) -> float:
        return self.predicted / self.measured - 1


def sources(cal: Calibration, results_dir: Path = REPO_ROOT / "results", shared: bool = True) -> list[Path]:
    """The Qwen2.5-VL start-up and budget Results of ``cal``'s machine (its folder, then -shared)."""
    out: list[Path] = []
    for folder in (cal.hardware, *([f"{cal.hardware}-shared"] if shared else [])):
        out += sorted((Path(results_dir) / folder).glob("startup_qwen*.json"))
        out += sorted((Path(results_dir) / folder).glob("budget_qwen*.json"))
    return out


def _note(path: Path, runs: list[dict]) -> str:
    notes = ["measured while other jobs ran"] if path.parent.name.endswith("-shared") else []
    if any((r.get("thp") or {}).get("numpy_madvise_hugepage") for r in runs):
        notes.append("numpy huge pages on (not modelled)")
    return "; ".join(notes)


def _med(values: Iterable[float]) -> float:
    return float(statistics.median(values))


def _miss(pred: dict[str, float], runs: list[dict], total_pred: float, total_meas: float,
          parts_of=lambda r: r["parts_s"]) -> tuple[str, float, float]:
    """The part (or "other") whose predicted seconds differ most from the measured median."""
    meas = {p: _med(parts_of(r).get(p, 0.0) for r in runs) for p in PARTS if p != "hf_text_only_s"}
    gaps = {p: (pred[p], meas[p]) for p in meas}
    gaps["other"] = (total_pred - sum(pred[p] for p in meas), total_meas - sum(meas.values()))
    name = max(gaps, key=lambda p: abs(gaps[p][0] - gaps[p][1]))
    return name, *gaps[name]


def compare(cal: Calibration, paths: Optional[list[Path]] = None) -> list[Row]:
    """Rows of prediction against measurement for ``paths`` (default ``sources(cal)``)."""
    rows: list[Row] = []
    for path in paths if paths is not None else sources(cal):
        res = Result.load(path)
        for variant, v in res.variants.items():
            runs = v["runs"]
            if not runs:
                continue
            params = {**res.params, "max_model_len": runs[0].get("max_model_len", res.params.get("max_model_len"))}
            spec = spec_from_params(res.bench, params).replace(device="cpu")
            src = str(Path(path).relative_to(REPO_ROOT)) if Path(path).is_relative_to(REPO_ROOT) else str(path)
            vc, note = make_vllm_config(spec), _note(Path(path), runs)
            n, day = vc.model_config.max_model_len, str(res.env.get("date", ""))[:10]
            if res.bench == "startup":
                pred = predict(StartupPlan.build(vc, variant), cal)
                total = _med(r["total_s"] for r in runs)
                rows.append(Row(src, note, n, variant, "total_s", pred.total_s, total,
                                _miss(pred.seconds, runs, pred.total_s, total), day))
            else:
                plan = StartupPlan.budget(vc.model_config, variant, len(runs[0]["calls_s"]))
                pred = predict(plan, cal)
                for k, (call, predicted) in enumerate(pred.phases.items()):
                    measured = _med(r["calls_s"][k] for r in runs)
                    parts = pred.step_parts[k] if k < len(pred.step_parts) else dict.fromkeys(PARTS, 0.0)
                    rows.append(Row(src, note, n, variant, f"{call}_s", predicted, measured,
                                    _miss(parts, runs, predicted, measured, lambda r, k=k: r["parts_s"][k]), day))
            rows.append(Row(src, note, n, variant, "peak_rss_bytes", pred.peak_rss_bytes,
                            _med(r["peak_rss_bytes"] for r in runs), date=day))
    return rows


def ratio_rows(rows: list[Row], reference: str = "0.8.5") -> list[Row]:
    """Each start-up row's total seconds over ``reference``'s in the same Result and max_model_len,
    predicted beside measured (metric ``total_s / <reference>``); Results without the reference
    give none."""
    totals = {(r.source, r.max_model_len, r.variant): r for r in rows if r.metric == "total_s"}
    out = []
    for (src, n, v), r in totals.items():
        ref = totals.get((src, n, reference))
        if ref is not None and v != reference:
            out.append(Row(src, r.note, n, v, f"total_s / {reference}", r.predicted / ref.predicted,
                           r.measured / ref.measured, date=r.date))
    return out


def comparison_table(rows: list[Row], cal: Calibration) -> str:
    """Markdown: measured median, ``cal.label``, error; for seconds beyond GOAL, the part that misses most."""
    def fmt(metric: str, x: float) -> str:
        return f"{x / GiB:.2f} GiB" if metric.endswith("bytes") else f"{x:.2f}x" if "/" in metric else f"{x:.1f} s"
    out = []
    for r in rows:
        miss = "-" if r.miss is None or abs(r.error) <= GOAL else \
            f"{r.miss[0]}: {r.miss[1]:.1f} s predicted, {r.miss[2]:.1f} s measured"
        out.append([f"{r.source}{f' ({r.note})' if r.note else ''}", r.date, r.max_model_len, r.variant, r.metric,
                    fmt(r.metric, r.measured), fmt(r.metric, r.predicted), f"{100 * r.error:+.0f}%", miss])
    return md_table(["result", "measured on", "max_model_len", "variant", "metric", "measured (median)", cal.label,
                     "error", f"largest part miss (beyond {100 * GOAL:.0f}%)"], out)


def within_goal(rows: list[Row], cal: Optional[Calibration] = None) -> list[str]:
    """Per (max_model_len, kind): how many rows are within their goal (GOAL; RATIO_GOAL for ratios),
    and the worst; seconds split by whether the run was made on ``cal``'s day."""
    def kind(r: Row) -> str:
        if "/" in r.metric:
            return f"ratio to {r.metric.split('/ ')[1]} ({r.source})"
        if r.metric.endswith("bytes"):
            return "peak RSS"
        return "seconds" if cal is None else "seconds, " + ("same day as the calibration" if r.date == cal.date
                                                            else "other days")
    groups: dict[tuple[int, str], list[Row]] = {}
    for r in rows:
        groups.setdefault((r.max_model_len, kind(r)), []).append(r)
    out = []
    for (n, k), rs in sorted(groups.items()):
        goal = RATIO_GOAL if k.startswith("ratio") else GOAL
        worst = max(rs, key=lambda r: abs(r.error))
        out.append(f"max_model_len {n}, {k}: {sum(abs(r.error) <= goal for r in rs)} of {len(rs)} within "
                   f"{100 * goal:.0f}%; worst {worst.variant} {worst.metric} {100 * worst.error:+.0f}% ({worst.source})")
    return out


RSS_GOAL = 0.10  # peak RSS, the benchmark table's goal


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
        meas = _med(r["parts_s"].get(p, 0.0) for r in runs)
        share = sum(pred.step_parts[k][p] for k in pr) / pred.seconds[p] if pred.seconds[p] else (1.0 if pr else 0.0)
        out[p] = (pred.seconds[p], meas)
        in_pr_pred += share * pred.seconds[p]
        in_pr_meas += share * meas
    out["profile_rest"] = (pred.phases["profile_run"] - in_pr_pred,
                           _med(r["phases"]["profile_run"] for r in runs) - in_pr_meas)
    total = (pred.total_s, _med(r["total_s"] for r in runs))
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
        rows.append(LadderRow(src, vc.model_config.max_model_len, variant, (pred.total_s, _med(r["total_s"] for r in runs)),
                              (pred.peak_rss_bytes, _med(r["peak_rss_bytes"] for r in runs)), part_gaps(pred, plan, runs),
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
        totals = {v: _med(r["total_s"] for r in x["runs"]) for v, x in res.variants.items()
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
        a, b, t = y.encoder_pair_s_per_token, y.encoder_pair_s_per_token2, x.encoder_tokens
        scale = x.encoder_s_at_tokens / (a * t + b * t * t)
        models[m] = replace(x, encoder_pair_s_per_token=a * scale, encoder_pair_s_per_token2=b * scale)
    rates = replace(
        o, large_gib=o.large_gib or n.large_gib,
        fill_s_per_gib={k: carried(r, n.fill_s_per_gib.get(k)) for k, r in o.fill_s_per_gib.items()},
        hash_s_per_gib={k: carried(r, n.hash_s_per_gib.get(k)) for k, r in o.hash_s_per_gib.items()},
        copy_s_per_gib=carried(o.copy_s_per_gib, n.copy_s_per_gib), models=models)
    return Calibration(rates, old.hardware, old.date, old.path)


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
        blocks.append(f"**{rows[0].source}**, max_model_len {n}, measured {Result.load(path).env.get('date', '')[:10]}")
        blocks.append(md_table(["row", "predicted s", "measured s", "error", "predicted peak GiB", "measured peak GiB",
                                "error", f"ratio to {reference} predicted / measured",
                                "predicted ratio against committed ladders' measured", "largest miss"], table))
    return md(*blocks)


def main(argv: Optional[list[str]] = None) -> int:
    """Print the prediction-against-measurement table; 2 when there is no calibration."""
    ap = argparse.ArgumentParser(prog="python -m refimpl.lab.explore.cost_check", description=__doc__.split("\n")[0])
    ap.add_argument("--calibration", help="a calibration Result (default: results/<this machine>/calibration.json)")
    ap.add_argument("--results", default=str(REPO_ROOT / "results"), help="the results/ folder to read")
    ap.add_argument("--quiet-only", action="store_true", help="leave out the -shared folder (runs made under load)")
    ap.add_argument("--same-day", nargs="+", metavar=("CALIBRATION", "LADDER"),
                    help="the benchmark table: a calibration and start-up ladders measured on its day")
    ap.add_argument("--carry-from", metavar="CALIBRATION",
                    help="with --same-day: rates the same-day calibration lacks, from this one (carry_rates)")
    a = ap.parse_args(argv)
    if a.same_day:
        if len(a.same_day) < 2:
            ap.error("--same-day needs a calibration and at least one ladder")
        day = Calibration.load(a.same_day[0])
        if a.carry_from:
            day = carry_rates(day, Calibration.load(a.carry_from))
        print(same_day_table(day, [Path(p) for p in a.same_day[1:]], Path(a.results)))
        return 0
    cal = Calibration.load(a.calibration) if a.calibration else Calibration.for_this_machine(Path(a.results))
    if cal is None:
        print("no calibration for this machine: run `refimpl bench calibrate` first", file=sys.stderr)
        return 2
    rows = compare(cal, sources(cal, Path(a.results), shared=not a.quiet_only))
    ratios = ratio_rows(rows)
    print(comparison_table(rows, cal))
    print()
    print(comparison_table(ratios, cal))
    print()
    print("\n".join(within_goal(rows + ratios, cal)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
