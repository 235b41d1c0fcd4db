"""The engine and transformers' generate() serving the same requests in one process, in the order
given: the body of ``refimpl probe engine-vs-generate``. Only the standard library at the top, so that
``python <this file> JSON`` runs it against another source tree (PYTHONPATH=<tree>: the engine, the
serving helpers and the model loader come from that tree; it prints one JSON list)."""
from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

__all__ = ["serve_in_order"]


def serve_in_order(model: str, num_requests: int, max_num_seqs: int, max_tokens: int, warmup_requests: int,
                   order: str) -> list[dict[str, Any]]:
    """One record per letter of ``order`` (E: the engine, encoder-length row 0.11.0; H: generate() in
    static batches of ``max_num_seqs``), after one untimed serving of ``warmup_requests`` by each: ``tag``,
    ``cpu_s`` (user + system), ``wall_s``, ``requests_per_s``, ``num_output_tokens``, TTFT / E2E p50 and
    p90 (s); the engine's ``steps`` and its EngineCore.step() split (``step_split``, s). Torch on one thread."""
    from refimpl.config import ModelConfig
    from refimpl.engine.core import StepTimings
    from refimpl.engine.llm_engine import LLMEngine
    from refimpl.lab.bench import serve as W
    from refimpl.lab.bench.common import set_single_thread
    from refimpl.multimodal import MULTIMODAL_REGISTRY
    from refimpl.sampling_params import SamplingParams
    from refimpl.tokenizer import whisper_decoder_prompt
    from refimpl.worker.model_loader import get_model
    set_single_thread()
    work = W.make_workload(num_requests, 0)
    engine = LLMEngine.from_args(model, encoder_len_variant="0.11.0", device="cpu", max_num_seqs=max_num_seqs,
                                 process_mode="inproc", disable_mm_preprocessor_cache=True)
    mc = ModelConfig(model, device="cpu")
    hf, proc = get_model(mc), MULTIMODAL_REGISTRY.create_processor(mc, disable_cache=True)
    dec, params = whisper_decoder_prompt(model), SamplingParams(max_tokens=max_tokens)
    if warmup_requests:
        warm = W.make_workload(warmup_requests, 1000)
        W.serve_engine(engine, warm, params)
        W.serve_hf(hf, proc, dec, warm, max_tokens, max_num_seqs)
    out = []
    for tag in order:
        c0, extra = time.process_time(), {}
        if tag == "E":
            engine.engine_core.step_timings.clear()
            r = W.serve_engine(engine, work, params)
            steps = list(engine.engine_core.step_timings)
            extra = {"steps": r["steps"], "step_split": {k: sum(getattr(t, k) for t in steps) for k in StepTimings.PARTS}}
        else:
            r = W.serve_hf(hf, proc, dec, work, max_tokens, max_num_seqs)
        cpu = time.process_time() - c0
        out.append({"tag": tag, "cpu_s": cpu, **{k: r[k] for k in (
            "wall_s", "requests_per_s", "num_output_tokens", "ttft_s_p50", "ttft_s_p90", "e2e_s_p50", "e2e_s_p90")},
            **extra})
    return out


if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]  # not this folder's modules
    print(json.dumps(serve_in_order(**json.loads(sys.argv[1]))))
