"""Paired design: each variant's gain over the previous one, with a bootstrap 95% interval.

    refimpl bench paired --model whisper-tiny.en \
        --variant registry,runner-config,scheduler-config --rounds 30 \
        --block-requests 8 --max-tokens 16 --output-json paired.json
    refimpl bench paired --model whisper-tiny.en --variant runner-config,scheduler-config \
        --budget-s 600 --output-json paired.json      # fixed-time design: rounds that fit 600 s

On a shared, noisy machine, fresh-process medians scatter more than the ~3% effect of
PRs #24866 / #24989 (the throughput bench keeps them as the unpaired check). Here the
variants' engines live in one process with the same weights and serve identical request
blocks (same audios, same decoder prompt) in alternating order, A B B A ..., so slow phases of
the machine hit every variant alike. Per block: wall seconds (perf_counter) and CPU seconds of
this process (process_time; torch on one thread), and the seconds spent inside the registry's
``get_encdec_max_encoder_len``. Gain of variant k over k-1 in round r: t(k-1) / t(k) - 1;
its median over rounds with a paired bootstrap interval (``refimpl.stats.paired``).

Design (written in the JSON's params): ``--rounds R`` (fixed rounds) or ``--budget-s B``
(fixed time: as many whole rounds as fit in B seconds of timed rounds, the next round started
only while the mean round so far still fits). Before the timed rounds every variant serves
``--warmup-rounds`` untimed blocks. Each block starts after ``gc.collect()`` with the garbage
collector off until it ends (``--gc collect-disable``), so no collection lands inside one
variant's block only. Gains are reported for two pairings of the same blocks: ``round`` (one
pair per round) and ``abba`` (one pair per two rounds, A B B A, each side summed: a linear
drift of the machine's speed within the four blocks cancels).

Cost model: what a fix removes is the registry time, so its predicted gain is
(registry s per block of k-1 minus that of k) / (block s of k). Requests decode greedily and
stop at EOS (``--ignore-eos`` makes every request decode ``--max-tokens``); the ProcessingCache
is off so every block processes its audio afresh, as new requests do.
"""
from __future__ import annotations

import argparse
import gc
import time

import numpy as np

from refimpl.bench.common import cli_command, cli_defaults, set_single_thread
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


def serve_block(engine, audios: list, params, gc_mode: str = "collect-disable") -> dict:
    """Serve one block of requests to completion; wall / CPU / registry seconds, tokens.

    ``gc_mode`` "collect-disable": ``gc.collect()`` before the block, collector off during it
    (re-enabled after, also on error); "default": the collector as Python runs it."""
    from refimpl.multimodal import MULTIMODAL_REGISTRY as reg
    if gc_mode == "collect-disable":
        gc.collect()
        gc.disable()
    try:
        return _timed_block(engine, audios, params, reg)
    finally:
        if gc_mode == "collect-disable":
            gc.enable()


def _timed_block(engine, audios: list, params, reg) -> dict:
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
               max_s: float = float("inf"), budget_s: float | None = None,
               gc_mode: str = "collect-disable") -> dict:
    """Up to ``rounds`` rounds of one block per variant in alternating order; per-variant lists.
    Stops after the round during which ``max_s`` wall seconds have passed. ``budget_s``
    (fixed-time design): a round starts only if the elapsed seconds plus the mean round so
    far stay within ``budget_s``, so the timed rounds end inside the budget.

    Returns {variant: {"wall_s": [...], "cpu_s": [...], "registry_s": [...],
    "registry_calls": [...], "steps": [...]}} indexed by round, plus "tokens_identical" (every block of every
    variant produced the same tokens as the first block).
    """
    variants = list(engines)
    out: dict[str, dict[str, list]] = {
        v: {"wall_s": [], "cpu_s": [], "registry_s": [], "registry_calls": [], "steps": []} for v in variants}
    ref, identical, t0 = None, True, time.perf_counter()
    for rnd in range(rounds):
        elapsed = time.perf_counter() - t0
        if elapsed > max_s or (budget_s is not None and rnd and elapsed * (rnd + 1) / rnd > budget_s):
            break
        for v in block_order(variants, rnd):
            b = serve_block(engines[v], audios, params, gc_mode)
            ref = ref or b["tokens"]
            identical &= b["tokens"] == ref
            for k in out[v]:
                out[v][k].append(b[k])
        if progress:
            progress(rnd)
    return {"by_variant": out, "tokens_identical": identical, "benchmark_s": time.perf_counter() - t0}


