"""Mirrored P0 / P1 input caches (refimpl/engine/mp/mm_input_cache.py), in one process.

Each "send" goes the way a request goes between the processes: P0's mirror, the wire
encoding (serial_utils), P1's mirror. The real two-process engine is tested in
tests/engine/test_two_process.py.
- each fault of MIRROR_FAULTS reproduces its failure (KeyError in P1, the eviction loop;
  ``reorder``: a concurrent front end's put order, vLLM #31404 / PR #46747);
  the same request streams never fail without the fault;
- a hypothesis state machine drives random streams (new items, repeats, evictions, resets,
  aborts) through the real Whisper processor and both mirrors, checking after every step
  that the mirrors hold the same hashes in the same order and that P1 got exactly what a
  fresh (uncached) HF call gives.
"""
from __future__ import annotations

import pytest
import torch

from refimpl.engine.mp import serial_utils
from refimpl.engine.mp.mm_input_cache import EvictionLoopError, MirroredProcessingCache
from tests.engine.utils import Pair

ITEM = 1000  # bytes of one float32 item of 250 values


def item(i: int) -> dict:
    return {"x": torch.full((ITEM // 4,), float(i))}




def _stream(pair: Pair, kind: str) -> None:
    """The request stream that makes ``kind`` fail (and must not fail without a fault)."""
    if kind == "reset-p1-only":
        pair.send([item(0)], ["h0"])
        pair.reset()
        pair.send([item(0)], ["h0"])
    elif kind == "capacity-mismatch":  # capacity 3 items: P1 (1.5 items) evicts h0 early
        pair.send([item(0)], ["h0"])
        pair.send([item(1)], ["h1"])
        pair.send([item(0)], ["h0"])
    elif kind == "reorder":  # capacity 3 items: P0 stores h2, h1, h0 and P1 h0, h1, h2, so
        pair.send([item(0), item(1), item(2)], ["h0", "h1", "h2"])
        pair.send([item(3)], ["h3"])  # P0 evicts h2, P1 evicts h0,
        pair.send([item(0)], ["h0"])  # which P0 then sends as its hash alone


def _ghost_stream(pair: Pair) -> None:
    """Issue #43941's order: P0 records h0 for a request that is then refused before P1 sees
    it; the next request with h0 reaches P1 as a bare hash (KeyError: that request fails,
    serving goes on); then new items fill the cache (capacity 3 items) and evict."""
    pair.p0.get_and_update_p0([item(0)], ["h0"])
    with pytest.raises(KeyError, match="h0"):
        pair.send([item(0)], ["h0"])
    for i in range(1, 6):
        pair.send([item(i)], [f"h{i}"])


@pytest.mark.parametrize("kind", ["reset-p1-only", "capacity-mismatch", "reorder"])
def test_fault_p1_receives_no_data_for_an_item_it_lacks(kind):
    pair = Pair(3 * ITEM, fault=kind)
    with pytest.raises(KeyError, match="h0"):
        _stream(pair, kind)
    assert not pair.agree()


def test_fault_eviction_loop_is_bounded_and_detected():
    pair = Pair(3 * ITEM, fault="evict-loop")
    with pytest.raises(EvictionLoopError, match="ghost key 'h0'"):
        _ghost_stream(pair)


@pytest.mark.parametrize("kind", ["reset-p1-only", "capacity-mismatch", "reorder"])
def test_default_never_fails_on_the_same_streams(kind):
    pair = Pair(3 * ITEM)
    _stream(pair, kind)
    assert pair.agree()


def test_default_leaves_no_ghost_and_evicts():
    pair = Pair(3 * ITEM)
    _ghost_stream(pair)  # the refused request still costs its KeyError; nothing loops
    assert "h0" not in pair.p1.keys() and pair.p1.evictions > 0


def test_item_larger_than_the_cache_is_stored_on_neither_side():
    pair = Pair(3 * ITEM)
    pair.send([{"x": torch.zeros(ITEM)}], ["big"])
    assert "big" not in pair.p0 and "big" not in pair.p1 and pair.agree()


def test_hit_sends_the_hash_alone():
    pair = Pair(3 * ITEM)
    full = serial_utils.nbytes(serial_utils.encode(pair.p0.get_and_update_p0([item(0)], ["h0"])))
    hit = pair.p0.get_and_update_p0([item(0)], ["h0"])
    assert hit == [None]
    assert serial_utils.nbytes(serial_utils.encode(hit)) < 100 < ITEM < full


def test_cache_off_sends_every_item_whole():
    p0 = MirroredProcessingCache.for_p0(3 * ITEM, use_cache=False)
    assert p0.get_and_update_p0([item(0), item(0)], ["h0", "h0"])[1] is not None
    assert p0.keys() == []
