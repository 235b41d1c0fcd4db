"""Ops and host syncs per engine step (decode, mixed, prefill) against HF generate() per generated
token, counted with a TorchDispatchMode (deterministic; no timing). Issue 42.

    PYTHONPATH=. .venv/bin/python scripts/engine_step_ops.py --model whisper-large-v3 --num-requests 16

Prints one JSON object (refimpl.lab.bench.step_ops.op_budget, without the per-step list).
"""
from __future__ import annotations

import argparse
import json

from refimpl.lab.bench.common import set_single_thread
from refimpl.lab.bench.step_ops import op_budget


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="whisper-tiny.en")
    p.add_argument("--num-requests", type=int, default=16)
    p.add_argument("--max-tokens", type=int, default=24)
    p.add_argument("--cross-attention-read", default="dense-once", choices=("dense-once", "paged-runs"))
    args = p.parse_args()
    set_single_thread()
    print(json.dumps(op_budget(args.model, args.num_requests, args.max_tokens,
                               cross_attention_read=args.cross_attention_read), indent=1))


if __name__ == "__main__":
    main()
