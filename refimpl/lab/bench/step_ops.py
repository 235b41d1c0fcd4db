"""Ops and host syncs per serving step, against transformers' generate() per generated token.

Deterministic counts, no timings (issue 42): ``refimpl.testing.dispatch.DispatchCounter`` around
each ``LLMEngine.step()`` while the engine serves ``num_requests`` requests that all arrive at
once (greedy, ``ignore_eos``), each step classed by its SchedulerOutput; and around HF
``generate()`` on a batch of the same size at two lengths, whose difference is the ops of one
generation step of the batch (one token per sequence), encoder and set-up cancelled out.

    refimpl probe step-ops --model whisper-large-v3      (refimpl/lab/probes/engine.py: a Result)
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np
import torch

from refimpl.config import ModelConfig, get_config_dict
from refimpl.engine.llm_engine import LLMEngine
from refimpl.lab.bench.serve_loop import make_workload
from refimpl.lab.bench.telemetry import STEP_KINDS, step_kind
from refimpl.multimodal import MULTIMODAL_REGISTRY as REG
from refimpl.sampling_params import SamplingParams
from refimpl.testing.dispatch import DispatchCounter
from refimpl.tokenizer import whisper_decoder_prompt
from refimpl.worker.hf_reference import hf_greedy_generate
from refimpl.worker.model_loader import get_model

__all__ = ["STEP_KINDS", "step_kind", "engine_step_ops", "generate_ops_per_token", "op_budget"]


def _copies(runner) -> int:
    staging = getattr(runner, "staging", None)     # None: an engine before issue 42 (no staging buffer)
    return staging.num_copies if staging is not None else 0


def engine_step_ops(model: str = "whisper-tiny.en", num_requests: int = 16, max_tokens: int = 24, *,
                    engine: Optional[LLMEngine] = None, **engine_kw: Any) -> dict:
    """Serve ``num_requests`` requests (every one at 0 s, ``max_num_seqs`` = ``num_requests``) and
    count each step. Returns ``steps`` (kind, scheduled requests, ops, syncs, sync op names, SDPA calls,
    the runner's staged host-to-device copies), ``tokens``
    (each request's output ids, in the workload's order) and per
    kind the median and largest ``ops`` and the largest ``syncs``; ``decode_full``: decode steps with
    all ``num_requests`` requests scheduled. ``engine``: an in-process engine to use instead."""
    engine = engine or LLMEngine.from_args(model, device="cpu", max_num_seqs=num_requests, process_mode="inproc",
                                           disable_mm_preprocessor_cache=True, **engine_kw)
    sched, seen, runner = engine.scheduler, [], engine.model_runner.whisper_runner
    schedule = sched.schedule

    def recording_schedule():            # observes the step's plan; changes nothing
        so = schedule()
        seen.append(so)
        return so
    params = SamplingParams(max_tokens=max_tokens, ignore_eos=True)
    ids = [engine.add_request(None, {"multi_modal_data": {"audio": (w.audio, 16000)}}, params)
           for w in make_workload(num_requests, 0)]
    steps: list[dict[str, Any]] = []
    counter, done = DispatchCounter(), dict[str, list[int]]()
    sched.schedule = recording_schedule
    try:
        while engine.has_unfinished_requests():
            n_seen, copies = len(seen), _copies(runner)
            counter.reset()
            with counter:
                finished = engine.step()
            done.update({o.request_id: list(o.output_token_ids) for o in finished})
            kind = step_kind(seen[n_seen]) if len(seen) > n_seen else None
            if kind is not None:
                steps.append({"kind": kind, "num_reqs": len(seen[n_seen].num_scheduled_tokens),
                              "ops": counter.num_ops, "syncs": counter.num_syncs, "sync_ops": dict(counter.syncs),
                              "attention_calls": sum(n for k, n in counter.ops.items() if "scaled_dot_product" in k),
                              "staged_copies": _copies(runner) - copies})
    finally:
        del sched.schedule   # the class's method again
    out: dict[str, Any] = {"model": model, "num_requests": num_requests, "max_tokens": max_tokens, "steps": steps,
                           "tokens": [done[i] for i in ids]}
    groups = {k: [s for s in steps if s["kind"] == k] for k in STEP_KINDS}
    groups["decode_full"] = [s for s in groups["decode"] if s["num_reqs"] == num_requests]
    for k, ss in groups.items():
        out[k] = {"num_steps": len(ss), "ops_median": float(np.median([s["ops"] for s in ss])) if ss else None,
                  "ops_max": max((s["ops"] for s in ss), default=None),
                  "syncs_max": max((s["syncs"] for s in ss), default=None)}
    return out


def generate_ops_per_token(model: str = "whisper-tiny.en", batch_size: int = 16,
                           lengths: tuple[int, int] = (8, 24)) -> dict:
    """Ops of one generation step of HF ``generate()`` on ``batch_size`` audios (the first of
    ``make_workload(batch_size, 0)``, greedy, no EOS stop): (ops at ``lengths[1]`` new tokens - ops
    at ``lengths[0]``) / their difference; syncs likewise; ``tokens`` at ``lengths[1]``. The encoder runs
    once, uncounted, before both (its ops are the same at both lengths: they cancel in the difference)."""
    mc = ModelConfig(model, device="cpu")
    m, proc = get_model(mc), REG.create_processor(mc, disable_cache=True)
    items = [proc.apply("", {"audio": [(w.audio, 16000)]}).mm_kwargs["audio"][0]
             for w in make_workload(batch_size, 0)]
    feats = torch.stack([x["input_features"] for x in items]).to(m.dtype)
    dec, counts, tokens = whisper_decoder_prompt(model), [], []
    with torch.inference_mode():
        enc = m.get_encoder()(feats)
    for n in lengths:
        with DispatchCounter() as c:
            tokens = hf_greedy_generate(m, feats, dec, n, encoder_outputs=enc)
        counts.append((c.num_ops, c.num_syncs))
    d = lengths[1] - lengths[0]
    return {"model": model, "batch_size": batch_size, "lengths": list(lengths), "tokens": tokens,
            "ops_per_token": (counts[1][0] - counts[0][0]) / d, "syncs_per_token": (counts[1][1] - counts[0][1]) / d}


def _upto_eos(rows: list[list[int]], eos: int) -> list[list[int]]:
    return [r[:r.index(eos) + 1] if eos in r else r for r in rows]


def op_budget(model: str = "whisper-tiny.en", num_requests: int = 16, max_tokens: int = 24, *,
              keep_steps: bool = False, **engine_kw: Any) -> dict:
    """An engine decode step at full batch against one generate() step of the same batch:
    ``ratio`` = engine ops / generate() ops (the issue's budget: at most 1.5);
    ``tokens``: the engine's; ``tokens_identical``: they equal generate()'s request by request, up to
    and including the first EOS (past it, generate() without an EOS stop decodes near-ties that one
    float rounding can flip); ``steps``: the per-step records, with ``keep_steps``."""
    eos = get_config_dict(model)["eos_token_id"]
    eng = engine_step_ops(model, num_requests, max_tokens, **engine_kw)
    hf = generate_ops_per_token(model, num_requests, (max(1, max_tokens // 3), max_tokens))
    ops = eng["decode_full"]["ops_median"]
    return {"model": model, "num_requests": num_requests, "engine": {k: eng[k] for k in (*STEP_KINDS, "decode_full")},
            "generate": {k: v for k, v in hf.items() if k != "tokens"},
            "ratio": ops / hf["ops_per_token"] if ops else None, "tokens": eng["tokens"],
            "tokens_identical": _upto_eos(eng["tokens"], eos) == _upto_eos(hf["tokens"], eos),
            **({"steps": eng["steps"]} if keep_steps else {})}
