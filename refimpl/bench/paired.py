"""Paired design: each variant's gain over the previous one, with a bootstrap 95% interval.

    refimpl bench paired --model whisper-tiny.en \
        --variant 0.10.2,0.10.2+#24866,0.11.0 --rounds 30 \
        --block-requests 8 --max-tokens 16 --output-json paired.json
    refimpl bench paired --model whisper-tiny.en --variant 0.10.2+#24866,0.11.0 \
        --budget-s 600 --output-json paired.json      # fixed-time design: rounds that fit 600 s

On a shared, noisy machine, fresh-process medians scatter more than the ~3% effect of
PRs #24866 / #24989 (the throughput bench keeps them as the unpaired check). Here the
variants' engines live in one process with the same weights and serve identical request
blocks (same audios, same decoder prompt) in alternating order, A B B A ..., so slow phases of
the machine hit every variant alike. Per block: wall seconds (perf_counter) and CPU seconds of
this process (process_time; torch on one thread), and the seconds spent inside the registry's
``get_encdec_max_encoder_len``. Gain of variant k over k-1 in round r: t(k-1) / t(k) - 1;
its median over rounds with a paired bootstrap interval (``refimpl.stats.paired``).

Design (written in the JSON's params): ``--rounds R`` (fixed rounds) or ``--budget-s B``,
never both (ConfigError) (fixed time: as many whole rounds as fit in B seconds of timed rounds, the next round started
only while the mean round so far still fits). Before the timed rounds every variant serves
``--warmup-rounds`` untimed blocks. Each block starts after ``gc.collect()`` with the garbage
collector off until it ends (``--gc collect-disable``), so no collection lands inside one
variant's block only. Gains are reported for two pairings of the same blocks: ``round`` (one
pair per round) and ``abba`` (one pair per two rounds, A B B A, each side summed: a linear
drift of the machine's speed within the four blocks cancels).

Cost model (refimpl/bench/gains.py): what a fix removes is the registry time, so its predicted
gain is (registry s per block of k-1 minus that of k) / (block s of k). Requests decode greedily and
stop at EOS (``--ignore-eos`` makes every request decode ``--max-tokens``); the ProcessingCache
is off so every block processes its audio afresh, as new requests do.

In Python: ``run(PairedSpec(variants=("0.10.2+#24866", "0.11.0"), budget_s=600))``;
``spec.command()`` is the command line above for that spec.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import ClassVar, Optional

from refimpl.bench.cli_spec import CliSpec, arg, check_max_tokens
from refimpl.bench.common import set_single_thread
from refimpl.bench.gains import MIN_PAIRS, abba_sums, gain_line, gains  # noqa: F401 (public here too)
from refimpl.bench.memory import check_request_memory, request_bytes
from refimpl.bench.serve import block_order, run_paired  # noqa: F401 (public here too)
from refimpl.bench.workload import MODELS
from refimpl.errors import ConfigError, UnknownVariantError
from refimpl.variants import ENCODER_LEN_VARIANTS, get_encoder_len_variant


def parse_variant(label: str, max_audios_per_step: int) -> tuple[str, int]:
    """'audios-per-step@4' -> ('audios-per-step', 4); a plain name -> (name, N or 1 for the
    variants without encoder batching). Raises UnknownVariantError or ConfigError (a
    ValueError) naming ``variants``."""
    name, _, n = label.partition("@")
    if name not in ENCODER_LEN_VARIANTS:
        raise UnknownVariantError("variants", tuple(ENCODER_LEN_VARIANTS), f"unknown variant {label!r}")
    batch = get_encoder_len_variant(name).encoder_batch
    if n and not (batch and n.isdigit() and int(n) >= 1):
        raise ConfigError("variants", "audios-per-step@N with N >= 1 (only audios-per-step takes @N)",
                          f"got {label!r}")
    return name, (int(n) if n else max_audios_per_step) if batch else 1


def build_engines(model: str, variants: list[str], *, max_num_seqs: int, max_audios_per_step: int,
                  num_gpu_blocks: int, device: str = "cpu") -> dict:
    """One in-process LLMEngine per variant label (same model and weights), ProcessingCache
    off. A label is a variant name, or ``audios-per-step@N`` for N audios per step."""
    from refimpl.engine.llm_engine import LLMEngine
    engines = {}
    for label in variants:
        v, n = parse_variant(label, max_audios_per_step)
        engines[label] = LLMEngine.from_args(model, encoder_len_variant=v, device=device,
                                         max_num_seqs=max_num_seqs, num_gpu_blocks=num_gpu_blocks,
                                         max_audios_per_step=n, process_mode="inproc",
                                         disable_mm_preprocessor_cache=True)
    return engines


@dataclass(frozen=True, kw_only=True)
class PairedSpec(CliSpec):
    """``refimpl bench paired``: one field per flag (see module doc). ``rounds`` None: 30, or
    no limit with ``budget_s``. Raises ConfigError (field ``rounds``) when both ``rounds`` and
    ``budget_s`` are given: a run is either fixed-rounds or fixed-time."""
    prog: ClassVar[str] = "refimpl bench paired"
    model: str = arg("whisper-tiny.en", choices=MODELS)
    variants: tuple[str, ...] = arg(
        ("0.10.2", "0.10.2+#24866", "0.11.0"), flag="--variant",
        help=f"comma list in ladder order, of {', '.join(ENCODER_LEN_VARIANTS)}; "
             "audios-per-step@N for N audios per step")
    rounds: Optional[int] = arg(None, "fixed-rounds design: blocks per variant (A B B A ...); "
                                "default 30; not with --budget-s", min=1)
    budget_s: Optional[float] = arg(None, "fixed-time design: as many whole rounds as fit in this "
                                    "many seconds; not with --rounds", gt=0)
    against: str = arg("previous", "gain of each variant over the previous one, or over the first",
                       choices=("previous", "first"))
    block_requests: int = arg(8, "requests per block", min=1)
    max_tokens: int = arg(16, "cap per request; EOS stops earlier", min=1)
    ignore_eos: bool = arg(False, "decode --max-tokens tokens in every request")
    max_num_seqs: int = arg(8, min=1)
    max_audios_per_step: int = arg(4, "for audios-per-step", min=1)
    num_gpu_blocks: int = arg(2000, min=1)
    warmup_rounds: int = arg(1, "untimed blocks per variant", min=0)
    gc_mode: str = arg("collect-disable", "collect before each block and keep the collector off "
                       "during it", flag="--gc", choices=("collect-disable", "default"))
    max_benchmark_s: Optional[float] = arg(None, "stop starting rounds after this many seconds of "
                                           "timed rounds", gt=0)
    seed: int = arg(0, min=0)
    device: str = arg("cpu", choices=("cpu", "cuda"))

    def __post_init__(self):
        super().__post_init__()
        if self.rounds is not None and self.budget_s is not None:
            raise ConfigError("rounds", "left out with --budget-s (fixed-time design: the budget "
                              "decides the rounds)", f"got rounds {self.rounds} and budget_s {self.budget_s}")
        if len(self.variants) < 2 or len(set(self.variants)) != len(self.variants):
            raise ConfigError("variants", "two or more distinct labels", f"got {self.variants}")
        for v in self.variants:
            parse_variant(v, self.max_audios_per_step)
        check_max_tokens("max_tokens", self.max_tokens, self.model)


Spec = PairedSpec


def preflight(spec: PairedSpec, available: Optional[int] = None) -> None:
    """Refuse before anything runs (InsufficientMemoryError, field ``block_requests``, limit the
    available bytes: ``available``, default psutil's) when the block's audios and log-mel
    features plus, on the CPU, one engine per variant (``refimpl.memory.check_serving_memory``)
    exceed the memory available (refimpl.bench.memory.check_request_memory)."""
    from refimpl.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
    mc = ModelConfig(spec.model, device=spec.device)
    config = VllmConfig(mc, SchedulerConfig(max_num_seqs=spec.max_num_seqs),
                        CacheConfig(num_gpu_blocks=spec.num_gpu_blocks))
    check_request_memory(spec.block_requests, request_bytes(spec.model, spec.block_requests, True), True,
                         [config] * len(spec.variants) if mc.device == "cpu" else [], available,
                         field="block_requests")


def run(spec: PairedSpec, progress=None):
    """One paired measurement in this process (see module doc): engines, untimed warm-up
    rounds, timed rounds; returns the schema's Result (refimpl.bench.schema). ``progress``
    (optional) is called with the round index after each timed round. Raises
    InsufficientMemoryError before anything runs (:func:`preflight`). Ctrl-C while the engines
    are built or during the warm-up: a Result of 0 rounds, ``params["interrupted"]`` True. Any
    other exception propagates with the Result of the whole rounds before it as
    ``e.partial_result`` (``orchestrate.partial_result(e)``), ``params["failed"]`` naming
    where ("building the engines", "warm-up" or "round <r>") and the error."""
    from refimpl.audio import make_request_audios
    from refimpl.sampling_params import SamplingParams
    preflight(spec)
    threads = set_single_thread()
    variants = list(spec.variants)
    none = run_paired(dict.fromkeys(variants), [], None, 0)  # no round: the Result of an early stop
    now = "building the engines"
    try:
        engines = build_engines(spec.model, variants, max_num_seqs=spec.max_num_seqs,
                                max_audios_per_step=spec.max_audios_per_step,
                                num_gpu_blocks=spec.num_gpu_blocks, device=spec.device)
        audios = make_request_audios(spec.block_requests, seed=spec.seed)
        params = SamplingParams(max_tokens=spec.max_tokens, ignore_eos=spec.ignore_eos)
        now = "warm-up"
        warm = run_paired(engines, audios, params, spec.warmup_rounds, gc_mode=spec.gc_mode)  # untimed
    except KeyboardInterrupt:  # while building: no round, as after an interrupted warm-up
        print("interrupted: keeping the rounds finished so far (none)", file=sys.stderr)
        return result_of(spec, {**none, "interrupted": True}, [], threads)
    except Exception as e:
        e.partial_result = result_of(  # type: ignore[attr-defined]
            spec, {**none, "failed": f"{now}: {type(e).__name__}: {e}"}, [], threads)
        raise
    rounds = 0 if warm["interrupted"] else spec.rounds or (30 if spec.budget_s is None else 1_000_000)
    failed: Optional[Exception] = None
    try:
        res = run_paired(engines, audios, params, rounds, progress=progress,
                         max_s=spec.max_benchmark_s or float("inf"), budget_s=spec.budget_s,
                         gc_mode=spec.gc_mode)
    except Exception as e:
        res, failed = e.paired_rounds, e  # type: ignore[attr-defined]
    res["interrupted"] |= warm["interrupted"]
    n = len(res["by_variant"][variants[0]]["cpu_s"])
    table = [r for pairing in ("round", "abba") if n >= (2 if pairing == "abba" else 1)
             for m in ("cpu_s", "wall_s") for r in gains(res["by_variant"], m, spec.against, pairing)]
    if failed is not None:
        failed.partial_result = result_of(spec, res, table, threads)  # type: ignore[attr-defined]
        raise failed
    return result_of(spec, res, table, threads)


def main(argv: list[str] | None = None) -> int:
    """``refimpl bench paired``; exit status as the other benches (orchestrate.cli_main): 0;
    130 after Ctrl-C; when a block fails, the whole rounds before it are written
    (``params["failed"]``) and the status is 2 for a refimpl error, else 1."""
    from refimpl.bench.orchestrate import failed_run_status
    spec, output_json = PairedSpec.from_argv(argv)
    t0 = time.perf_counter()
    try:
        out = run(spec, progress=lambda r: print(f"round {r + 1} done, {time.perf_counter() - t0:.0f} s "
                                                 "since start", flush=True))
    except Exception as e:
        return failed_run_status(e, spec.prog, output_json, kept="rounds")
    for r in out.comparisons:
        print(gain_line(r))
    print("tokens identical across variants and blocks:", out.params["tokens_identical"])
    if output_json:
        out.write(output_json)
    return 130 if out.params["interrupted"] else 0  # as the fresh-process benches after Ctrl-C


def result_of(spec: PairedSpec, res: dict, table: list[dict], threads: int):
    """The schema's Result (refimpl.bench.schema): per variant one run per round (its block's
    seconds, registry seconds and calls, steps), wall / CPU seconds summarized, and the gains
    with their intervals as ``comparisons``. ``params``: the spec's fields and the design:
    ``design`` ("fixed-time" with ``budget_s``, or "fixed-rounds"), ``rounds_run``,
    ``benchmark_s``, ``tokens_identical``, ``interrupted`` (SIGINT ended it: the whole rounds
    before it are kept; none when it came during the warm-up), ``failed`` (None, or
    "[warm-up ]round <r>: <error type>: <message>" of the block that raised)."""
    from refimpl.bench.schema import Result
    from refimpl.env import collect_env
    from refimpl.stats import summarize
    by, variants = res["by_variant"], list(spec.variants)
    env = {**collect_env(), "device": spec.device, "in_process": True, "torch_num_threads": threads}
    n = len(by[variants[0]]["wall_s"])
    params = {**spec.params(), "design": "fixed-time" if spec.budget_s is not None else "fixed-rounds",
              "rounds_run": n, "benchmark_s": res["benchmark_s"], "tokens_identical": res["tokens_identical"],
              "interrupted": res["interrupted"], "failed": res.get("failed")}
    out = {v: {"runs": [{"round": i, **{k: by[v][k][i] for k in by[v]}} for i in range(n)],
               "summary": {"wall_s": summarize(by[v]["wall_s"]), "cpu_s": summarize(by[v]["cpu_s"]),
                           "tokens_identical": res["tokens_identical"]} if n else {}}
           for v in variants}
    return Result("paired", env, params, out, comparisons=table, missing=[] if n else ["runs"])
