"""Two-process spawn cost: start-up of ``LLMEngine.from_args`` in this process (inproc) against the
engine core in a child process (mp: the child's spawn, its imports and start-up, the reset), each
run a fresh Python process of this module (``python -m refimpl.lab.probes.spawn MODE MODEL SEQS
BLOCKS`` prints the seconds)."""
from __future__ import annotations

import subprocess
import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the child imports only what it times
    from refimpl.lab.bench.schema import Result
    from refimpl.lab.probes.specs import SpawnCostSpec

__all__ = ["MODES", "one_start", "spawn_cost"]

MODES = ("inproc", "mp")


def one_start(mode: str, model: str, max_num_seqs: int, num_gpu_blocks: int) -> float:
    """Seconds from just before ``LLMEngine.from_args`` to its return in this process (torch on one thread)."""
    import torch
    torch.set_num_threads(1)
    from refimpl.engine.llm_engine import LLMEngine
    t0 = time.perf_counter()
    e = LLMEngine.from_args(model, device="cpu", max_num_seqs=max_num_seqs, num_gpu_blocks=num_gpu_blocks,
                            process_mode=mode)  # type: ignore[arg-type]
    s = time.perf_counter() - t0
    e.shutdown()
    return s


def _fresh(mode: str, spec: "SpawnCostSpec") -> float:
    args = [mode, spec.model, str(spec.max_num_seqs), str(spec.num_gpu_blocks)]
    out = subprocess.run([sys.executable, "-m", __name__, *args], check=True, capture_output=True, text=True)
    return float(out.stdout.strip().splitlines()[-1])


def spawn_cost(spec: "SpawnCostSpec") -> "Result":
    """Result ``spawn-cost``: variants inproc and mp, each run ``{"startup_s"}`` of a fresh process;
    one untimed run of each mode first (the file cache; none with ``spec.warmup`` False), then the modes
    alternating A B A B."""
    from refimpl.lab.probes.common import result, variant
    spec.check()
    for mode in MODES if spec.warmup else ():
        _fresh(mode, spec)
    runs: dict[str, list[dict]] = {m: [] for m in MODES}
    for _ in range(spec.repeats):
        for mode in MODES:
            runs[mode].append({"startup_s": _fresh(mode, spec)})
    return result(spec, {m: variant(v, ["startup_s"]) for m, v in runs.items()}, in_process=False,
                  variants=list(MODES))


if __name__ == "__main__":
    print(one_start(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
