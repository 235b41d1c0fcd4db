"""Does a long-running engine's cross-attention slow down as its block pool fragments, and
does the dense-once read (CacheConfig.cross_attention_read) remove that?

One in-process engine per read (0.11.0, whisper-tiny.en real weights, torch on one
thread) serves the same EOS workload ``--runs`` times, the reads alternating run by run. Per
run: CPU seconds of serving, requests/s, and the mean number of key runs per request
(``attention.cross_attention.key_segments``: maximal stretches of consecutive cache slots among
a request's 94 cross blocks), counted on the block ids each read is handed. A fresh pool hands
a request consecutive blocks (few runs); blocks freed by finished requests come back in another
order, so later requests' blocks split into more runs. Until issue 42 the paged-runs read paid one
matmul pair per run on every step; since, neither read sees runs (dense-once reads the requests'
rows of one tensor per layer, paged-runs gathers every request's blocks in one call per layer), as
vLLM's attention kernels, which read K/V through the block table.

    PYTHONPATH=. .venv/bin/python scripts/cross_attention_fragmentation.py --num-requests 48 --runs 3
"""
from __future__ import annotations

import argparse
import time

import refimpl.worker.whisper_runner as whisper_runner
from refimpl.attention.cross_attention import key_segments
from refimpl.engine.llm_engine import LLMEngine
from refimpl.lab.bench import serve as W
from refimpl.lab.bench.common import set_single_thread
from refimpl.sampling_params import SamplingParams


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--num-requests", type=int, default=48)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--max-tokens", type=int, default=96)
    p.add_argument("--max-num-seqs", type=int, default=16)
    p.add_argument("--read", default="paged-runs,dense-once", help="comma-separated cross_attention_read values")
    args = p.parse_args()
    count = {"lookups": 0, "runs": 0}

    def tally(block_ids, seq_len, block_size):
        segs = key_segments(block_ids, seq_len, block_size)
        count["lookups"] += 1
        count["runs"] += len(segs)
        return segs

    new_state = whisper_runner.WhisperRunner._new_request_state

    def counted_state(self, nr, old):       # the runs of the cross blocks each request is handed
        st = new_state(self, nr, old)
        tally(st.block_ids[1], self.encoder_len, self.block_size)
        return st

    whisper_runner.WhisperRunner._new_request_state = counted_state  # type: ignore[method-assign]
    set_single_thread()
    reads = args.read.split(",")
    engines = {r: LLMEngine.from_args("whisper-tiny.en", encoder_len_variant="0.11.0",
                                      device="cpu", max_num_seqs=args.max_num_seqs, process_mode="inproc",
                                      disable_mm_preprocessor_cache=True, cross_attention_read=r)
               for r in reads}
    work = W.make_workload(args.num_requests, 0)
    for i in range(args.runs):
        for read, engine in engines.items():
            count.update(lookups=0, runs=0)
            c0 = time.process_time()
            r = W.serve_engine(engine, work, SamplingParams(max_tokens=args.max_tokens))
            print(f"run {i} {read:>10}: cpu_s {time.process_time() - c0:.2f} "
                  f"req/s {r['requests_per_s']:.3f} key runs per request {count['runs'] / count['lookups']:.2f}",
                  flush=True)


if __name__ == "__main__":
    main()
