"""Leader election and job leases for replicas sharing one catalog (docs/replicas.md).

A lease is a catalog row (datamaps/catalog/leases.py). One LeaseKeeper per process holds this
process's leases and renews them every ttl/3 from one named thread; a lease it cannot renew
(the catalog is unreachable, or another holder took it after it expired) is dropped, and
the keeper stops trusting any lease after ttl - ttl/6 without a successful renewal, before
any other replica may take it over.

    keeper = LeaseKeeper(catalog, ttl=15)
    keeper.want(LEADER)            # compete for leadership every renewal round
    keeper.holds(LEADER)           # this process holds the leader lease now
    keeper.take("job:db.name")     # blocks until held (locks.py uses it)
    keeper.give_back("job:db.name")
    keeper.stop()                  # releases everything

Periodic maintenance (sync, auto-compaction run from it, segment garbage) runs only where
`keeper.holds(LEADER)`: the keeper is handed to its users (proxy/app.py), no global. With
the SQLite catalog the same lease works across processes sharing the file; a lone process
always wins it.
"""
from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid

from proxy.datamaps.catalog.records import CatalogError

log = logging.getLogger("proxy.leader")

LEADER = "leader"
DEFAULT_TTL_S = 15.0
POLL_S = 0.2                     # a blocked take() asks again after this, doubling up to
POLL_MAX_S = 2.0                 # this: a long build elsewhere costs few catalog writes


def holder_id() -> str:
    """This process, as lease rows and logs name it."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class LeaseKeeper:
    def __init__(self, catalog, ttl: float = DEFAULT_TTL_S, holder: str | None = None):
        self.catalog, self.ttl = catalog, float(ttl)
        self.holder = holder or holder_id()
        self._trusted: dict[str, float] = {}     # name -> monotonic time until which it is ours
        self._wanted: set[str] = set()
        self._cv = threading.Condition()
        self._stopped = False
        self._thread: threading.Thread | None = None

    def _try(self, name: str, renew: bool = False) -> bool:
        started = time.monotonic()
        try:
            if renew:      # never take back a lease given back while this round ran
                ok = self.catalog.renew_lease(name, self.holder, self.ttl)
            else:
                ok = self.catalog.acquire_lease(name, self.holder, self.ttl)
        except CatalogError as exc:
            log.warning("lease %s: the catalog did not answer (%s)", name, exc)
            ok = False
        with self._cv:
            if renew and name not in self._trusted:
                return False
            if ok and not self._stopped:
                was = name in self._trusted
                # trust it a margin short of its expiry: clocks and the renewal may lag
                self._trusted[name] = started + self.ttl * 5 / 6
                if not was and name == LEADER:
                    log.info("this replica (%s) is the leader", self.holder)
            elif self._trusted.pop(name, None) is not None:
                log.warning("lease %s lost by %s", name, self.holder)
        self._ensure_thread()
        return ok

    def holds(self, name: str) -> bool:
        with self._cv:
            until = self._trusted.get(name)
        return until is not None and time.monotonic() < until

    def want(self, name: str) -> bool:
        """Compete for `name` now and at every renewal round; True when held now."""
        with self._cv:
            self._wanted.add(name)
        return self._try(name)

    def try_take(self, name: str) -> bool:
        return self._try(name)

    def take(self, name: str, timeout: float | None = None) -> bool:
        """Block until `name` is held (or `timeout` passes: False)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = POLL_S
        while not self._try(name):
            if self._stopped or (deadline is not None and time.monotonic() >= deadline):
                return False
            with self._cv:
                self._cv.wait(pause)
            pause = min(pause * 2, POLL_MAX_S)
        return True

    def give_back(self, name: str) -> None:
        with self._cv:
            self._wanted.discard(name)
            held = self._trusted.pop(name, None) is not None
        if held:
            try:
                self.catalog.release_lease(name, self.holder)
            except CatalogError as exc:    # it expires by itself after ttl
                log.warning("lease %s: could not release it (%s)", name, exc)

    def _ensure_thread(self) -> None:
        with self._cv:
            if self._thread is not None or self._stopped:
                return
            self._thread = threading.Thread(target=self._run, name="lease-keeper", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._cv:
                self._cv.wait_for(lambda: self._stopped, self.ttl / 3)
                if self._stopped:
                    return
                held, wanted = set(self._trusted), set(self._wanted)
            for name in sorted(held | wanted):
                self._try(name, renew=name not in wanted)

    def stop(self) -> None:
        """Stop renewing and release every lease held (a successor need not wait for
        expiry)."""
        with self._cv:
            self._stopped = True
            self._cv.notify_all()
            thread, names = self._thread, list(self._trusted)
            self._trusted.clear()
            self._wanted.clear()
        if thread is not None and thread is not threading.current_thread():
            thread.join(self.ttl)
        for name in names:
            try:
                self.catalog.release_lease(name, self.holder)
            except CatalogError:
                pass
