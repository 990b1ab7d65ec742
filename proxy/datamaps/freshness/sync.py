"""SYNC DATAMAPS: catch up with files written to base tables outside the proxy.

Loads through the proxy cut their base segment and refresh the datamaps at once. Files that
another application wrote (a Spark job, the Thrift server used directly, a copy into the
table's directory) are only seen when someone looks: REBUILD, the next load through the
proxy, `datamap-proxy sync` (which runs `SYNC DATAMAPS` on the running proxy), or the
periodic sync of `serve` (`[datamaps] sync_interval_s`).

One sync, for every base table of a datamap (or the one named):
  1. list the table's files; unknown ones become a new base segment (source "discovered"),
     known ones that are gone mark its segments deleted (the catalog's rule);
  2. every datamap over a changed table: non-lazy -> refreshed incrementally (or rebuilt when
     files vanished), lazy -> DISABLED until REBUILD (contract.md); a datamap over unchanged
     tables is refreshed only when it is not in sync (an earlier failure), else left alone.
A failed refresh disables that datamap (never serve stale rows) and is reported in its row;
the other tables and datamaps are still synced.
"""
from __future__ import annotations

import json
import logging
import threading
from typing import Iterable

from proxy.datamaps.failures import describe, logged
from proxy.datamaps.upkeep.maintenance import Maintenance, RefreshOutcome
from proxy.datamaps.upkeep.stacking import table_levels
from proxy.errors import ClientError
from proxy.routing.router import LocalResult

log = logging.getLogger("proxy.datamaps")

SYNC_COLUMNS: tuple[tuple[str, str], ...] = (
    ("Table", "string"), ("New Segment", "string"), ("Files Added", "int"),
    ("Files Removed", "int"), ("DataMaps", "string"),
)
# The DataMaps column holds a JSON object "db.name" -> RefreshOutcome (FAILED with ": why").


def target_tables(maintenance: Maintenance, table: str | None) -> list[str]:
    """The base tables to look at: every base table of a datamap, or `table` (which must be
    one)."""
    recs = maintenance.catalog.list_datamaps()
    if table is None:
        return sorted({t for r in recs for t in r.base_tables})
    if not any(table in r.base_tables for r in recs):
        raise ClientError(f"Table {table} has no datamaps: SYNC DATAMAPS ON TABLE needs a base "
                          "table of a datamap (SHOW DATAMAP lists them)", "42S02")
    return [table]


def sync_tables(maintenance: Maintenance, tables: list[str]) -> LocalResult:
    """Steps 1 and 2 of the module docstring for `tables`, lowest level first
    (proxy/datamaps/upkeep/stacking.py); one result row per table. The table of a datamap that
    changed is synced next when datamaps are stacked on it (its row comes after)."""
    rows: list[tuple] = []
    todo, done = set(tables), set()
    while todo:
        levels = table_levels(maintenance.catalog.list_datamaps())
        low = min(levels.get(t, 0) for t in todo)
        batch = sorted(t for t in todo if levels.get(t, 0) == low)
        got, changed = _sync_level(maintenance, batch)
        rows += got
        done.update(batch)
        todo = (todo | _stacked_on(maintenance, changed)) - done
    return LocalResult(SYNC_COLUMNS, rows)


def _stacked_on(maintenance: Maintenance, names: Iterable[str]) -> set[str]:
    """The tables of datamaps `names` ("db.name") that other datamaps read."""
    recs = maintenance.catalog.list_datamaps()
    read = {t for r in recs for t in r.base_tables}
    return {r.table for r in recs if r.qualified in names and r.table in read}


def propagate(maintenance: Maintenance, recs: Iterable) -> None:
    """After datamaps `recs` changed (REBUILD, a load, a compaction): sync the datamaps
    stacked on them, level by level."""
    tables = _stacked_on(maintenance, {r.qualified for r in recs})
    if tables:
        sync_tables(maintenance, sorted(tables))


