"""One lock per key, shared by every part of the datamap service.

A datamap's jobs (build, refresh, compaction, drop, a time-zone switch) hold "db.name";
listing a base table's files holds "base:db.table". The parts live in different modules
but must exclude each other, so they take their locks from one `KeyedLocks`.
"""
from __future__ import annotations

import threading


class KeyedLocks:
    def __init__(self) -> None:
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def __call__(self, key: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())
