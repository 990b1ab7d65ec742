"""Leases in the catalog: a named row (holder, expiry) that at most one holder owns at a
time, so replicas sharing the catalog agree on a leader (proxy/ha/leader.py) and on who runs a
datamap's job (locks.py).

A holder takes a lease that is free, expired, or already its own, and renews it before it
expires; nobody else takes it before its expiry. Expiry is wall-clock time (epoch seconds)
written by the holder, so replicas' clocks must agree to well within a lease's time to live
(NTP does). Lease writes do not bump the catalog version: nothing a reader caches changes.
"""
from __future__ import annotations

import time


class LeaseStore:
    """Mixed into Catalog: uses its `_tx`."""

    def acquire_lease(self, name: str, holder: str, ttl: float) -> bool:
        """Take or renew `name` for `ttl` seconds; False when another holder's lease on it
        has not expired."""
        now = time.time()
        with self._tx(bump=False) as c:
            cur = c.execute("UPDATE leases SET holder = ?, expires = ?, acquired = CASE WHEN "
                            "holder = ? THEN acquired ELSE ? END WHERE name = ? AND "
                            "(holder = ? OR expires < ?)",
                            (holder, now + ttl, holder, now, name, holder, now))
            if cur.rowcount:
                return True
            cur = c.execute("INSERT INTO leases VALUES (?, ?, ?, ?) ON CONFLICT (name) "
                            "DO NOTHING", (name, holder, now + ttl, now))
            return cur.rowcount > 0

    def renew_lease(self, name: str, holder: str, ttl: float) -> bool:
        """Extend `holder`'s lease on `name` by `ttl` from now; False when it is not
        `holder`'s any more (released, or taken over after it expired)."""
        with self._tx(bump=False) as c:
            return c.execute("UPDATE leases SET expires = ? WHERE name = ? AND holder = ?",
                             (time.time() + ttl, name, holder)).rowcount > 0

    def release_lease(self, name: str, holder: str) -> None:
        """Give `name` up now (only if `holder` still holds it)."""
        with self._tx(bump=False) as c:
            c.execute("DELETE FROM leases WHERE name = ? AND holder = ?", (name, holder))

    def lease_holder(self, name: str) -> tuple[str, float] | None:
        """(holder, expiry) of the unexpired lease on `name`, or None."""
        with self._tx(write=False) as c:
            row = c.execute("SELECT holder, expires FROM leases WHERE name = ? AND "
                            "expires >= ?", (name, time.time())).fetchone()
        return None if row is None else (row[0], row[1])
