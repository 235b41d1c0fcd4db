"""Soak and long fuzz runs (issue #4, parts 3 and 6); ``soak`` marker: skipped by ``make
test``, run by ``make soak`` (``pytest -m soak``). Each test PRINTS its figures (run with
``-s`` to see them; docs/reliability.md records the last run's).

1. 2,000 Whisper requests (and 2,000 decoder-only requests with images) through the real
   Scheduler / KVCacheManager with FakeModelRunner on a KV cache that forces preemption,
   with 5% aborts: exactly once, tokens equal an unpressured run, no block leak, RSS back
   within 10% of the level after a warm-up and at most 1 MiB of Python heap (tracemalloc)
   left behind by the run.
2. 200 real Whisper-tiny requests (real speech of mixed length, 1 to 30 s; max_tokens
   2 to 29) through ``LLMEngine`` on a KV cache of 192 blocks (two requests' cross
   attention plus one spare block): every request finishes once with the same tokens as on
   an unpressured engine; RSS after the run (multimodal cache reset, ``malloc_trim``)
   within 10% of RSS after start-up. 2,000 real requests would take ~15 min per engine on
   one CPU thread (the encoder alone is ~0.4 s per audio), so the 2,000-request soak is the
   fake-runner one above.
3. 10,000 hypothesis cases through the processor entry point (tests/multimodal/fuzz_inputs.py).

Sizes can be lowered for a quick try: SOAK_FAKE_N, SOAK_REAL_N, SOAK_FUZZ_N.
"""
from __future__ import annotations

import ctypes
import gc
import os
import time
import tracemalloc

import numpy as np
import psutil
import pytest
from hypothesis import HealthCheck, given, settings

from refimpl.testing import QWEN, WHISPER
from tests.core import utils as tsp
from tests.multimodal.fuzz_inputs import Fuzzer, fuzz_cases

pytestmark = pytest.mark.soak

FAKE_N = int(os.environ.get("SOAK_FAKE_N", 2000))
REAL_N = int(os.environ.get("SOAK_REAL_N", 200))
FUZZ_N = int(os.environ.get("SOAK_FUZZ_N", 10_000))
MiB = 1 << 20