MIN_PAIRS = 5  # fewer pairs: the bootstrap interval is degenerate, never called resolved


def abba_sums(values: list[float]) -> list[float]:
    """Sums of consecutive round pairs (0+1, 2+3, ...): one value per A B B A quadruple; an
    odd last round is dropped."""
    return [values[i] + values[i + 1] for i in range(0, len(values) - 1, 2)]


def gains(by_variant: dict, metric: str = "cpu_s", against: str = "previous",
          pairing: str = "round") -> list[dict]:
    """Each variant's gain over the previous one (``against="first"``: over the first):
    paired ratio t(base)/t(this) per pair, minus 1, with its bootstrap 95% interval
    (``refimpl.stats.paired``), and the cost model's prediction (see module doc). A gain from
    fewer than ``MIN_PAIRS`` pairs is never ``resolved``. A pair is a
    round (``pairing="round"``) or two rounds, A B B A, each side summed (``"abba"``).
    Raises ValueError when a pairing has no complete pair."""
    from refimpl.stats import paired
    if pairing not in ("round", "abba"):
        raise ValueError(f"pairing must be 'round' or 'abba', got {pairing!r}")
    pick = abba_sums if pairing == "abba" else list
    variants, rows = list(by_variant), []
    bases = variants[:-1] if against == "previous" else [variants[0]] * (len(variants) - 1)
    for prev, cur in zip(bases, variants[1:]):
        a, b = by_variant[prev], by_variant[cur]
        iv = paired(pick(a[metric]), pick(b[metric]), kind="ratio")
        n = len(pick(a[metric]))
        # registry seconds are wall seconds: the model divides by wall seconds for both metrics
        model = (np.median(a["registry_s"]) - np.median(b["registry_s"])) / np.median(b["wall_s"])
        rows.append({"variant": cur, "over": prev, "metric": metric, "pairing": pairing,
                     "gain": iv.estimate - 1, "low": iv.low - 1, "high": iv.high - 1,
                     "half_width": (iv.high - iv.low) / 2, "resolved": iv.resolved and n >= MIN_PAIRS,
                     "cost_model_gain": float(model), "rounds": len(a[metric]),
                     "pairs": n})
    return rows


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="refimpl bench paired", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="whisper-tiny.en")
    p.add_argument("--variant", default="registry,runner-config,scheduler-config",
                   help=f"comma list in ladder order, of {', '.join(ENCODER_LEN_VARIANTS)}; "
                        "encoder-batch@N for N audios per step")
    p.add_argument("--rounds", type=int, default=None,
                   help="blocks per variant (A B B A ...); default 30, or no limit with --budget-s")
    p.add_argument("--budget-s", type=float, default=None,
                   help="fixed-time design: as many whole rounds as fit in this many seconds")
    p.add_argument("--against", default="previous", choices=("previous", "first"),
                   help="gain of each variant over the previous one, or over the first")
    p.add_argument("--block-requests", type=int, default=8)
    p.add_argument("--max-tokens", type=int, default=16)
    p.add_argument("--ignore-eos", action="store_true")
    p.add_argument("--max-num-seqs", type=int, default=8)
    p.add_argument("--max-audios-per-step", type=int, default=4, help="for encoder-batch")
    p.add_argument("--num-gpu-blocks", type=int, default=2000)
    p.add_argument("--warmup-rounds", type=int, default=1, help="untimed blocks per variant")
    p.add_argument("--gc", dest="gc_mode", default="collect-disable", choices=("collect-disable", "default"),
                   help="collect before each block and keep the collector off during it")
    p.add_argument("--max-benchmark-s", type=float, default=None,
                   help="stop starting rounds after this many seconds of timed rounds")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--output-json", default=None)
    return p


