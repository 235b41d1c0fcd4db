"""Start-up wall time of LLMEngine("whisper-tiny") in-process vs two processes (spawn cost).

    python scripts/two_process_spawn_cost.py --repeats 3 --output-json PATH

Each run is a fresh Python process that imports refimpl, builds the engine with
``process_mode`` inproc or mp (torch on one thread) and prints the seconds from just before
``LLMEngine.from_args`` to its return (mp: child spawn, its imports and start-up, the reset).
Modes alternate (A B A B ...) after one untimed warm-up of each; medians with [min, max].
"""
from __future__ import annotations

import argparse
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
    from refimpl.lab.bench.schema import Result
    from refimpl.lab.env import collect_env
    from refimpl.lab.stats import summarize
    one("inproc"), one("mp")  # warm-up (file cache)
    runs: dict[str, list[float]] = {"inproc": [], "mp": []}
    for _ in range(args.repeats):
        for mode in runs:
            runs[mode].append(one(mode))
    env = {**collect_env(), "device": "cpu", "in_process": False}  # each start-up a subprocess
    res = Result("spawn-cost", env, {"model": "whisper-tiny", "variants": list(runs),
                                     "repeats": args.repeats},
                 {m: {"runs": [{"startup_s": x} for x in v], "summary": {"startup_s": summarize(v)}}
                  for m, v in runs.items()})
    res.write(args.output_json)
    for m, v in runs.items():
        s = summarize(v)
        print(f"{m}: median {s['median']:.2f} s [{s['min']:.2f}, {s['max']:.2f}] over {s['n']} runs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
