"""A P0 / P1 pair of mirrored input caches (tests/engine/test_mm_input_cache.py, tests/engine/test_mm_input_cache_machine.py)."""
from __future__ import annotations

from refimpl.engine.mp import serial_utils
from refimpl.engine.mp.mm_input_cache import MirroredProcessingCache


class Pair:
    """P0 and P1 mirrors of ``capacity`` bytes under ``fault``, joined by the wire encoding."""

    def __init__(self, capacity: int, fault=None):
        self.p0 = MirroredProcessingCache.for_p0(capacity, fault=fault)
        self.p1 = MirroredProcessingCache.for_p1(capacity, fault=fault)
        self.fault = fault

    def send(self, items: list[dict], hashes: list[str]) -> list[dict]:
        wire = serial_utils.encode(self.p0.get_and_update_p0(items, hashes))
        return self.p1.get_and_update_p1(serial_utils.decode(wire), hashes)

    def reset(self) -> None:
        if self.fault != "reset-p1-only":
            self.p0.reset()
        self.p1.reset()

    def agree(self) -> bool:
        return self.p0.keys() == self.p1.keys() and self.p0.bytes == self.p1.bytes
