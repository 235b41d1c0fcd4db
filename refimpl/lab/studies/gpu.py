"""The committed GPU runs (``results/gpu-*/``: the runs of benchmarks/gpu_session_*.toml, scripts/gpu_bench.sh
before issue 47) beside the CPU ones:
start-up seconds and phases per row, and each Whisper row's step time and registry share."""
from __future__ import annotations

import statistics
from pathlib import Path
from typing import Optional

from refimpl.lab.bench.schema import Result
from refimpl.lab.studies import RESULTS_DIR, md, md_table, provenance, spread
from refimpl.lab.studies.serving_tables import workload_table
from refimpl.lab.studies.throughput import paired_table

__all__ = ["gpu_folders", "startup_rows", "startup_md", "registry_rows", "serving_md"]

SEED_SHARE = 0.03  # the seed's "about 3%" (vLLM PR #24989's description)


def gpu_folders(results_dir: Path = RESULTS_DIR) -> list[Path]:
    """The committed folders of GPU runs (``results/gpu-<name>/``)."""
    return sorted(p for p in results_dir.glob("gpu-*") if p.is_dir())


def _load(folder: Path, pattern: str) -> list[tuple[Path, Result]]:
    return [(p, Result.load(p)) for p in sorted(folder.glob(pattern))]


def startup_rows(model: str, cpu: str, results_dir: Path = RESULTS_DIR) -> list[dict]:
    """Per start-up row of every GPU folder (its ``startup_<model>_*.json`` runs pooled: fresh processes,
    one machine): wall s and profile_run s, beside the same row of ``cpu``'s committed release-row ladder
    at the same max_model_len."""
    cpu_path = results_dir / cpu / f"startup_{model}_release-rows.json"
    cpu_res = Result.load(cpu_path) if cpu_path.exists() else None
    out = []
    for folder in gpu_folders(results_dir):
        found = _load(folder, f"startup_{model}_*.json")
        by: dict[str, list[dict]] = {}
        for _, res in found:
            for v, d in res.variants.items():
                by.setdefault(v, []).extend(d["runs"])
        for v, runs in by.items():
            if not runs:
                continue
            cpu_runs = cpu_res.runs(v) if cpu_res is not None and v in cpu_res.variants else []
            same_len = [r for r in cpu_runs if r.get("max_model_len") == runs[0]["max_model_len"]]
            out.append({"hardware": folder.name, "variant": v, "max_model_len": runs[0]["max_model_len"],
                        "runs": len(runs), "total_s": [r["total_s"] for r in runs],
                        "profile_run_s": [r["phases"]["profile_run"] for r in runs],
                        "peak_rss_gib": statistics.median(r["peak_rss_bytes"] for r in runs) / 2**30,
                        "files": [str(p.relative_to(results_dir.parent)) for p, _ in found],
                        "cpu_total_s": [r["total_s"] for r in same_len], "cpu": cpu})
    return out


def startup_md(model: str, cpu: str, results_dir: Path = RESULTS_DIR) -> str:
    """Markdown: start-up wall s per row on each GPU host beside ``cpu``'s committed ladder."""
    rows = startup_rows(model, cpu, results_dir)
    if not rows:
        return (f"No GPU start-up run of {model} is committed (`results/gpu-*/`; scripts/gpu_session.sh runs "
                "the GPU session: docs/gpu-session.md).")
    table = md_table(
        ["host", "row", "max_model_len", "runs", "start-up s: median [min, max]", "of which profile_run s",
         "peak RSS GiB", f"{cpu}: start-up s (release-row ladder)"],
        [[r["hardware"], r["variant"], r["max_model_len"], r["runs"], spread(r["total_s"]), spread(r["profile_run_s"]),
          f"{r['peak_rss_gib']:.1f}", spread(r["cpu_total_s"]) if r["cpu_total_s"] else "not in that run"]
         for r in rows])
    files = sorted({f for r in rows for f in r["files"]})
    return md(f"From {', '.join(f'`{f}`' for f in files)} (fresh processes, no warm-up, runs pooled over the "
              f"files) and `results/{cpu}/startup_{model}_release-rows.json`. Seconds of two machines on two "
              "days: compare rows within one column.", table)


def registry_rows(results_dir: Path = RESULTS_DIR) -> list[dict]:
    """Per Whisper row of every committed paired run (CPU and GPU folders): step time and the share of
    wall time spent in the multimodal registry's encoder-length calls (medians over the rounds)."""
    out: list[dict] = []
    if not results_dir.is_dir():  # an installed wheel ships no results/
        return out
    for folder in sorted(p for p in results_dir.iterdir() if p.is_dir()):
        for p, res in _load(folder, "paired_*.json"):
            for v in res.variants:
                runs = [r for r in res.runs(v) if r.get("steps")]
                if not runs or "registry_s" not in runs[0]:
                    continue
                calls = sum(r["registry_calls"] for r in runs)
                out.append({"hardware": folder.name, "file": p.name, "model": res.params["model"], "variant": v,
                            "gpu": bool(res.env.get("hardware", {}).get("gpu")), "rounds": len(runs),
                            "step_ms": 1e3 * statistics.median(r["wall_s"] / r["steps"] for r in runs),
                            "call_ms": 1e3 * sum(r["registry_s"] for r in runs) / calls if calls else 0.0,
                            "calls": statistics.median(r["registry_calls"] for r in runs),
                            "share": statistics.median(r["registry_s"] / r["wall_s"] for r in runs)})
    return out


def serving_md(results_dir: Path = RESULTS_DIR, cpu: Optional[str] = None) -> str:
    """Markdown: each GPU folder's paired gains and workload, and the registry share per row on the GPU
    beside ``cpu``'s paired runs (the seed says about 3%)."""
    blocks = []
    for folder in gpu_folders(results_dir):
        paired = [r for _, r in _load(folder, "paired_*.json")]
        if paired:
            blocks += [f"Paired gains on {folder.name} ({provenance(paired[0])}), CPU seconds, 95% CI:",
                       paired_table(paired, min_pairs=5)]
        blocks += [x for _, r in _load(folder, "workload_*.json") for x in
                   (f"The engine against transformers' `generate()` on {folder.name}:", workload_table(r))]
    every = registry_rows(results_dir)
    calling = {(r["hardware"], r["file"]) for r in every if r["calls"]}  # runs with a registry row in them
    rows = [r for r in every if (r["gpu"] or r["hardware"] == cpu) and (r["hardware"], r["file"]) in calling]
    if not any(r["gpu"] for r in rows):
        return ("No GPU serving run is committed (`results/gpu-*/`; scripts/gpu_session.sh runs "
                "the GPU session: docs/gpu-session.md).")
    blocks += [f"Where the registry calls' time sits in a step (the seed: about {100 * SEED_SHARE:.0f}% of a GPU "
               "step for #24989); wall-time medians over the rounds:",
               md_table(["host", "file", "model", "row", "rounds", "step ms", "registry calls / round",
                         "ms per call", "registry share of wall"],
                        [[r["hardware"], r["file"], r["model"], r["variant"], r["rounds"], f"{r['step_ms']:.1f}",
                          f"{r['calls']:g}", f"{r['call_ms']:.2f}", f"{100 * r['share']:.1f}%"] for r in rows])]
    return md(*blocks)
