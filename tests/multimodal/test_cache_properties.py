"""ProcessingCache under random operation sequences and under threads (issue #4, part 1).

A hypothesis state machine drives one registry's cache with random put / get / set_capacity
/ reset of synthetic items of random sizes AND real Qwen2.5-VL processing of small images
through the same cache, against a reference LRU model. After every step: the byte total is
within the bound and equals the sum of the entries; the key order equals the model's LRU
order; an oversized item is refused without evicting anything; a key returns only its own
value; a processed item (hit or miss) equals a fresh, uncached HF call.

The thread tests share one cache (and one processor) between threads, as an async front end
or a thread pool would; ProcessingCache holds a lock in every method since this issue.
"""
from __future__ import annotations

import sys
import threading

import numpy as np
import pytest

from refimpl.config import ModelConfig
from refimpl.multimodal import MultiModalRegistry, ProcessingCache
from tests.multimodal.utils import QWEN_SMALL, _same_output, _val, reference_outputs


# ---------------------------------------------------------------------------------- threads
@pytest.fixture
def fast_switching():
    """Switch threads every microsecond so races show up within a short test."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(old)


def _hammer(cache: ProcessingCache, n_threads: int, fn) -> list[BaseException]:
    errors: list[BaseException] = []
    start = threading.Barrier(n_threads)

    def worker(t):
        try:
            start.wait()
            fn(t)
        except BaseException as e:  # noqa: BLE001 - collected and asserted on
            errors.append(e)
    threads = [threading.Thread(target=worker, args=(t,)) for t in range(n_threads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
        assert not th.is_alive(), "a cache operation hung"
    return errors


def test_threads_lose_no_entries_and_no_bytes(fast_switching):
    """8 threads insert 400 distinct keys each into a cache that holds them all."""
    cache = ProcessingCache(1 << 30)
    n_threads, n_keys = 8, 400

    def fn(t):
        for i in range(n_keys):
            cache.put(f"t{t}-{i}", _val(i % 64, t * n_keys + i))
            cache.get(f"t{t}-{i // 2}")
    assert _hammer(cache, n_threads, fn) == []
    assert len(cache) == n_threads * n_keys
    assert cache.bytes == sum(sz for _, sz in cache._data.values())
    assert cache.hits == n_threads * n_keys and cache.misses == 0
    for t in range(n_threads):
        for i in range(0, n_keys, 37):
            assert int(cache.get(f"t{t}-{i}")["tag"]) == t * n_keys + i


def test_threads_under_eviction_keep_bound_and_values(fast_switching):
    """8 threads put / get / reset over shared keys in a cache that holds ~10 items."""
    cache = ProcessingCache(10 * 1000)

    def fn(t):
        rng = np.random.default_rng(t)
        for _ in range(1500):
            k = int(rng.integers(0, 40))
            op = rng.random()
            if op < 0.5:
                cache.put(f"k{k}", _val(int(rng.integers(0, 1500)), k))  # tag = key: checkable
            elif op < 0.995:
                v = cache.get(f"k{k}")
                assert v is None or int(v["tag"]) == k
            else:
                cache.reset()
            assert cache.bytes <= cache.capacity_bytes
    assert _hammer(cache, 8, fn) == []
    assert cache.bytes == sum(sz for _, sz in cache._data.values()) <= cache.capacity_bytes
    assert all(int(v["tag"]) == int(k[1:]) for k, (v, _) in cache._data.items())


def test_threads_through_the_processor_equal_serial():
    """4 threads process the same 4 small images concurrently through one processor and
    cache; every output equals the uncached reference, and the cache holds each item once."""
    images, refs = reference_outputs()
    reg = MultiModalRegistry()
    proc = reg.create_processor(ModelConfig("qwen2.5-vl-3b", **QWEN_SMALL))
    results: dict[tuple[int, int], object] = {}

    def fn(t):
        for r in range(3):
            for i in range(len(images)):
                j = (i + t) % len(images)
                results[(t, r, j)] = proc.apply("<|image_pad|>", {"image": images[j]})
    assert _hammer(reg.processing_cache, 4, fn) == []
    assert len(results) == 4 * 3 * len(images)
    for (_, _, j), out in results.items():
        _same_output(out, refs[j])
    assert len(reg.processing_cache) == len(images)
    assert reg.processing_cache.bytes == sum(
        t.nbytes for o in refs for t in o.mm_kwargs["image"][0].values())
