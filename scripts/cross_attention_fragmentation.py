"""Does a long-running engine's cross-attention slow down as its block pool fragments?

One in-process engine (scheduler-config, whisper-tiny.en real weights, torch on one thread)
serves the same EOS workload ``--runs`` times. Per run: CPU seconds of serving, requests/s,
and the mean number of key runs (``attention.paged_attention.key_segments``: maximal
stretches of consecutive cache slots) per request per step, counted by wrapping the function
``CrossAttentionBuilder`` calls. A fresh pool hands a request consecutive blocks (few runs);
blocks freed by finished requests come back in another order, so later requests' 94
cross-attention blocks split into more runs, and the run-by-run read (one SDPA per run)
costs more. vLLM's attention kernels read K/V through the block table and do not see runs.

    PYTHONPATH=. .venv/bin/python scripts/cross_attention_fragmentation.py --num-requests 48 --runs 4
"""
from __future__ import annotations

import argparse
import time

import refimpl.attention.cross_attention as cross_attention
from refimpl.bench import workload as W
from refimpl.bench.common import set_single_thread
from refimpl.engine.llm_engine import LLMEngine


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--num-requests", type=int, default=48)
    p.add_argument("--runs", type=int, default=4)
    p.add_argument("--max-tokens", type=int, default=96)
    p.add_argument("--max-num-seqs", type=int, default=16)
    args = p.parse_args()
    count = {"lookups": 0, "runs": 0}
    key_segments = cross_attention.key_segments

    def counted(block_ids, seq_len, block_size):
        segs = key_segments(block_ids, seq_len, block_size)
        count["lookups"] += 1
        count["runs"] += len(segs)
        return segs

    cross_attention.key_segments = counted
    set_single_thread()
    engine = LLMEngine.from_args("whisper-tiny.en", encoder_len_variant="scheduler-config", device="cpu",
                                 max_num_seqs=args.max_num_seqs, process_mode="inproc",
                                 disable_mm_preprocessor_cache=True)
    work = W.make_workload(args.num_requests, 0, "all")
    for i in range(args.runs):
        count.update(lookups=0, runs=0)
        c0 = time.process_time()
        r = W.serve_engine(engine, work, args.max_tokens)
        print(f"run {i}: cpu_s {time.process_time() - c0:.2f} req/s {r['requests_per_s']:.3f} "
              f"key runs per request-step {count['runs'] / count['lookups']:.2f} "
              f"({count['lookups']} lookups)", flush=True)


if __name__ == "__main__":
    main()
