"""Benchmark: Whisper serving throughput by encoder-length source (vLLM PRs #24866, #24989).

    refimpl bench throughput --model whisper-tiny \
        --variant registry,runner-config,scheduler-config --num-requests 64 --max-tokens 32 \
        --max-num-seqs 16 --repeats 3 --output-json throughput.json
    refimpl bench throughput --model whisper-tiny --engine hf ...   # transformers generate()

Fixed seed, an untimed warm-up batch, each repeat a fresh process. Requests carry real speech
(refimpl/data/speech, varied lengths up to 30 s) and decode ``--max-tokens`` tokens each
(``ignore_eos``, so every variant does the same work). Per run: ``requests_per_s``,
``output_tokens_per_s``, ``num_requests``, ``num_output_tokens``, ``registry_calls`` and
``registry_s_total`` (get_encdec_max_encoder_len after start-up), ``steps``,
``step_time_ms_median``, ``step_split_s`` (schedule / prepare / model / sample / update),
``wall_s``. ``--engine hf`` runs the same requests through transformers' generate() in static
batches of ``--max-num-seqs``.
"""
from __future__ import annotations

import argparse
import time

from refimpl.bench.common import set_single_thread, write_json
from refimpl.bench.orchestrate import add_common_args, drive, parse_variants
from refimpl.stats import median
from refimpl.variants import ENCODER_LEN_VARIANTS

MODELS = ("whisper-tiny", "whisper-large-v3")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="refimpl bench throughput", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="whisper-tiny", choices=MODELS)
    p.add_argument("--engine", default="refimpl", choices=("refimpl", "hf"))
    p.add_argument("--num-requests", type=int, default=64)
    p.add_argument("--max-tokens", type=int, default=32, help="output tokens per request")
    p.add_argument("--max-num-seqs", type=int, default=16, help="batch size (hf: static batch)")
    p.add_argument("--num-gpu-blocks", type=int, default=None)
    p.add_argument("--max-audios-per-step", type=int, default=1,
                   help="audios encoded per step under the encoder-batch variant (PR #29421); "
                        "the other variants keep 1")
    p.add_argument("--scale", default="auto", choices=("auto", "full", "small"))
    p.add_argument("--warmup-requests", type=int, default=4)
    p.add_argument("--seed", type=int, default=0)
    add_common_args(p, tuple(ENCODER_LEN_VARIANTS), "scheduler-config")
    return p


def _prompts(args):
    from refimpl.audio import make_request_audios
    return [{"multi_modal_data": {"audio": (a, 16000)}}
            for a in make_request_audios(args.num_requests, seed=args.seed)]


def run_engine(args: argparse.Namespace) -> dict:
    """Serve the requests with refimpl's LLMEngine; one record (see module doc)."""
    from refimpl.engine.llm_engine import LLMEngine
    from refimpl.multimodal import MULTIMODAL_REGISTRY as reg
    from refimpl.sampling_params import SamplingParams
    from refimpl.variants import get_encoder_len_variant
    n_audios = args.max_audios_per_step if get_encoder_len_variant(args.variant).encoder_batch else 1
    engine = LLMEngine.from_args(args.model, encoder_len_variant=args.variant, device=args.device,
                                 scale=args.scale, max_num_seqs=args.max_num_seqs,
                                 num_gpu_blocks=args.num_gpu_blocks, seed=args.seed,
                                 max_audios_per_step=n_audios,
                                 process_mode="inproc")  # reads the runner's and registry's counters
    prompts = _prompts(args)
    params = SamplingParams(max_tokens=args.max_tokens, temperature=0.0, ignore_eos=True)
    engine.generate(prompts[:args.warmup_requests], params)  # untimed warm-up
    runner, sched = engine.model_runner, engine.scheduler
    reg.reset_stats()
    runner.step_timings.clear()
    split = {"schedule": 0.0, "update": 0.0}
    step_s, outputs = [], []
    t0 = time.perf_counter()
    for p in prompts:
        engine.add_request(None, p, params)
    while sched.has_unfinished_requests():
        ts = time.perf_counter()
        so = sched.schedule()
        tm = time.perf_counter()
        ro = runner.execute_model(so)
        tu = time.perf_counter()
        outputs += sched.update_from_output(so, ro)
        te = time.perf_counter()
        split["schedule"] += tm - ts
        split["update"] += te - tu
        step_s.append(te - ts)
    wall = time.perf_counter() - t0
    n_tok = sum(len(o.output_token_ids) for o in outputs)
    split.update({k: float(v) for k, v in runner.step_timings.items()})
    return {"engine": "refimpl", "variant": args.variant, "device": engine.vllm_config.device,
            "num_requests": len(outputs), "num_output_tokens": n_tok, "wall_s": wall,
            "requests_per_s": len(outputs) / wall, "output_tokens_per_s": n_tok / wall,
            "registry_calls": reg.stats.encdec_calls, "registry_s_total": reg.stats.encdec_s,
            "steps": len(step_s), "step_time_ms_median": 1e3 * median(step_s),
            "step_split_s": split, "max_tokens": args.max_tokens,
            "max_num_seqs": args.max_num_seqs, "max_audios_per_step": n_audios,
            "num_gpu_blocks": sched.kv_cache_manager.block_pool.num_gpu_blocks,
            "num_preemptions": sum(getattr(o, "num_preemptions", 0) for o in outputs)}


