"""The recent queries answered from each datamap, which AUDIT DATAMAP audits
(auditor.py): a small ring per datamap, bounded in entries and in bytes, and
all rings together bounded in bytes (the least recently answered datamap's ring goes
first). Every operation is O(1) amortised: the decision path (the event loop) adds to it.
"""
from __future__ import annotations

import threading
from collections import OrderedDict

RING_ENTRIES = 8             # recent queries kept per datamap
RING_BYTES = 64 << 10        # their text, per datamap; a longer statement is not kept
TOTAL_BYTES = 8 << 20        # all rings together

Key = tuple[str, str]        # (current database, statement)


class RecentQueries:
    def __init__(self, entries: int = RING_ENTRIES, ring_bytes: int = RING_BYTES,
                 total_bytes: int = TOTAL_BYTES):
        self.entries, self.ring_bytes, self.total_bytes = entries, ring_bytes, total_bytes
        self._lock = threading.Lock()
        self._rings: OrderedDict[str, OrderedDict[Key, int]] = OrderedDict()
        self._bytes: dict[str, int] = {}
        self.bytes = 0

    def add(self, names, key: Key) -> None:
        """Remember `key` for each datamap of `names` ("db.name"), as the newest."""
        size = len(key[1])
        if size > self.ring_bytes:
            return
        with self._lock:
            for name in names:
                self._add(name, key, size)

    def _add(self, name: str, key: Key, size: int) -> None:
        ring = self._rings.setdefault(name, OrderedDict())
        self._rings.move_to_end(name)
        if key in ring:
            ring.move_to_end(key)
            return
        ring[key] = size
        self._bytes[name] = self._bytes.get(name, 0) + size
        self.bytes += size
        while len(ring) > self.entries or self._bytes[name] > self.ring_bytes:
            gone = ring.popitem(last=False)[1]
            self._bytes[name] -= gone
            self.bytes -= gone
        while self.bytes > self.total_bytes:
            old, _ = self._rings.popitem(last=False)
            self.bytes -= self._bytes.pop(old, 0)

    def recent(self, name: str) -> list[Key]:
        """What is kept for datamap "db.name", newest first."""
        with self._lock:
            return list(reversed(self._rings.get(name, {})))
