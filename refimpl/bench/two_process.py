"""Start-up in two processes (``--process-mode mp``, P0 front end, P1 engine core): both processes'
cache bytes and RSS around P0's ``reset_mm_cache``, and one real request's cost on the wire."""
from __future__ import annotations

import time

from refimpl.audio import load_speech_clips
from refimpl.engine.core_proc import EngineCoreRequest
from refimpl.engine.frontend import MPFrontend
from refimpl.multimodal import MULTIMODAL_REGISTRY
from refimpl.multimodal.cache import item_nbytes
from refimpl.multimodal.photos import load_sample_photos
from refimpl.request import Request
from refimpl.sampling_params import SamplingParams
from refimpl.stats import summarize
from refimpl.tokenizer import whisper_decoder_prompt

MEMORY_FIELDS = tuple(f"{p}_{k}_{when}_reset" for p in ("p0", "p1") for k in ("cache_bytes", "rss")
                      for when in ("before", "after"))
TRANSPORT_FIELDS = ("bytes_miss", "bytes_hit", "encode_s_miss", "encode_s_hit", "decode_s")


def _probe_request(model_config):
    """(prompt token ids, items, hashes) of one real input processed in P0."""
    processor = MULTIMODAL_REGISTRY.create_processor(model_config)
    if model_config.is_encoder_decoder:
        mm = processor.apply("", {"audio": [(load_speech_clips()[0][1], 16000)]}, return_mm_hashes=True)
        return whisper_decoder_prompt(model_config.model), mm.mm_kwargs["audio"], mm.mm_hashes["audio"]
    mm = processor.apply("<|vision_start|><|image_pad|><|vision_end|>Describe.",
                         {"image": [load_sample_photos()[0][1]]}, return_mm_hashes=True)
    return mm.prompt_token_ids, mm.mm_kwargs["image"], mm.mm_hashes["image"]


def _transport_probe(frontend, model_config) -> dict:
    """One real request sent twice (mirror miss, then hit): bytes, seconds to serialise in P0 and decode
    in P1, bytes of the processed tensors (Whisper: add_request then abort; images: ``mirror_probe``)."""
    tokens, items, hashes = _probe_request(model_config)
    stats, out = frontend.client.stats, {}
    decode0 = frontend.client.call_utility("decode_s")
    for key in ("miss", "hit"):
        rid, enc0, bytes0, params = f"probe-{key}", stats.encode_s, stats.bytes_sent, SamplingParams(max_tokens=1)
        if model_config.is_encoder_decoder:
            frontend.add_request(Request(request_id=rid, prompt_token_ids=tokens, mm_inputs=items,
                                         mm_hashes=hashes, sampling_params=params, arrival_time=time.time()))
        else:
            sent = frontend.mm_input_cache_client.get_and_update_p0(items, hashes)
            frontend.client.call_utility("mirror_probe", EngineCoreRequest(rid, list(tokens), sent, list(hashes),
                                                                           params, time.time()))
        out[f"bytes_{key}"], out[f"encode_s_{key}"] = stats.bytes_sent - bytes0, stats.encode_s - enc0
    if model_config.is_encoder_decoder:
        frontend.abort_requests(["probe-miss", "probe-hit"])
    out["decode_s"] = frontend.client.call_utility("decode_s") - decode0
    out["item_bytes"] = sum(item_nbytes(it) for it in items)
    out["modality"] = "audio" if model_config.is_encoder_decoder else "image"
    return out


def two_process_record(vllm_config, variant: str, reset_scope: str):
    """Start up in two processes: (P1's StartupReport, record of spawn seconds, MEMORY_FIELDS bytes,
    P1's registry stats and ``transport``); P1 is shut down."""
    t0 = time.perf_counter()
    frontend = MPFrontend(vllm_config, variant, reset_scope)
    try:
        rep = frontend.report
        wall = time.perf_counter() - t0 - rep.phases.get("reset_mm_cache_p0", 0.0)
        p1_s = sum(v for k, v in rep.phases.items() if k != "reset_mm_cache_p0")
        transport = {"startup_bytes_received": frontend.client.stats.bytes_received,
                     "startup_decode_s": frontend.client.stats.decode_s}
        transport |= _transport_probe(frontend, vllm_config.model_config)
        record = {"p1_registry_stats": frontend.client.call_utility("registry_stats"), "process_mode": "mp",
                  "reset_scope": reset_scope, "startup_wall_s": wall, "spawn_overhead_s": wall - p1_s,
                  "p1_pid": frontend.pid, **frontend.startup_memory, "transport": transport}
    finally:
        frontend.shutdown()
    return rep, record


def summarize_two_process(runs: list[dict]) -> dict:
    """summarize() of MEMORY_FIELDS and ``transport_*`` over two-process runs; {} for in-process ones."""
    if not runs or any(r.get("process_mode") != "mp" for r in runs):
        return {}
    out = {k: summarize(r[k] for r in runs) for k in MEMORY_FIELDS}
    for k in TRANSPORT_FIELDS:
        if all(k in r["transport"] for r in runs):
            out[f"transport_{k}"] = summarize(r["transport"][k] for r in runs)
    return out
