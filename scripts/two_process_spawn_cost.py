"""Start-up wall time of LLMEngine("whisper-tiny") in-process vs two processes (spawn cost).

    python scripts/two_process_spawn_cost.py --repeats 3 --output-json PATH

Each run is a fresh Python process that imports refimpl, builds the engine with
``process_mode`` inproc or mp (torch on one thread) and prints the seconds from just before
``LLMEngine.from_args`` to its return (mp: child spawn, its imports and start-up, the reset).
Modes alternate (A B A B ...) after one untimed warm-up of each; medians with [min, max].
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

RUN = """
import time, torch
torch.set_num_threads(1)
from refimpl.engine.llm_engine import LLMEngine
t0 = time.perf_counter()
e = LLMEngine.from_args("whisper-tiny", device="cpu", max_num_seqs=4, num_gpu_blocks=400,
                        process_mode=sys.argv[1])
print(time.perf_counter() - t0)
e.shutdown()
"""


def one(mode: str) -> float:
    out = subprocess.run([sys.executable, "-c", "import sys\n" + RUN, mode], check=True,
                         capture_output=True, text=True).stdout
    return float(out.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--output-json", required=True)
    args = p.parse_args()
    from refimpl.env import collect_env
    one("inproc"), one("mp")  # warm-up (file cache)
    runs: dict[str, list[float]] = {"inproc": [], "mp": []}
    for _ in range(args.repeats):
        for mode in runs:
            runs[mode].append(one(mode))
    res = {"model": "whisper-tiny", "runs_s": runs, "env": collect_env(),
           "median_s": {m: statistics.median(v) for m, v in runs.items()}}
    with open(args.output_json, "w") as f:
        json.dump(res, f, indent=1)
    for m, v in runs.items():
        print(f"{m}: median {statistics.median(v):.2f} s [{min(v):.2f}, {max(v):.2f}] over {len(v)} runs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
