"""One lock per key, shared by every part of the datamap service.

A datamap's jobs (build, refresh, compaction, drop, a time-zone switch) hold "db.name";
listing a base table's files holds "base:db.table". The parts live in different modules
but must exclude each other, so they take their locks from one `KeyedLocks`.

Replicas sharing a catalog must exclude each other too (no datamap built twice, no base
files registered twice): with `leases` (a proxy.ha.leader.LeaseKeeper) set, holding a key
also holds the catalog lease "job:<key>", taken after the in-process lock, so one thread
per process competes for it.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator

from proxy.datamaps.catalog.records import CatalogError


class KeyedLocks:
    def __init__(self, leases=None) -> None:
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        self.leases = leases

    def _lock(self, key: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())

    def __call__(self, key: str):
        lock = self._lock(key)
        return lock if self.leases is None else _held(lock, self.leases, f"job:{key}")

    @contextmanager
    def try_hold(self, key: str) -> Iterator[bool]:
        """Hold `key` if nobody (here or in another replica) does; yields whether it did."""
        lock = self._lock(key)
        if not lock.acquire(blocking=False):
            yield False
            return
        leases, name = self.leases, f"job:{key}"
        try:
            if leases is not None and not leases.try_take(name):
                yield False
                return
            try:
                yield True
            finally:
                if leases is not None:
                    leases.give_back(name)
        finally:
            lock.release()


@contextmanager
def _held(lock: threading.Lock, leases, name: str) -> Iterator[None]:
    with lock:
        if not leases.take(name):
            raise CatalogError(f"Cannot take the catalog lease {name}: this replica is "
                               "shutting down", "HY000")
        try:
            yield
        finally:
            leases.give_back(name)
