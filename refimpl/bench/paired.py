"""Paired design: each variant's gain over the previous one, with a bootstrap 95% interval.

    refimpl bench paired --model whisper-tiny.en \
        --variant registry,runner-config,scheduler-config --rounds 30 \
        --block-requests 8 --max-tokens 16 --output-json paired.json

On a shared, noisy machine, fresh-process medians scatter more than the ~3% effect of
PRs #24866 / #24989 (the throughput bench keeps them as the unpaired check). Here the
variants' engines live in one process with the same weights and serve identical request
blocks (same audios, same decoder prompt) in alternating order, A B B A ..., so slow phases of
the machine hit every variant alike. Per block: wall seconds (perf_counter) and CPU seconds of
this process (process_time; torch on one thread), and the seconds spent inside the registry's
``get_encdec_max_encoder_len``. Gain of variant k over k-1 in round r: t(k-1) / t(k) - 1;
its median over rounds with a paired bootstrap interval (``refimpl.stats.paired``).

Cost model: what a fix removes is the registry time, so its predicted gain is
(registry s per block of k-1 minus that of k) / (block s of k). Requests decode greedily and
stop at EOS (``--ignore-eos`` makes every request decode ``--max-tokens``); the ProcessingCache
is off so every block processes its audio afresh, as new requests do.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from refimpl.bench.common import set_single_thread
from refimpl.variants import ENCODER_LEN_VARIANTS, get_encoder_len_variant


def block_order(variants: list[str], rnd: int) -> list[str]:
    """Round ``rnd``'s order: forward on even rounds, reversed on odd (A B, B A, A B, ...)."""
    return list(variants) if rnd % 2 == 0 else list(reversed(variants))


def parse_variant(label: str, max_audios_per_step: int) -> tuple[str, int]:
    """'encoder-batch@4' -> ('encoder-batch', 4); a plain name -> (name, N or 1 for the
    variants without encoder batching). Raises UnknownVariantError / ValueError."""
    name, _, n = label.partition("@")
    batch = get_encoder_len_variant(name).encoder_batch
    if n and not batch:
        raise ValueError(f"{label!r}: only encoder-batch takes @N")
    return name, (int(n) if n else max_audios_per_step) if batch else 1


def build_engines(model: str, variants: list[str], *, max_num_seqs: int, max_audios_per_step: int,
                  num_gpu_blocks: int, device: str = "cpu") -> dict:
    """One in-process LLMEngine per variant label (same model and weights), ProcessingCache
    off. A label is a variant name, or ``encoder-batch@N`` for N audios per step."""
    from refimpl.engine.llm_engine import LLMEngine
    engines = {}
    for label in variants:
        v, n = parse_variant(label, max_audios_per_step)
        engines[label] = LLMEngine.from_args(model, encoder_len_variant=v, device=device,
                                         max_num_seqs=max_num_seqs, num_gpu_blocks=num_gpu_blocks,
                                         max_audios_per_step=n, process_mode="inproc",
                                         disable_mm_preprocessor_cache=True)
    return engines


def serve_block(engine, audios: list, params) -> dict:
    """Serve one block of requests to completion; wall / CPU / registry seconds, tokens."""
    from refimpl.multimodal import MULTIMODAL_REGISTRY as reg
    reg.reset_stats()
    w0, c0 = time.perf_counter(), time.process_time()
    ids = [engine.add_request(None, {"multi_modal_data": {"audio": (a, 16000)}}, params) for a in audios]
    done, steps = {}, 0
    while engine.has_unfinished_requests():
        steps += 1
        for o in engine.step():
            done[o.request_id] = o
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    return {"wall_s": wall, "cpu_s": cpu, "registry_s": reg.stats.encdec_s,
            "registry_calls": reg.stats.encdec_calls, "steps": steps,
            "tokens": [list(done[i].output_token_ids) for i in ids]}


def run_paired(engines: dict, audios: list, params, rounds: int, progress=None,
               max_s: float = float("inf")) -> dict:
    """``rounds`` rounds of one block per variant in alternating order; per-variant lists.
    Stops after the round during which ``max_s`` wall seconds have passed (a time budget).

    Returns {variant: {"wall_s": [...], "cpu_s": [...], "registry_s": [...],
    "registry_calls": [...], "steps": [...]}} indexed by round, plus "tokens_identical" (every block of every
    variant produced the same tokens as the first block).
    """
    variants = list(engines)
    out: dict[str, dict[str, list]] = {
        v: {"wall_s": [], "cpu_s": [], "registry_s": [], "registry_calls": [], "steps": []} for v in variants}
    ref, identical, t0 = None, True, time.perf_counter()
    for rnd in range(rounds):
        if time.perf_counter() - t0 > max_s:
            break
        for v in block_order(variants, rnd):
            b = serve_block(engines[v], audios, params)
            ref = ref or b["tokens"]
            identical &= b["tokens"] == ref
            for k in out[v]:
                out[v][k].append(b[k])
        if progress:
            progress(rnd)
    return {"by_variant": out, "tokens_identical": identical}


