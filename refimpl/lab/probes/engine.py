"""Engine probes: the engine against transformers' generate() in CPU seconds (``engine_vs_generate``,
in this process or one fresh process per run of several source trees), and ops and syncs per step
(``step_ops``: refimpl.lab.bench.step_ops.op_budget as a Result)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from refimpl.lab.bench.schema import Result
from refimpl.lab.probes import generate_child
from refimpl.lab.probes.common import result, variant
from refimpl.lab.probes.specs import EngineVsGenerateSpec, StepOpsSpec
from refimpl.lab.stats import median, summarize

__all__ = ["engine_vs_generate", "step_ops"]

ENGINE, HF = "engine", "hf-generate"
METRICS = ("cpu_s", "wall_s", "requests_per_s")


def _child(spec: EngineVsGenerateSpec, tree: str, order: str) -> list[dict[str, Any]]:
    """``generate_child`` run as a file in a fresh process with PYTHONPATH=tree."""
    args = {"model": spec.model, "num_requests": spec.num_requests, "max_num_seqs": spec.max_num_seqs,
            "max_tokens": spec.max_tokens, "warmup_requests": spec.warmup_requests, "order": order}
    env = dict(os.environ, PYTHONPATH=str(Path(tree).resolve()))
    out = subprocess.run([sys.executable, generate_child.__file__, json.dumps(args)], env=env,
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def _ratios(runs: list[dict]) -> dict[str, Any]:
    """Per process (both served in it): engine / generate() requests/s and generate() / engine CPU s."""
    return {"engine_over_generate_rps": summarize([r[ENGINE]["requests_per_s"] / r[HF]["requests_per_s"] for r in runs]),
            "generate_over_engine_cpu": summarize([r[HF]["cpu_s"] / r[ENGINE]["cpu_s"] for r in runs])}


def engine_vs_generate(spec: EngineVsGenerateSpec) -> Result:
    """Without ``trees``: variants ``engine`` and ``hf-generate``, one run per letter of ``order`` in this
    process (generate_child.serve_in_order); ``engine``'s summary adds ``engine_over_generate_rps`` (the
    ratio of the medians). With ``trees``: ``rounds`` rounds, each a fresh process per tree (trees in
    order on even rounds, reversed on odd ones; each process serving EH or HE, alternating), variants
    ``engine <tree>`` and ``hf-generate <tree>``; each tree's engine summary adds the per-process ratios,
    and ``comparisons`` the first tree's engine CPU s over each other tree's, round by round."""
    spec.check()
    if not spec.trees:
        recs = generate_child.serve_in_order(spec.model, spec.num_requests, spec.max_num_seqs, spec.max_tokens,
                                             spec.warmup_requests, spec.order)
        by = {t: [r for r in recs if r["tag"] == t] for t in "EH"}
        variants = {name: variant(by[t], METRICS) for name, t in ((ENGINE, "E"), (HF, "H")) if by[t]}
        if by["E"] and by["H"]:
            variants[ENGINE]["summary"]["engine_over_generate_rps"] = (
                median(r["requests_per_s"] for r in by["E"]) / median(r["requests_per_s"] for r in by["H"]))
        return result(spec, variants)
    per: dict[str, list[dict]] = {t: [] for t in spec.trees}
    for rnd in range(spec.rounds):
        for i, tree in enumerate(spec.trees if rnd % 2 == 0 else spec.trees[::-1]):
            recs = _child(spec, tree, "EH" if (rnd + i) % 2 == 0 else "HE")
            per[tree].append({ENGINE if r["tag"] == "E" else HF: r | {"round": rnd} for r in recs})
    variants = {}
    for tree, runs in per.items():
        variants[f"{ENGINE} {tree}"] = variant([r[ENGINE] for r in runs], METRICS, **_ratios(runs))
        variants[f"{HF} {tree}"] = variant([r[HF] for r in runs], METRICS)
    res, first = result(spec, variants, in_process=False), spec.trees[0]
    for t in spec.trees[1:]:  # round by round: the first tree's engine CPU s over this tree's
        ratios = [a[ENGINE]["cpu_s"] / b[ENGINE]["cpu_s"] for a, b in zip(per[first], per[t])]
        res.comparisons.append({"variant": f"{ENGINE} {first}", "over": f"{ENGINE} {t}", "metric": "cpu_s",
                                "ratios": ratios, "median": median(ratios)})
    return res


def step_ops(spec: StepOpsSpec) -> Result:
    """``op_budget(model, num_requests, max_tokens, cross_attention_read=...)``: variant ``engine``, one run
    per step kind (prefill, mixed, decode, decode_full: steps, median and largest ops, largest syncs), its
    summary ``ratio`` (engine ops of a full decode step / generate() ops per token) and
    ``tokens_identical``; variant ``hf-generate``, one run (ops and syncs per token). Counts, not timings."""
    spec.check()
    from refimpl.lab.bench.common import set_single_thread
    from refimpl.lab.bench.step_ops import STEP_KINDS, op_budget
    set_single_thread()
    b = op_budget(spec.model, spec.num_requests, spec.max_tokens, cross_attention_read=spec.cross_attention_read)
    kinds = [{"kind": k, **b["engine"][k]} for k in (*STEP_KINDS, "decode_full")]
    gen = b["generate"]
    return result(spec, {
        ENGINE: {"runs": kinds, "summary": {"ratio": b["ratio"], "tokens_identical": b["tokens_identical"],
                                            "decode_full_ops_median": b["engine"]["decode_full"]["ops_median"]}},
        HF: {"runs": [gen], "summary": {k: gen[k] for k in ("ops_per_token", "syncs_per_token")}}})