def run_hf(args: argparse.Namespace) -> dict:
    """The same requests through transformers' generate() in static batches of max_num_seqs."""
    import torch

    from refimpl.config import ModelConfig
    from refimpl.multimodal import MULTIMODAL_REGISTRY as reg
    from refimpl.tokenizer import whisper_decoder_prompt
    from refimpl.worker.hf_reference import hf_greedy_generate
    from refimpl.worker.model_loader import get_model
    mc = ModelConfig(args.model, device=args.device, scale=args.scale, seed=args.seed)
    model = get_model(mc)
    proc = reg.create_processor(mc, disable_cache=True)
    prompts, dec = _prompts(args), whisper_decoder_prompt(args.model)

    def run(batch):
        feats = torch.stack([_features(proc, p) for p in batch]).to(model.device, model.dtype)
        return hf_greedy_generate(model, feats, dec, args.max_tokens)

    run(prompts[:args.warmup_requests])
    t0, n_tok, step_s = time.perf_counter(), 0, []
    for i in range(0, len(prompts), args.max_num_seqs):
        tb = time.perf_counter()
        n_tok += sum(len(t) for t in run(prompts[i:i + args.max_num_seqs]))
        step_s.append(time.perf_counter() - tb)
    wall = time.perf_counter() - t0
    return {"engine": "hf", "variant": "hf-generate", "device": mc.device,
            "num_requests": len(prompts), "num_output_tokens": n_tok, "wall_s": wall,
            "requests_per_s": len(prompts) / wall, "output_tokens_per_s": n_tok / wall,
            "registry_calls": 0, "registry_s_total": 0.0, "steps": len(step_s),
            "batch_time_ms_median": 1e3 * median(step_s),
            "max_tokens": args.max_tokens, "max_num_seqs": args.max_num_seqs}


def _features(proc, prompt):
    return proc.apply("", {"audio": [prompt["multi_modal_data"]["audio"]]}).mm_kwargs["audio"][0]["input_features"]


def run_once(args: argparse.Namespace) -> dict:
    """One measured run in this process (engine or HF baseline), pinned to one thread on CPU."""
    threads = set_single_thread()
    return {**(run_hf(args) if args.engine == "hf" else run_engine(args)), "torch_num_threads": threads}


def worker_argv(args: argparse.Namespace) -> list[str]:
    argv = ["--model", args.model, "--engine", args.engine, "--device", args.device,
            "--num-requests", str(args.num_requests), "--max-tokens", str(args.max_tokens),
            "--max-num-seqs", str(args.max_num_seqs), "--scale", args.scale,
            "--warmup-requests", str(args.warmup_requests), "--seed", str(args.seed),
            "--max-audios-per-step", str(args.max_audios_per_step)]
    return argv + (["--num-gpu-blocks", str(args.num_gpu_blocks)] if args.num_gpu_blocks else [])


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    variants = ["hf-generate"] if args.engine == "hf" else parse_variants(
        args.variant, tuple(ENCODER_LEN_VARIANTS))
    if args.worker:
        write_json(args.output_json, run_once(args))
        return 0
    meta = {"model": args.model, "engine": args.engine, "num_requests": args.num_requests,
            "max_tokens": args.max_tokens, "max_num_seqs": args.max_num_seqs}
    res = drive("refimpl.bench.throughput", args, worker_argv(args), variants,
                lambda r: r["requests_per_s"], "median_requests_per_s", meta, run_once)
    for v, r in (res.get("by_variant") or {res["variant"]: res}).items():
        print(f"throughput {args.model} {v}: median {r['median_requests_per_s']:.2f} req/s, "
              f"{args.num_requests} requests x {args.max_tokens} tokens, batch {args.max_num_seqs}, "
              f"on {res['device']} ({res['hardware']['name']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