def _sync_level(maintenance: Maintenance, tables: list[str]) -> tuple[list[tuple], list[str]]:
    """Steps 1 and 2 for tables of one level: result rows, and the datamaps whose rows
    changed."""
    found = {}
    broken: dict[str, str] = {}
    for t in tables:
        try:
            found[t] = maintenance.sync_base(t, "discovered")
            if found[t].changed:
                # a writer outside the proxy may have altered it: read again at once
                maintenance.schemas.reread(t)
        except Exception as e:  # noqa: BLE001 - e.g. dropped outside the proxy: report, go on
            log.warning("SYNC DATAMAPS cannot list %s: %s", t, describe(e)[0],
                        exc_info=not logged(e))
            broken[t] = f"base table {t} could not be listed: {describe(e)[0]}"

    for t in tables:
        if t in found and found[t].changed:
            maintenance.catalog.disable_on_table_change(
                t, f"base table {t} changed outside the proxy (found by SYNC DATAMAPS)")
    actions: dict[str, RefreshOutcome | str] = {}
    wanted = set(tables)
    for rec in maintenance.catalog.list_datamaps():
        mine = [t for t in rec.base_tables if t in wanted]
        if not mine:
            continue
        bad = [broken[t] for t in mine if t in broken]
        changed = any(found[t].changed for t in mine if t in found)
        if bad:
            maintenance.disable(rec, bad[0])
            actions[rec.qualified] = f"{RefreshOutcome.FAILED}: {bad[0]}"
        elif rec.lazy:
            actions[rec.qualified] = (RefreshOutcome.DISABLED if changed
                                      else RefreshOutcome.UNCHANGED)
        elif not changed and maintenance.catalog.is_in_sync(rec.db, rec.name):
            actions[rec.qualified] = RefreshOutcome.UNCHANGED
        else:
            try:
                actions[rec.qualified] = maintenance.refresh(
                    rec.db, rec.name, synced=[t for t in mine if t in found])
            except Exception as e:  # noqa: BLE001 - never serve it stale; report, go on
                log.warning("SYNC DATAMAPS: refresh of %s failed: %s", rec.qualified,
                            describe(e)[0], exc_info=not logged(e))
                reason = f"refresh by SYNC DATAMAPS failed: {describe(e)[0]}"
                maintenance.disable(rec, reason)
                actions[rec.qualified] = f"{RefreshOutcome.FAILED}: {reason}"

    rows = []
    for t in tables:
        per = {name: str(actions[name]) for rec in maintenance.catalog.list_datamaps(base_table=t)
               for name in [rec.qualified] if name in actions}
        got = found.get(t)
        rows.append((t, (got.segment or "") if got else "", got.added if got else 0,
                     got.removed if got else 0, json.dumps(per, sort_keys=True)))
        if got is not None and got.changed or any(a != RefreshOutcome.UNCHANGED
                                                  for a in per.values()):
            log.info("SYNC DATAMAPS %s: new segment %s, %d file(s) added, %d removed; %s", t,
                     got.segment if got else None, got.added if got else 0,
                     got.removed if got else 0, per)
    return rows, [n for n, a in actions.items() if a in _CHANGED]


# Outcomes after which the datamaps stacked on it have something to catch up with (a
# FAILED or DISABLED one makes them stale instead: stacking.stale_below).
_CHANGED = (RefreshOutcome.REFRESHED, RefreshOutcome.REBUILT, RefreshOutcome.ENABLED)


def sync_datamaps(maintenance: Maintenance, table: str | None) -> LocalResult:
    """SYNC DATAMAPS [ON TABLE table] (blocking: run it in a worker thread)."""
    return sync_tables(maintenance, target_tables(maintenance, table))


class BackgroundSyncs:
    """Syncs the freshness guard asks for (it saw files no segment covers): one thread per
    table at a time; a request while one runs makes it run once more, so files written
    during a sync are not left for the next periodic one."""

    def __init__(self, maintenance: Maintenance):
        self._maintenance = maintenance
        self._running: set[str] = set()
        self._again: set[str] = set()
        self._closed = False
        self._lock = threading.Lock()

    def request(self, table: str) -> None:
        with self._lock:
            if self._closed:
                return
            if table in self._running:
                self._again.add(table)
                return
            self._running.add(table)
        threading.Thread(target=self._run, args=(table,), daemon=True,
                         name=f"sync-{table}"[:60]).start()

    def _run(self, table: str) -> None:
        while True:
            try:
                sync_tables(self._maintenance, [table])
            except Exception:  # noqa: BLE001 - the next request or periodic sync retries
                log.warning("background sync of %s failed", table, exc_info=True)
            with self._lock:
                if table in self._again and not self._closed:
                    self._again.discard(table)
                    continue
                self._running.discard(table)
                return

    def running(self) -> bool:
        with self._lock:
            return bool(self._running)

    def close(self) -> None:
        with self._lock:
            self._closed = True
