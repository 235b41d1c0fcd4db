"""Content hashed only where a cache or mirror reads the hash (issue 46, kind 4; vLLM PR #23690).

Counted (``ProcessingStats.hash_calls``, one per item hashed) per configuration, serving N audios
through ``LLMEngine.add_request``: with the processing cache on, one content hash per item (the
cache and the two-process mirror key by it); with ``mm_processor_cache_gb=0`` or
``disable_mm_preprocessor_cache=True``, none: the items are named ``<request id>-audio-0``
(vLLM's ``_maybe_build_mm_uuids``; the request id is the per-submission internal one, so ids
never repeat). Start-up keeps each row's hashing: release row 0.9.0 hashes its profiling dummy
audio through the registry's cache even with the cache off (PR #17935's start-up cost), the
kit's default (``hash_uncached`` False, cache off) hashes nothing. The processor-level
property: for any item count and cache setting, ``mm_uuids`` are used verbatim when the cache is
off and ignored (content hashes) when it is on.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refimpl.config import ModelConfig
from refimpl.engine.llm_engine import LLMEngine
from refimpl.errors import InvalidInputError
from refimpl.multimodal import MULTIMODAL_REGISTRY
from refimpl.multimodal.processing import request_scoped_uuids
from refimpl.multimodal.registry import MultiModalRegistry
from refimpl.sampling_params import SamplingParams

N = 3
CLIPS = [np.random.default_rng(i).normal(0, 0.1, 4000 * (i + 1)).astype(np.float32) for i in range(N)]
CONFIGS = {"cache on": {}, "mm_processor_cache_gb=0": {"mm_processor_cache_gb": 0},
           "disable_mm_preprocessor_cache": {"disable_mm_preprocessor_cache": True}}


def serve_counting(row, model_kw, process_mode="inproc"):
    """(hash calls at start-up, hash calls serving N audios, the queued requests' mm_hashes)."""
    MULTIMODAL_REGISTRY.reset_stats()  # in-process, start-up and the front end count here
    eng = LLMEngine.from_args("whisper-tiny", device="cpu", process_mode=process_mode, startup_variant=row,
                              **model_kw)
    try:
        startup = eng.processor.stats.hash_calls
        before = startup
        hashes = []
        for i, clip in enumerate(CLIPS):
            rid = eng.add_request(f"r{i}", {"multi_modal_data": {"audio": (clip, 16000)}}, SamplingParams(max_tokens=1))
            if process_mode == "inproc":
                hashes.append(list(eng.scheduler.requests[eng.output_processor.external_req_ids[rid]].mm_hashes))
        while eng.has_unfinished_requests():
            eng.step()
        return startup, eng.processor.stats.hash_calls - before, hashes
    finally:
        eng.shutdown()


@pytest.mark.slow
@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_serving_hashes_only_with_the_cache_on(config):
    startup, served, hashes = serve_counting("refimpl", CONFIGS[config])
    if config == "cache on":
        assert served == N and all(len(h[0]) == 64 for h in hashes)  # blake3 hex digests
    else:
        assert startup == 0 and served == 0  # the kit's row: no hash without a cache, at start-up too
        assert [h[0].rsplit("-", 2)[1:] for h in hashes] == [["audio", "0"]] * N
        assert len({h[0] for h in hashes}) == N


@pytest.mark.slow
def test_release_rows_keep_their_start_up_hashing():
    startup_090, served_090, _ = serve_counting("0.9.0", {"disable_mm_preprocessor_cache": True})
    assert startup_090 > 0 and served_090 == 0  # PR #17935: profiling hashes through the registry cache


@pytest.mark.slow
def test_two_process_mirror_serves_request_scoped_ids():
    _, served, _ = serve_counting("refimpl", {"mm_processor_cache_gb": 0}, process_mode="mp")
    assert served == 0


@settings(max_examples=30, deadline=None)
@given(n=st.integers(0, 1), cache=st.booleans(), rid=st.text(min_size=1, max_size=8))
def test_processor_uses_the_ids_only_without_a_cache(n, cache, rid):
    mc = ModelConfig("whisper-tiny", device="cpu")
    proc = MultiModalRegistry().create_processor(mc, disable_cache=not cache)
    data = {"audio": [(c, 16000) for c in CLIPS[:n]]}
    uuids = request_scoped_uuids(rid, data)
    assert uuids == {"audio": [f"{rid}-audio-{i}" for i in range(n)]}
    out = proc.apply("", data, mm_uuids=uuids)
    if n == 0:
        assert out.mm_hashes == {} and proc.stats.hash_calls == 0
    elif cache:
        assert proc.stats.hash_calls == n and out.mm_hashes["audio"] != uuids["audio"]
    else:
        assert proc.stats.hash_calls == 0 and out.mm_hashes["audio"] == uuids["audio"]
    if n:
        with pytest.raises(InvalidInputError) as e:  # an id per item, or none
            MultiModalRegistry().create_processor(mc, disable_cache=True).apply("", data, mm_uuids={"audio": []})
        assert e.value.field == "mm_uuids"