def gains(by_variant: dict, metric: str = "cpu_s", against: str = "previous") -> list[dict]:
    """Each variant's gain over the previous one (``against="first"``: over the first):
    paired ratio t(base)/t(this) per round, minus 1, with its bootstrap 95% interval, and the
    cost model's prediction (see module doc)."""
    from refimpl.stats import paired
    variants, rows = list(by_variant), []
    bases = variants[:-1] if against == "previous" else [variants[0]] * (len(variants) - 1)
    for prev, cur in zip(bases, variants[1:]):
        a, b = by_variant[prev], by_variant[cur]
        iv = paired(a[metric], b[metric], kind="ratio")
        # registry seconds are wall seconds: the model divides by wall seconds for both metrics
        model = (np.median(a["registry_s"]) - np.median(b["registry_s"])) / np.median(b["wall_s"])
        rows.append({"variant": cur, "over": prev, "metric": metric,
                     "gain": iv.estimate - 1, "low": iv.low - 1, "high": iv.high - 1,
                     "half_width": (iv.high - iv.low) / 2, "resolved": iv.resolved,
                     "cost_model_gain": float(model), "rounds": len(a[metric])})
    return rows


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="refimpl bench paired", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="whisper-tiny.en")
    p.add_argument("--variant", default="registry,runner-config,scheduler-config",
                   help=f"comma list in ladder order, of {', '.join(ENCODER_LEN_VARIANTS)}; "
                        "encoder-batch@N for N audios per step")
    p.add_argument("--rounds", type=int, default=30, help="blocks per variant (A B B A ...)")
    p.add_argument("--against", default="previous", choices=("previous", "first"),
                   help="gain of each variant over the previous one, or over the first")
    p.add_argument("--block-requests", type=int, default=8)
    p.add_argument("--max-tokens", type=int, default=16)
    p.add_argument("--ignore-eos", action="store_true")
    p.add_argument("--max-num-seqs", type=int, default=8)
    p.add_argument("--max-audios-per-step", type=int, default=4, help="for encoder-batch")
    p.add_argument("--num-gpu-blocks", type=int, default=2000)
    p.add_argument("--warmup-rounds", type=int, default=1)
    p.add_argument("--max-benchmark-s", type=float, default=float("inf"),
                   help="stop starting rounds after this many seconds of timed rounds")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--output-json", default=None)
    return p


def main(argv: list[str] | None = None) -> int:
    from refimpl.audio import make_request_audios
    from refimpl.sampling_params import SamplingParams
    args = build_parser().parse_args(argv)
    threads = set_single_thread()
    variants = [v.strip() for v in args.variant.split(",") if v.strip()]
    for v in variants:
        parse_variant(v, args.max_audios_per_step)
    engines = build_engines(args.model, variants, max_num_seqs=args.max_num_seqs,
                            max_audios_per_step=args.max_audios_per_step,
                            num_gpu_blocks=args.num_gpu_blocks, device=args.device)
    audios = make_request_audios(args.block_requests, seed=args.seed)
    params = SamplingParams(max_tokens=args.max_tokens, ignore_eos=args.ignore_eos)
    run_paired(engines, audios, params, args.warmup_rounds)  # untimed
    t0 = time.perf_counter()
    res = run_paired(engines, audios, params, args.rounds,
                     progress=lambda r: print(f"round {r + 1}/{args.rounds} "
                                              f"({time.perf_counter() - t0:.0f} s)", flush=True),
                     max_s=args.max_benchmark_s)
    table = {m: gains(res["by_variant"], m, args.against) for m in ("cpu_s", "wall_s")}
    for m, rows in table.items():
        for r in rows:
            print(f"{m}: {r['variant']} over {r['over']}: {100 * r['gain']:+.2f}% "
                  f"[{100 * r['low']:+.2f}, {100 * r['high']:+.2f}] (95% CI, {r['rounds']} pairs); "
                  f"cost model {100 * r['cost_model_gain']:+.2f}%")
    print("tokens identical across variants and blocks:", res["tokens_identical"])
    if args.output_json:
        result_of(args, variants, res, table, threads).write(args.output_json)
    return 0


def result_of(args: argparse.Namespace, variants: list[str], res: dict, table: dict,
              threads: int):
    """The schema's Result (refimpl.bench.schema): per variant one run per round (its block's
    seconds, registry seconds and calls, steps), wall / CPU seconds summarized, and the gains
    with their intervals as ``comparisons``."""
    from refimpl.bench.schema import Result
    from refimpl.env import collect_env
    from refimpl.stats import summarize
    by = res["by_variant"]
    env = {**collect_env(), "device": args.device, "in_process": True, "torch_num_threads": threads}
    params = {**{k: v for k, v in vars(args).items() if k not in ("output_json", "variant")},
              "variants": variants}
    out = {v: {"runs": [{"round": i, **{k: by[v][k][i] for k in by[v]}} for i in range(len(by[v]["wall_s"]))],
               "summary": {"wall_s": summarize(by[v]["wall_s"]), "cpu_s": summarize(by[v]["cpu_s"]),
                           "tokens_identical": res["tokens_identical"]}}
           for v in variants}
    return Result("paired", env, params, out, comparisons=[r for rows in table.values() for r in rows])
