"""Peak host memory of a whisper-large-v3 engine (full scale, float32, CPU) against the
estimate of refimpl.lab.bench.guard.check_serving_memory.

    python scripts/serving_memory_check.py MAX_NUM_SEQS     # about 7 min and 10 GiB at 8

Serves MAX_NUM_SEQS requests of 3 tokens (400 KV blocks) and prints one JSON line: GiB over
this process's RSS before the engine, after loading and at the peak (RSS sampled every 10 ms),
and the estimate.
"""
import json
import sys

import torch

from refimpl.audio import make_request_audios
from refimpl.engine.llm_engine import LLMEngine
from refimpl.lab.bench.guard import check_serving_memory
from refimpl.sampling_params import SamplingParams
from refimpl.utils.mem_utils import RssPeakSampler, rss_bytes


def main(seqs: int) -> dict:
    torch.set_num_threads(1)
    before = rss_bytes()
    with RssPeakSampler(0.01) as s:
        eng = LLMEngine.from_args("whisper-large-v3", scale="full", device="cpu", process_mode="inproc",
                                  max_num_seqs=seqs, num_gpu_blocks=400)
        loaded = rss_bytes()
        est = check_serving_memory(eng.vllm_config, available=1 << 50)
        prompts = [{"multi_modal_data": {"audio": (a, 16000)}} for a in make_request_audios(seqs, seed=0)]
        outs = eng.generate(prompts, SamplingParams(max_tokens=3, ignore_eos=True))
    return {"max_num_seqs": seqs, "after_load_gib": (loaded - before) / 2**30,
            "peak_gib": (s.peak - before) / 2**30, "estimate_gib": est / 2**30,
            "tokens": [len(o.output_token_ids) for o in outs]}


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]))))