def run(args: argparse.Namespace, progress=None):
    """One paired measurement in this process (see module doc): engines, untimed warm-up
    rounds, timed rounds; returns the schema's Result (refimpl.bench.schema). ``args`` are
    ``build_parser()``'s (``defaults(**over)`` builds them in Python). Raises
    UnknownVariantError / ValueError for a bad variant label."""
    from refimpl.audio import make_request_audios
    from refimpl.sampling_params import SamplingParams
    threads = set_single_thread()
    variants = [v.strip() for v in args.variant.split(",") if v.strip()]
    for v in variants:
        parse_variant(v, args.max_audios_per_step)
    engines = build_engines(args.model, variants, max_num_seqs=args.max_num_seqs,
                            max_audios_per_step=args.max_audios_per_step,
                            num_gpu_blocks=args.num_gpu_blocks, device=args.device)
    audios = make_request_audios(args.block_requests, seed=args.seed)
    params = SamplingParams(max_tokens=args.max_tokens, ignore_eos=args.ignore_eos)
    run_paired(engines, audios, params, args.warmup_rounds, gc_mode=args.gc_mode)  # untimed
    rounds = args.rounds or (30 if args.budget_s is None else 1_000_000)
    res = run_paired(engines, audios, params, rounds, progress=progress,
                     max_s=args.max_benchmark_s or float("inf"), budget_s=args.budget_s, gc_mode=args.gc_mode)
    table = [r for pairing in ("round", "abba") if len(res["by_variant"][variants[0]]["cpu_s"]) >= (2 if pairing == "abba" else 1)
             for m in ("cpu_s", "wall_s") for r in gains(res["by_variant"], m, args.against, pairing)]
    return result_of(args, variants, res, table, threads)


def defaults(**over) -> argparse.Namespace:
    """The CLI's defaults with ``over`` replacing fields (``variant="a,b"``, ``budget_s=600``).
    Raises ValueError for a field the CLI does not have."""
    return cli_defaults(build_parser(), over)


def command(params: dict) -> str:
    """The CLI command that repeats a run with these ``params`` (a Result's params)."""
    return cli_command(build_parser(), {**params, "variant": ",".join(params["variants"])},
                       {"gc_mode": "--gc"})


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    t0 = time.perf_counter()
    out = run(args, progress=lambda r: print(f"round {r + 1} done, {time.perf_counter() - t0:.0f} s "
                                             "since start", flush=True))
    for r in out.comparisons:
        print(f"{r['metric']}, {r['pairing']} pairs: {r['variant']} over {r['over']}: {100 * r['gain']:+.2f}% "
              f"[{100 * r['low']:+.2f}, {100 * r['high']:+.2f}] (95% CI, {r['pairs']} pairs of "
              f"{r['rounds']} rounds); cost model {100 * r['cost_model_gain']:+.2f}%")
    print("tokens identical across variants and blocks:", out.params["tokens_identical"])
    if args.output_json:
        out.write(args.output_json)
    return 0


def result_of(args: argparse.Namespace, variants: list[str], res: dict, table: list[dict],
              threads: int):
    """The schema's Result (refimpl.bench.schema): per variant one run per round (its block's
    seconds, registry seconds and calls, steps), wall / CPU seconds summarized, and the gains
    with their intervals as ``comparisons``. ``params`` name the design: ``design``
    ("fixed-time" with ``budget_s``, or "fixed-rounds"), ``rounds_run``, ``benchmark_s``."""
    from refimpl.bench.schema import Result
    from refimpl.env import collect_env
    from refimpl.stats import summarize
    by = res["by_variant"]
    env = {**collect_env(), "device": args.device, "in_process": True, "torch_num_threads": threads}
    n = len(by[variants[0]]["wall_s"])
    params = {**{k: v for k, v in vars(args).items() if k not in ("output_json", "variant")},
              "variants": variants, "design": "fixed-time" if args.budget_s is not None else "fixed-rounds",
              "rounds_run": n, "benchmark_s": res["benchmark_s"], "tokens_identical": res["tokens_identical"]}
    out = {v: {"runs": [{"round": i, **{k: by[v][k][i] for k in by[v]}} for i in range(n)],
               "summary": {"wall_s": summarize(by[v]["wall_s"]), "cpu_s": summarize(by[v]["cpu_s"]),
                           "tokens_identical": res["tokens_identical"]}}
           for v in variants}
    return Result("paired", env, params, out, comparisons=table)
