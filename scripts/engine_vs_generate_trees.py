"""The engine against transformers' generate() on two source trees (before / after a change), each
run a fresh process of scripts/engine_vs_generate_cpu.py, the trees interleaved A B B A by round
and each process alternating E H / H E. Issue 42: the serving step before and after.

    PYTHONPATH=. .venv/bin/python scripts/engine_vs_generate_trees.py --before /tmp/old --after . \
        --model whisper-tiny.en --rounds 4 --num-requests 16 --max-tokens 48

Per process: engine and generate() CPU s and requests/s on the same requests; per tree the
engine / generate() requests/s ratio and the generate() / engine CPU-s ratio (medians, each round
in brackets), then after / before of the engine's CPU s per paired round. Prints JSON at the end.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

LINE = re.compile(r"^([EH]) cpu_s ([\d.]+) wall_s ([\d.]+) req/s ([\d.]+) tokens (\d+)")
SCRIPT = Path(__file__).resolve().parent / "engine_vs_generate_cpu.py"


def run(tree: str, model: str, order: str, args) -> dict:
    env = dict(os.environ, PYTHONPATH=str(Path(tree).resolve()))
    out = subprocess.run([sys.executable, str(SCRIPT), "--model", model, "--order", order,
                          "--num-requests", str(args.num_requests), "--max-tokens", str(args.max_tokens),
                          "--max-num-seqs", str(args.max_num_seqs)],
                         env=env, capture_output=True, text=True, check=True).stdout
    rec: dict = {}
    for line in out.splitlines():
        m = LINE.match(line)
        if m:
            rec[m[1]] = {"cpu_s": float(m[2]), "wall_s": float(m[3]), "requests_per_s": float(m[4]),
                         "tokens": int(m[5])}
    return rec


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--before", required=True)
    p.add_argument("--after", required=True)
    p.add_argument("--model", default="whisper-tiny.en")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--num-requests", type=int, default=16)
    p.add_argument("--max-tokens", type=int, default=48)
    p.add_argument("--max-num-seqs", type=int, default=16)
    args = p.parse_args()
    runs: dict[str, list[dict]] = {"before": [], "after": []}
    for r in range(args.rounds):
        trees = ("before", "after") if r % 2 == 0 else ("after", "before")
        for i, t in enumerate(trees):
            rec = run(getattr(args, t), args.model, "EH" if (r + i) % 2 == 0 else "HE", args)
            runs[t].append(rec)
            print(f"round {r} {t:6s} E cpu {rec['E']['cpu_s']:.2f} req/s {rec['E']['requests_per_s']:.3f} "
                  f"tokens {rec['E']['tokens']} | H cpu {rec['H']['cpu_s']:.2f} req/s {rec['H']['requests_per_s']:.3f} "
                  f"tokens {rec['H']['tokens']}", flush=True)
    summary = {}
    for t, rs in runs.items():
        rps = [x["E"]["requests_per_s"] / x["H"]["requests_per_s"] for x in rs]
        cpu = [x["H"]["cpu_s"] / x["E"]["cpu_s"] for x in rs]
        summary[t] = {"engine_over_generate_rps": rps, "generate_over_engine_cpu": cpu,
                      "median_rps_ratio": statistics.median(rps), "median_cpu_ratio": statistics.median(cpu)}
    speed = [b["E"]["cpu_s"] / a["E"]["cpu_s"] for b, a in zip(runs["before"], runs["after"])]
    summary["engine_cpu_before_over_after"] = speed
    summary["median_engine_speedup"] = statistics.median(speed)
    for t in ("before", "after"):
        s = summary[t]
        print(f"{t}: engine/generate req/s {s['median_rps_ratio']:.3f} {[round(x, 3) for x in s['engine_over_generate_rps']]}"
              f"  generate/engine CPU s {s['median_cpu_ratio']:.3f} {[round(x, 3) for x in s['generate_over_engine_cpu']]}")
    print(f"engine CPU s before/after: {summary['median_engine_speedup']:.3f} {[round(x, 3) for x in speed]}")
    print(json.dumps({"model": args.model, "args": vars(args), "runs": runs, "summary": summary}))


if __name__ == "__main__":
    main()
