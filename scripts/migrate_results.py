"""Rewrite result JSONs of the layout before schema 1 into refimpl.bench.schema (run once).

    python scripts/migrate_results.py results/*/*.json        # rewrites the files in place

Old layout: one variant -> runs and env keys at the top level; several -> ``by_variant``;
the throughput sweep -> ``points`` only. Runs are kept as measured; each summary is computed
from the runs by the benchmark's own ``summarize_runs``; ``params`` keep only what the old
file recorded, and every spec field it did not record is listed under ``missing`` (as are
``env.torch_env``, which the old collector did not capture, and, for the sweep, ``env`` and
``runs``). Nothing is invented. A file already in the schema is left alone.
"""
from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

from refimpl.bench.bench_spec import bench_module
from refimpl.bench.common import write_json
from refimpl.bench.schema import SCHEMA_VERSION, validate

ENV_KEYS = ("date", "hardware", "versions", "git", "torch_num_threads", "thread_env", "device",
            "in_process")
PARAM_KEYS = ("model", "engine", "num_requests", "max_tokens", "max_num_seqs")


def _bench_of(path: Path) -> str:
    if path.name.startswith("throughput_sweep"):
        return "throughput-sweep"
    if path.name.startswith("twoproc_spawn_cost"):
        return "spawn-cost"
    return path.name.removeprefix("twoproc_").split("_", 1)[0]


def migrate_spawn_cost(old: dict) -> dict:
    """scripts/two_process_spawn_cost.py's old output: seconds per start-up per process mode."""
    from refimpl.stats import summarize
    variants = {m: {"runs": [{"startup_s": x} for x in xs],
                    "summary": {"startup_s": summarize(xs)}} for m, xs in old["runs_s"].items()}
    return {"bench": "spawn-cost", "schema_version": SCHEMA_VERSION, "env": old["env"],
            "params": {"model": old["model"], "variants": list(old["runs_s"])},
            "variants": variants, "missing": ["env.device", "env.in_process", "params.repeats"]}


def migrate_sweep(old: dict) -> dict:
    variants = {}
    for p in old["points"]:
        summary = {k: v for k, v in p.items() if k != "runs"}
        summary["n"] = p["runs"]
        variants[f"max_tokens={p['max_tokens']}"] = {"runs": [], "summary": summary}
    params = {"model": old["model"], "variants": ["runner-config", "scheduler-config"],
              "max_tokens": [p["max_tokens"] for p in old["points"]],
              "num_requests": old["num_requests"], "max_num_seqs": old["max_num_seqs"]}
    return {"bench": "throughput-sweep", "schema_version": SCHEMA_VERSION, "env": {},
            "params": params, "variants": variants, "missing": ["env", "runs"]}


def migrate(old: dict, bench: str) -> dict:
    """The schema-1 form of ``old`` (a result of ``bench`` in the old layout)."""
    if "schema_version" in old:
        return old
    if bench == "throughput-sweep":
        return migrate_sweep(old)
    if bench == "spawn-cost":
        return migrate_spawn_cost(old)
    per_variant = old.get("by_variant") or {old["variant"]: old}
    mod = bench_module(bench)
    env = {k: old[k] for k in ENV_KEYS if k in old}
    params = {"variants": list(per_variant), **{k: old[k] for k in PARAM_KEYS if k in old}}
    spec_fields = [f.name for f in dataclasses.fields(mod.Spec)]
    missing = ([] if "torch_env" in env else ["env.torch_env"]) + [f"params.{f}" for f in spec_fields if f not in params]
    variants = {v: {"runs": r["runs"], "summary": mod.summarize_runs(r["runs"])}
                for v, r in per_variant.items()}
    return validate({"bench": bench, "schema_version": SCHEMA_VERSION, "env": env,
                     "params": params, "variants": variants, "missing": missing})


def main(paths: list[str]) -> int:
    for p in map(Path, paths):
        old = json.loads(p.read_text())
        new = migrate(old, _bench_of(p))
        if new is not old:
            write_json(p, validate(new))
            print(f"migrated {p}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