def rss() -> int:
    """RSS after a full collection and glibc's malloc_trim (freed heap given back to the OS)."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:
        pass
    return psutil.Process().memory_info().rss


def _jobs(n: int, seed: int) -> list:
    rng = np.random.default_rng(seed)
    return [tsp.Job(arrival=int(i // 4 + rng.integers(0, 3)), max_tokens=int(rng.integers(1, 64)),
                    prompt_len=int(rng.integers(30, 200)),
                    abort_at=int(i // 4 + rng.integers(0, 40)) if rng.random() < 0.05 else None)
            for i in range(n)]


@pytest.mark.parametrize("model", [WHISPER, QWEN])
def test_soak_scheduler_fake_runner(model):
    kw = (dict(num_blocks=1 + 2 * (tsp.CROSS + 1) + 1, max_num_seqs=8) if model == WHISPER
          else dict(num_blocks=1 + 40, max_num_seqs=8, max_num_batched_tokens=128))
    tsp.run_workload(model, _jobs(50, 1), **kw)  # warm-up: imports, allocator pools
    tracemalloc.start()
    heap0, rss0 = tracemalloc.get_traced_memory()[0], rss()
    t0 = time.perf_counter()
    jobs = _jobs(FAKE_N, 2)
    done, aborted, stats = tsp.run_workload(model, jobs, **kw)
    ref, _, ref_stats = tsp.run_workload(
        model, [tsp.Job(j.arrival, j.max_tokens, j.prompt_len, None) for j in jobs], 100_000,
        max_num_seqs=256, max_num_batched_tokens=1 << 16)
    mismatched = [rid for rid, toks in done.items() if toks != ref[rid]]
    n_done, n_aborted, preemptions = len(done), len(aborted), stats["preemptions"]
    del done, ref, aborted, jobs
    heap1, rss1 = tracemalloc.get_traced_memory()[0], rss()
    tracemalloc.stop()
    print(f"\nsoak[{model}, FakeModelRunner]: {FAKE_N} requests, {n_done} finished, {n_aborted} aborted, "
          f"{preemptions} preemptions in {stats['steps']} steps (unpressured: "
          f"{ref_stats['preemptions']} preemptions), {len(mismatched)} token mismatches, "
          f"{time.perf_counter() - t0:.1f} s; python heap retained by the run {(heap1 - heap0) / MiB:.3f} MiB; "
          f"RSS {rss0 / MiB:.1f} -> {rss1 / MiB:.1f} MiB")
    assert n_done + n_aborted == FAKE_N and not mismatched
    assert preemptions > FAKE_N // 10 and ref_stats["preemptions"] == 0
    # tracemalloc counts only what was allocated after start(): heap1 - heap0 is what the run
    # left behind. A retained Request (~1 kB with its lists) per request would be > 2 MiB.
    assert heap1 - heap0 <= 1 * MiB
    assert abs(rss1 - rss0) <= 0.10 * rss0


def _serve(engine, audios, max_tokens, tag):
    """Add 4 requests per step (arrivals spread over the run); returns ({i: tokens}, preemptions)."""
    from refimpl.sampling_params import SamplingParams
    outs, pending, preempted = {}, list(range(len(audios))), 0
    sched = engine.scheduler
    orig = sched.schedule

    def counting():
        nonlocal preempted
        so = orig()
        preempted += len(so.preempted_req_ids)
        return so
    sched.schedule = counting
    try:
        while pending or engine.has_unfinished_requests():
            for i in pending[:4]:
                engine.add_request(f"{tag}{i}", {"multi_modal_data": {"audio": (audios[i], 16000)}},
                                   SamplingParams(max_tokens=max_tokens[i], ignore_eos=True))
            pending = pending[4:]
            for o in engine.step():
                i = int(o.request_id[len(tag):])
                assert i not in outs, f"{o.request_id} finished twice"
                outs[i] = list(o.output_token_ids)
    finally:
        sched.schedule = orig
    return outs, preempted


def test_soak_real_whisper_engine():
    from refimpl.audio import make_request_audios
    from refimpl.engine.llm_engine import LLMEngine
    from refimpl.multimodal import MULTIMODAL_REGISTRY as REG
    t0 = time.perf_counter()
    tight = LLMEngine.from_args("whisper-tiny", device="cpu", max_num_seqs=8, num_gpu_blocks=192,
                                 process_mode="inproc")
    roomy = LLMEngine.from_args("whisper-tiny", device="cpu", max_num_seqs=8, num_gpu_blocks=8 * 97 + 1,
                                 process_mode="inproc")
    audios = make_request_audios(REAL_N, seed=7, max_s=30.0)
    rng = np.random.default_rng(7)
    max_tokens = [int(x) for x in rng.integers(2, 30, REAL_N)]
    rss_start = rss()
    outs, preempted = _serve(tight, audios, max_tokens, "t")
    rss_run, cache_run = rss(), REG.cache_bytes()
    tight.reset_mm_cache()
    rss_end = rss()
    ref, ref_preempted = _serve(roomy, audios, max_tokens, "r")
    roomy.reset_mm_cache()
    mismatched = [i for i in range(REAL_N) if outs.get(i) != ref.get(i)]
    kv = tight.scheduler.kv_cache_manager
    print(f"\nsoak[whisper-tiny, LLMEngine]: {REAL_N} real-speech requests, {len(outs)} finished, "
          f"{preempted} preemptions (unpressured: {ref_preempted}), {len(mismatched)} token mismatches "
          f"{mismatched[:5]}, {time.perf_counter() - t0:.0f} s; RSS after start-up {rss_start / MiB:.1f} MiB, "
          f"after the run {rss_run / MiB:.1f} MiB (processing cache {cache_run / MiB:.1f} MiB), "
          f"after reset_mm_cache {rss_end / MiB:.1f} MiB")
    assert sorted(outs) == sorted(ref) == list(range(REAL_N))
    assert [len(outs[i]) for i in range(REAL_N)] == max_tokens
    assert not mismatched
    assert preempted > 0 and ref_preempted == 0
    assert kv.get_num_free_blocks() == kv.block_pool.num_gpu_blocks - 1
    assert abs(rss_end - rss_start) <= 0.10 * rss_start


FUZZER = None


@settings(max_examples=FUZZ_N, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(fuzz_cases())
def _fuzz_many(case):
    FUZZER(case)


def test_soak_fuzz_processor():
    global FUZZER
    FUZZER = Fuzzer()
    t0 = time.perf_counter()
    _fuzz_many()
    print(f"\nfuzz[processor.apply]: {FUZZER.counts['cases']} cases ({FUZZER.counts['accepted']} accepted, "
          f"{FUZZER.counts['refused']} refused: {FUZZER.errors}), 0 crashes, "
          f"{time.perf_counter() - t0:.0f} s")
    assert FUZZER.counts["cases"] >= FUZZ_N
