"""The start-up section of summary.md and the budget experiment's (``refimpl report``, notebook 01's
release ladder): size, how it was measured, the tables, call 1's ratio explained. Re-exported by
refimpl/lab/studies/startup.py."""
from __future__ import annotations

from typing import Optional

from refimpl.lab.bench.schema import Result
from refimpl.lab.studies import section_md
from refimpl.lab.studies import startup_tables as T
from refimpl.lab.studies.startup_mechanism import mechanism_md
from refimpl.lab.studies.startup_regime import regime_sentence, size
from refimpl.lab.studies.startup_tables import AFTER, BEFORE, budget_table, call1_ratio, medians_table


def budget_pair(budget: Result) -> Optional[tuple[str, str]]:
    """(num, den) call 1 is compared by: AFTER over BEFORE when both were measured, else the second row
    asked for over the first; None with fewer than two rows."""
    names = T.measured(budget)
    if {AFTER, BEFORE} <= set(names):
        return AFTER, BEFORE
    asked = [v for v in budget.variants if v in names]
    return (asked[1], asked[0]) if len(asked) > 1 else None


def _budget_blocks(budget: Result) -> list[str]:
    """The reviewer's experiment: each call's seconds and, with two rows, call 1's ratio explained."""
    blocks = ["The reviewer's experiment (successive compute_encoder_budget calls, "
              f"{T.runs_word(budget)}):", budget_table(budget)]
    pair = budget_pair(budget)
    r = call1_ratio(budget, *pair, min_n=2) if pair else {"estimate": None}
    if pair and r["estimate"] is not None:
        blocks += [f"Call 1, {pair[0]} / {pair[1]} (wall s): {r['estimate']:.2f} [{r['low']:.2f}, {r['high']:.2f}] "
                   f"(95% bootstrap interval, {r['state']}), min-max ranges "
                   f"{'overlap' if r['ranges_overlap'] else 'apart'}.", T.call1_explained(budget, *pair)]
    return blocks


def summary_md(res: Result, budget: Optional[Result] = None) -> str:
    """The start-up section of summary.md: size, how it was measured, the tables."""
    n = max(len(r["runs"]) for r in res.variants.values())
    explicit = res.params.get("max_model_len") is not None and {AFTER, BEFORE} <= set(T.measured(res))
    blocks = [medians_table(res), T.ratios_table(res, 2), regime_sentence(res) if explicit else "",
              "HF-processor passes with multimodal data per "
              "phase:", T.passes_table(res), T.hashing_sentence(res), mechanism_md(res),
              *(_budget_blocks(budget) if budget else [])]
    return section_md(f"## Start-up (PR #17935): {res.params['model']}, {size(res)}", res,
                      f": {n} {T.runs_word(res)} per variant, {len(res.variants)} variants.", *blocks)


def budget_md(budget: Result) -> str:
    """The budget experiment alone (``refimpl bench startup --calls N``), as summary.md shows it."""
    return section_md(f"## compute_encoder_budget calls (PR #17935): {budget.params['model']}, {size(budget)}",
                      budget, ".", *_budget_blocks(budget))
