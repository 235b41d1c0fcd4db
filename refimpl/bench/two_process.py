"""Start-up and transport figures of the two-process engine (front end P0, engine core P1).

Used by ``refimpl bench startup --process-mode mp``. One call starts the engine core in a
child process (vLLM 0.9.0's ``SyncMPClient`` / ``EngineCoreProc``, refimpl/engine/), lets
the front end run ``reset_mm_cache`` as vLLM's ``LLMEngine.__init__`` does, records both
processes' processing-cache bytes and RSS before and after that reset, and, for a model the
kit serves (Whisper), what one request costs on the wire with and without a mirror hit.
"""
from __future__ import annotations

import time


def _transport_probe(frontend, model_config) -> dict:
    """Send one real-speech request twice (a mirror miss, then a hit) and abort both.

    Returns ``bytes_miss`` / ``bytes_hit`` (bytes of the ADD message), ``encode_s_miss`` /
    ``encode_s_hit`` (s to serialise it in P0) and ``decode_s`` (s P1 spent deserialising both).
    """
    from refimpl.audio import load_speech_clips
    from refimpl.multimodal import MULTIMODAL_REGISTRY
    from refimpl.request import Request
    from refimpl.sampling_params import SamplingParams
    from refimpl.tokenizer import whisper_decoder_prompt
    processor = MULTIMODAL_REGISTRY.create_processor(model_config)
    _, audio = load_speech_clips()[0]
    mm = processor.apply("", {"audio": [(audio, 16000)]}, return_mm_hashes=True)
    stats, out = frontend.client.stats, {}
    decode0 = frontend.client.call_utility("decode_s")
    for rid in ("probe-miss", "probe-hit"):
        enc0 = stats.encode_s
        frontend.add_request(Request(
            request_id=rid, prompt_token_ids=whisper_decoder_prompt(model_config.model),
            mm_inputs=mm.mm_kwargs["audio"], mm_hashes=mm.mm_hashes["audio"],
            sampling_params=SamplingParams(max_tokens=1), arrival_time=time.time()))
        key = rid.split("-")[1]
        out[f"bytes_{key}"] = stats.per_request[rid][0]
        out[f"encode_s_{key}"] = stats.encode_s - enc0
    frontend.abort_requests(["probe-miss", "probe-hit"])
    out["decode_s"] = frontend.client.call_utility("decode_s") - decode0
    return out


def two_process_record(vllm_config, variant: str, reset_scope: str):
    """Start up in two processes; returns (P1's StartupReport, record fields).

    Record: ``process_mode`` "mp", ``reset_scope``, ``startup_wall_s`` (s from spawning the
    child to its READY), ``spawn_overhead_s`` (that minus the child's timed phases: process
    start, imports, transport), the ``p0_*`` / ``p1_*`` cache-bytes and RSS fields before / after the reset
    (bytes), ``p1_pid``, ``p1_registry_stats`` (the child's ProcessingStats), and ``transport``: start-up bytes received, and for Whisper the probe
    of ``_transport_probe``. The child is shut down before returning.
    """
    from refimpl.engine.frontend import MPFrontend
    t0 = time.perf_counter()
    frontend = MPFrontend(vllm_config, variant, reset_scope)
    try:
        rep = frontend.report
        wall = time.perf_counter() - t0 - rep.phases.get("reset_mm_cache_p0", 0.0)
        p1_s = sum(v for k, v in rep.phases.items() if k != "reset_mm_cache_p0")
        transport = {"startup_bytes_received": frontend.client.stats.bytes_received,
                     "startup_decode_s": frontend.client.stats.decode_s}
        if vllm_config.model_config.is_encoder_decoder:
            transport |= _transport_probe(frontend, vllm_config.model_config)
        record = {"p1_registry_stats": frontend.client.call_utility("registry_stats"),
                  "process_mode": "mp", "reset_scope": reset_scope, "startup_wall_s": wall,
                  "spawn_overhead_s": wall - p1_s,
                  "p1_pid": frontend.pid, **frontend.startup_memory, "transport": transport}
    finally:
        frontend.shutdown()
    return rep, record
