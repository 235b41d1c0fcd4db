"""Shared driver of the benchmark modules: variants side by side, each repeat a fresh process.

Every ``refimpl bench X`` module has a ``--worker`` mode that measures ONE run in the current
process and writes its JSON; the parent (this driver) runs an untimed warm-up process per
variant, then the repeats interleaved (A B A B ...) each in a fresh process, and writes one
result JSON with the hardware and versions. Follows vLLM's ``benchmarks/`` conventions (one
module per question, ``--output-json``) and gpt-fast's habit of naming the hardware and sizes.
"""
from __future__ import annotations

import argparse
import sys
from typing import Callable

from tqdm import tqdm

from refimpl.bench.common import interleaved, run_in_fresh_process, write_json
from refimpl.env import collect_env
from refimpl.stats import summarize


def add_common_args(p: argparse.ArgumentParser, variants: tuple[str, ...], default: str) -> None:
    """Flags every bench shares: --variant (one or comma list), --repeats, --device, --output-json."""
    p.add_argument("--variant", default=default,
                   help=f"one of {', '.join(variants)}, or a comma list measured side by side")
    p.add_argument("--repeats", type=int, default=3, help="timed runs per variant, each a fresh process")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    p.add_argument("--no-warmup", action="store_true", help="skip the untimed warm-up process")
    p.add_argument("--timeout-s", type=float, default=1800.0, help="limit per fresh process (s)")
    p.add_argument("--output-json", required=True, help="where to write the result JSON")
    p.add_argument("--in-process", action="store_true",
                   help="run the repeats in this process (test/QUICK mode only: not fresh-process figures)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)


def parse_variants(arg: str, choices: tuple[str, ...]) -> list[str]:
    """Split a comma list; raises UnknownVariantError for a value not in ``choices``."""
    from refimpl.errors import UnknownVariantError
    out = [v.strip() for v in arg.split(",") if v.strip()]
    for v in out:
        if v not in choices:
            raise UnknownVariantError("variant", choices, f"unknown variant {v!r}")
    return out


def _progress(order: list[str], desc: str, label: Callable[[str], str]):
    """Yield ``order`` under a plain tqdm bar on stderr, one line per run: runs done of all,
    elapsed<left, and ``label(v)`` of the run now in progress (no throttling: runs take
    seconds). ``refimpl report`` forwards a notebook kernel's stderr to the terminal, so
    these lines show there too."""
    with tqdm(total=len(order), desc=desc, file=sys.stderr, mininterval=0, miniters=1) as bar:
        for i, v in enumerate(order):
            bar.set_postfix_str(label(v), refresh=i == 0)
            yield v
            nxt = order[i + 1] if i + 1 < len(order) else None
            bar.set_postfix_str(label(nxt) if nxt is not None else "done", refresh=False)
            bar.update(1)


def drive(module: str, args: argparse.Namespace, argv: list[str], variants: list[str],
          headline: Callable[[dict], float], headline_name: str, meta: dict,
          run_once: Callable[[argparse.Namespace], dict]) -> dict:
    """Run the warm-up and interleaved repeats of ``module`` for ``variants``; write the JSON.

    ``argv`` are the worker's flags without --variant/--output-json/--worker. ``headline``
    picks the figure (e.g. total_s) whose median goes to the top level as ``headline_name``.
    ``run_once(args)`` measures one run in this process (used with ``--in-process``).
    Returns the result dict (one variant: runs at top level; several: ``by_variant``).
    """
    def worker(variant: str) -> dict:
        if args.in_process:
            return run_once(argparse.Namespace(**{**vars(args), "variant": variant}))
        return run_in_fresh_process(module, argv + ["--variant", variant, "--worker"],
                                    timeout_s=args.timeout_s)

    runs: dict[str, list[dict]] = {v: [] for v in variants}
    name = module.rsplit(".", 1)[-1]
    try:
        if not args.no_warmup:
            for v in _progress(variants, f"{name} warm-up", lambda v: f"running {v} (untimed)"):
                worker(v)
        for v in _progress(interleaved(variants, args.repeats), name,
                           lambda v: f"running {v} repeat {len(runs[v]) + 1}/{args.repeats}"):
            runs[v].append(worker(v))
    except KeyboardInterrupt:
        print("interrupted: writing the runs finished so far", file=sys.stderr)
    env = collect_env()
    threads = [r["torch_num_threads"] for rs in runs.values() for r in rs if "torch_num_threads" in r]
    if threads:  # what the measured processes ran with, not this parent
        env["torch_num_threads"] = threads[0]
    env["in_process"] = bool(args.in_process)

    def one(v: str) -> dict:
        vals = [headline(r) for r in runs[v]]
        return {**meta, "variant": v, "runs": runs[v], headline_name: summarize(vals)["median"] if vals else None,
                "spread": summarize(vals) if vals else None}

    device = next((r.get("device") for rs in runs.values() for r in rs), args.device)
    if len(variants) == 1:
        result = {**one(variants[0]), "device": device, **env}
    else:
        result = {**meta, "variant": variants, "device": device, "order": "interleaved",
                  "by_variant": {v: one(v) for v in variants}, **env}
    write_json(args.output_json, result)
    return result
