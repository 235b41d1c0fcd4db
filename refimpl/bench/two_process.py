"""Start-up and transport figures of the two-process engine (front end P0, engine core P1).

Used by ``refimpl bench startup --process-mode mp``. One call starts the engine core in a
child process (vLLM 0.9.0's ``SyncMPClient`` / ``EngineCoreProc``, refimpl/engine/), lets
the front end run ``reset_mm_cache`` as vLLM's ``LLMEngine.__init__`` does, records both
processes' processing-cache bytes and RSS before and after that reset, and what one real
request (speech for Whisper, a photo for Qwen2.5-VL) costs on the wire with and without a
mirror hit. ``summarize_two_process`` gives the median, min and max of those figures over
the repeats (each repeat a fresh P0 and a fresh P1); ``refimpl.bench.startup`` puts it in
the result's ``summary``.
"""
from __future__ import annotations

import time


def _probe_request(model_config):
    """(request id prefix, prompt token ids, items, hashes) of one real input processed in P0:
    a speech clip for Whisper, a photo (refimpl/data photos) for an image model."""
    from refimpl.multimodal import MULTIMODAL_REGISTRY
    processor = MULTIMODAL_REGISTRY.create_processor(model_config)
    if model_config.is_encoder_decoder:
        from refimpl.audio import load_speech_clips
        from refimpl.tokenizer import whisper_decoder_prompt
        _, audio = load_speech_clips()[0]
        mm = processor.apply("", {"audio": [(audio, 16000)]}, return_mm_hashes=True)
        return whisper_decoder_prompt(model_config.model), mm.mm_kwargs["audio"], mm.mm_hashes["audio"]
    from refimpl.multimodal.photos import load_sample_photos
    _, photo = load_sample_photos()[0]
    mm = processor.apply("<|vision_start|><|image_pad|><|vision_end|>Describe.", {"image": [photo]},
                         return_mm_hashes=True)
    return mm.prompt_token_ids, mm.mm_kwargs["image"], mm.mm_hashes["image"]


def _transport_probe(frontend, model_config) -> dict:
    """Send one real request twice (a mirror miss, then a hit).

    Whisper (a model the engine serves): two ADD messages through ``frontend.add_request``,
    then both aborted. Image models (start-up only here): P0's mirror, then the same
    EngineCoreRequest in a ``mirror_probe`` utility call, which P1 decodes and runs through
    its mirror without queueing (the message is ~100 bytes longer than an ADD).
    Returns ``bytes_miss`` / ``bytes_hit`` (bytes of the message), ``encode_s_miss`` /
    ``encode_s_hit`` (s to serialise it in P0), ``decode_s`` (s P1 spent deserialising both),
    ``item_bytes`` (bytes of the processed tensors) and ``modality``.
    """
    from refimpl.engine.core_proc import EngineCoreRequest
    from refimpl.multimodal.cache import item_nbytes
    from refimpl.request import Request
    from refimpl.sampling_params import SamplingParams
    tokens, items, hashes = _probe_request(model_config)
    stats, out = frontend.client.stats, {}
    decode0 = frontend.client.call_utility("decode_s")
    for key in ("miss", "hit"):
        rid, enc0, bytes0 = f"probe-{key}", stats.encode_s, stats.bytes_sent
        params = SamplingParams(max_tokens=1)
        if model_config.is_encoder_decoder:
            frontend.add_request(Request(request_id=rid, prompt_token_ids=tokens, mm_inputs=items,
                                         mm_hashes=hashes, sampling_params=params,
                                         arrival_time=time.time()))
        else:
            sent = frontend.mm_input_cache_client.get_and_update_p0(items, hashes)
            frontend.client.call_utility("mirror_probe", EngineCoreRequest(
                rid, list(tokens), sent, list(hashes), params, time.time()))
        out[f"bytes_{key}"] = stats.bytes_sent - bytes0
        out[f"encode_s_{key}"] = stats.encode_s - enc0
    if model_config.is_encoder_decoder:
        frontend.abort_requests(["probe-miss", "probe-hit"])
    out["decode_s"] = frontend.client.call_utility("decode_s") - decode0
    out["item_bytes"] = sum(item_nbytes(it) for it in items)
    out["modality"] = "audio" if model_config.is_encoder_decoder else "image"
    return out


def two_process_record(vllm_config, variant: str, reset_scope: str):
    """Start up in two processes; returns (P1's StartupReport, record fields).

    Record: ``process_mode`` "mp", ``reset_scope``, ``startup_wall_s`` (s from spawning the
    child to its READY), ``spawn_overhead_s`` (that minus the child's timed phases: process
    start, imports, transport), the ``p0_*`` / ``p1_*`` cache-bytes and RSS fields before / after the reset
    (bytes), ``p1_pid``, ``p1_registry_stats`` (the child's ProcessingStats), and ``transport``:
    start-up bytes received and the probe of ``_transport_probe`` (after the reset, so it
    does not change the memory figures). The child is shut down before returning.
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
        transport |= _transport_probe(frontend, vllm_config.model_config)
        record = {"p1_registry_stats": frontend.client.call_utility("registry_stats"),
                  "process_mode": "mp", "reset_scope": reset_scope, "startup_wall_s": wall,
                  "spawn_overhead_s": wall - p1_s,
                  "p1_pid": frontend.pid, **frontend.startup_memory, "transport": transport}
    finally:
        frontend.shutdown()
    return rep, record


MEMORY_FIELDS = tuple(f"{p}_{k}_{when}_reset" for p in ("p0", "p1") for k in ("cache_bytes", "rss")
                      for when in ("before", "after"))
TRANSPORT_FIELDS = ("bytes_miss", "bytes_hit", "encode_s_miss", "encode_s_hit", "decode_s")


def summarize_two_process(runs: list[dict]) -> dict:
    """``{field: summarize(...)}`` (median, min, max, iqr, n) of MEMORY_FIELDS (bytes) and of
    ``transport_<TRANSPORT_FIELDS>`` (bytes, s) over two-process runs; ``{}`` when ``runs``
    are in-process (no ``process_mode`` "mp")."""
    from refimpl.stats import summarize
    if not runs or any(r.get("process_mode") != "mp" for r in runs):
        return {}
    out = {k: summarize(r[k] for r in runs) for k in MEMORY_FIELDS}
    for k in TRANSPORT_FIELDS:
        if all(k in r["transport"] for r in runs):
            out[f"transport_{k}"] = summarize(r["transport"][k] for r in runs)
    return out
