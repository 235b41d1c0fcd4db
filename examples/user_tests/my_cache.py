"""The user's own processing cache: an LRU bounded in bytes (what they want to check)."""
from collections import OrderedDict


class MyLRU:
    def __init__(self, capacity_bytes: int):
        self.capacity_bytes = capacity_bytes
        self.entries: OrderedDict[str, int] = OrderedDict()
        self.hits = self.misses = 0

    @property
    def bytes(self) -> int:
        return sum(self.entries.values())

    @property
    def order(self) -> tuple[str, ...]:
        return tuple(self.entries)

    def get(self, key: str) -> bool:
        if key in self.entries:
            self.entries.move_to_end(key)
            self.hits += 1
            return True
        self.misses += 1
        return False

    def put(self, key: str, nbytes: int) -> bool:
        if nbytes > self.capacity_bytes:
            return False
        self.entries.pop(key, None)
        while self.entries and self.bytes + nbytes > self.capacity_bytes:
            self.entries.popitem(last=False)
        self.entries[key] = nbytes
        return True

    def set_capacity(self, capacity_bytes: int) -> None:
        self.capacity_bytes = capacity_bytes
        while self.entries and self.bytes > capacity_bytes:
            self.entries.popitem(last=False)

    def reset(self) -> None:
        self.entries.clear()
        self.hits = self.misses = 0
