"""Engine against transformers' static-batch generate() on the realistic workload, in one
process, in CPU seconds: both serve the same requests in the order given (default E H H E),
after an untimed warm-up of each. CPU seconds (``time.process_time``, user + system) resist
the other load on a shared machine better than wall seconds; both are printed. Issue 7.

    PYTHONPATH=. .venv/bin/python scripts/engine_vs_generate_cpu.py --num-requests 64 --order EHHE

Per run: CPU s, wall s, requests/s, output tokens, TTFT / E2E p50 and p90 (s), and for the
engine its steps and the EngineCore.step() split (schedule / prepare / model / sample / update, s).
"""
from __future__ import annotations

import argparse
import time

from refimpl.lab.bench import serve as W
from refimpl.lab.bench.common import set_single_thread
from refimpl.sampling_params import SamplingParams


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="whisper-tiny.en")
    p.add_argument("--num-requests", type=int, default=64)
    p.add_argument("--order", default="EHHE", help="E = engine (0.11.0), H = generate()")
    p.add_argument("--max-num-seqs", type=int, default=16)
    p.add_argument("--max-tokens", type=int, default=96)
    args = p.parse_args()
    from refimpl.config import ModelConfig
    from refimpl.engine.core import StepTimings
    from refimpl.engine.llm_engine import LLMEngine
    from refimpl.multimodal import MULTIMODAL_REGISTRY
    from refimpl.tokenizer import whisper_decoder_prompt
    from refimpl.worker.model_loader import get_model
    set_single_thread()
    work, warm = W.make_workload(args.num_requests, 0), W.make_workload(4, 1000)
    engine = LLMEngine.from_args(args.model, encoder_len_variant="0.11.0", device="cpu",
                                 max_num_seqs=args.max_num_seqs, process_mode="inproc",
                                 disable_mm_preprocessor_cache=True)
    mc = ModelConfig(args.model, device="cpu")
    model, proc = get_model(mc), MULTIMODAL_REGISTRY.create_processor(mc, disable_cache=True)
    dec = whisper_decoder_prompt(args.model)
    W.serve_engine(engine, warm, SamplingParams(max_tokens=args.max_tokens))
    W.serve_hf(model, proc, dec, warm, args.max_tokens, args.max_num_seqs)
    for tag in args.order:
        c0, split = time.process_time(), ""
        if tag == "E":
            engine.engine_core.step_timings.clear()
            r = W.serve_engine(engine, work, SamplingParams(max_tokens=args.max_tokens))
            steps = list(engine.engine_core.step_timings)
            split = f" steps {r['steps']} " + str({k: round(sum(getattr(t, k) for t in steps), 2)
                                                   for k in StepTimings.PARTS})
        else:
            r = W.serve_hf(model, proc, dec, work, args.max_tokens, args.max_num_seqs)
        cpu = time.process_time() - c0
        print(f"{tag} cpu_s {cpu:.2f} wall_s {r['wall_s']:.2f} req/s {r['requests_per_s']:.3f} "
              f"tokens {r['num_output_tokens']} ttft p50/p90 {r['ttft_s_p50']:.2f}/{r['ttft_s_p90']:.2f} "
              f"e2e p50/p90 {r['e2e_s_p50']:.2f}/{r['e2e_s_p90']:.2f}{split}", flush=True)


if __name__ == "__main__":
    main()
