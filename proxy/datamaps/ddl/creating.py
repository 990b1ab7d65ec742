"""A CREATE DATAMAP while it runs: its catalog row of CREATEs in progress
(proxy/datamaps/catalog/creating.py), renewed by a thread of its own every TTL_S / 3 and
deleted when the statement ends, so that SHOW DATAMAP shows the datamap, and since when,
from the statement's first moment on every replica; a process that dies leaves a row that
expires within TTL_S."""
from __future__ import annotations

import logging
import threading
import time
import uuid
from contextlib import contextmanager
from typing import Iterator

from proxy.datamaps.catalog.creating import Creating

log = logging.getLogger("proxy.datamaps")

TTL_S = 30.0


class Running:
    """The running CREATE's row; `moved` corrects its database once the SELECT is compiled
    (a datamap belongs to its first main table's database)."""

    def __init__(self, catalog, entry: Creating, ttl: float):
        self._catalog, self.entry, self._ttl = catalog, entry, ttl

    def moved(self, db: str) -> None:
        if db != self.entry.db:
            self.entry = Creating(self.entry.token, db, self.entry.name, self.entry.provider,
                                  self.entry.properties, self.entry.base_tables,
                                  self.entry.started)
            self._catalog.begin_creating(self.entry, self._ttl)


@contextmanager
def creating(catalog, db: str, name: str, provider: str, properties: dict[str, str],
             base_tables: list[str], ttl: float = TTL_S) -> Iterator[Running]:
    running = Running(catalog, Creating(uuid.uuid4().hex, db, name, provider,
                                        dict(properties), tuple(base_tables), time.time()),
                      ttl)
    try:
        catalog.begin_creating(running.entry, ttl)
    except Exception:  # noqa: BLE001 - SHOW DATAMAP's courtesy, never the CREATE's failure
        log.warning("cannot record CREATE DATAMAP %s.%s as running", db, name, exc_info=True)
        yield running
        return
    stop = threading.Event()
    thread = threading.Thread(target=_renew, args=(catalog, running, ttl, stop),
                              name=f"creating-{db}.{name}", daemon=True)
    thread.start()
    try:
        yield running
    finally:
        stop.set()
        thread.join(5.0)
        try:
            catalog.end_creating(running.entry.token)
        except Exception:  # noqa: BLE001 - the row expires by itself
            log.warning("cannot remove the running CREATE DATAMAP %s.%s (it expires in %.0f s)",
                        db, name, ttl, exc_info=True)


def _renew(catalog, running: Running, ttl: float, stop: threading.Event) -> None:
    while not stop.wait(ttl / 3):
        try:       # its row gone (expired while the catalog was out of reach): again
            if not catalog.renew_creating(running.entry.token, ttl):
                catalog.begin_creating(running.entry, ttl)
        except Exception as e:  # noqa: BLE001 - tried again at the next round
            log.debug("cannot renew the running CREATE DATAMAP row: %s", e)
