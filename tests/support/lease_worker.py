"""A replica's lease side in a process of its own, for the lease tests:

    python -m tests.support.lease_worker LOCATION TTL leader      # compete for leadership
    python -m tests.support.lease_worker LOCATION TTL lock N      # N turns at db1.agg's lock,
                                                                  # recording enter/exit events
    python -m tests.support.lease_worker LOCATION TTL build       # begin a segment of db1.agg
                                                                  # under its lock, never finish

It prints its holder id first, then "building <segment id>" in build mode, and stays until
killed (leader, build) or done (lock). `wait_until` is the replica tests' polling helper.
"""
from __future__ import annotations

import sys
import time

from proxy.datamaps.catalog.store import Catalog
from proxy.datamaps.locks import KeyedLocks
from proxy.ha import leader
from tests.support import waiting


def wait_until(what: str, cond, timeout: float = 30.0):
    """cond()'s first true value, asked every 0.1 s; AssertionError after `timeout`."""
    return waiting.wait_until(cond, timeout=timeout, what=what, interval=0.1)


def main(location: str, ttl: str, mode: str, *rest: str) -> None:
    catalog = Catalog(location)
    keeper = leader.LeaseKeeper(catalog, float(ttl))
    locks = KeyedLocks(keeper)
    print(keeper.holder, flush=True)
    if mode == "leader":
        keeper.want(leader.LEADER)
        time.sleep(600)
    elif mode == "lock":
        for _ in range(int(rest[0])):
            with locks("db1.agg"):
                catalog.record_event("db1", "agg", "enter", detail=keeper.holder)
                time.sleep(0.3)
                catalog.record_event("db1", "agg", "exit", detail=keeper.holder)
        keeper.stop()
    elif mode == "build":
        with locks("db1.agg"):
            sid = catalog.begin_segment("db1", "agg", {"db1.sales": ["0"]})
            print("building", sid, flush=True)
            time.sleep(600)


if __name__ == "__main__":
    main(*sys.argv[1:])
