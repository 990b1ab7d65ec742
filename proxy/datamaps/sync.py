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
from typing import TYPE_CHECKING

from proxy.datamaps.failures import describe, logged
from proxy.errors import ClientError
from proxy.router import LocalResult

if TYPE_CHECKING:
    from proxy.datamaps.service import DatamapService

log = logging.getLogger("proxy.datamaps")

SYNC_COLUMNS: tuple[tuple[str, str], ...] = (
    ("Table", "string"), ("New Segment", "string"), ("Files Added", "int"),
    ("Files Removed", "int"), ("DataMaps", "string"),
)
# What happened to a datamap (the values of the DataMaps column's JSON object).
REFRESHED, REBUILT, ENABLED, DISABLED, UNCHANGED = (
    "refreshed", "rebuilt", "enabled", "disabled", "unchanged")
FAILED = "failed"          # "failed: <reason>"; the datamap is DISABLED


def target_tables(service: "DatamapService", table: str | None) -> list[str]:
    """The base tables to look at: every base table of a datamap, or `table` (which must be
    one)."""
    recs = service.catalog.list_datamaps()
    if table is None:
        return sorted({t for r in recs for t in r.base_tables})
    if not any(table in r.base_tables for r in recs):
        raise ClientError(f"Table {table} has no datamaps: SYNC DATAMAPS ON TABLE needs a base "
                          "table of a datamap (SHOW DATAMAP lists them)", "42S02")
    return [table]


def sync_tables(service: "DatamapService", tables: list[str]) -> LocalResult:
    """Steps 1 and 2 of the module docstring for `tables`; one result row per table."""
    found = {}
    broken: dict[str, str] = {}
    for t in tables:
        try:
            found[t] = service.sync_base(t, "discovered")
            if found[t].changed:
                service.invalidate_schemas(t)   # a writer outside the proxy may have altered it
        except Exception as e:  # noqa: BLE001 - e.g. dropped outside the proxy: report, go on
            log.warning("SYNC DATAMAPS cannot list %s: %s", t, describe(e)[0],
                        exc_info=not logged(e))
            broken[t] = f"base table {t} could not be listed: {describe(e)[0]}"

    for t in tables:
        if t in found and found[t].changed:
            service.catalog.disable_on_table_change(t, f"base table {t} changed outside the "
                                                       "proxy (found by SYNC DATAMAPS)")
    actions: dict[str, str] = {}
    wanted = set(tables)
    for rec in service.catalog.list_datamaps():
        mine = [t for t in rec.base_tables if t in wanted]
        if not mine:
            continue
        bad = [broken[t] for t in mine if t in broken]
        changed = any(found[t].changed for t in mine if t in found)
        if bad:
            service._disable(rec, bad[0])
            actions[rec.qualified] = f"{FAILED}: {bad[0]}"
        elif rec.lazy:
            actions[rec.qualified] = DISABLED if changed else UNCHANGED
        elif not changed and service.catalog.is_in_sync(rec.db, rec.name):
            actions[rec.qualified] = UNCHANGED
        else:
            try:
                actions[rec.qualified] = service.refresh(rec.db, rec.name,
                                                         synced=[t for t in mine if t in found])
            except Exception as e:  # noqa: BLE001 - never serve it stale; report, go on
                log.warning("SYNC DATAMAPS: refresh of %s failed: %s", rec.qualified,
                            describe(e)[0], exc_info=not logged(e))
                reason = f"refresh by SYNC DATAMAPS failed: {describe(e)[0]}"
                service._disable(rec, reason)
                actions[rec.qualified] = f"{FAILED}: {reason}"

    rows = []
    for t in tables:
        per = {name: actions[name] for rec in service.catalog.list_datamaps(base_table=t)
               for name in [rec.qualified] if name in actions}
        got = found.get(t)
        rows.append((t, (got.segment or "") if got else "", got.added if got else 0,
                     got.removed if got else 0, json.dumps(per, sort_keys=True)))
        if got is not None and got.changed or any(a != UNCHANGED for a in per.values()):
            log.info("SYNC DATAMAPS %s: new segment %s, %d file(s) added, %d removed; %s", t,
                     got.segment if got else None, got.added if got else 0,
                     got.removed if got else 0, per)
    return LocalResult(SYNC_COLUMNS, rows)


def sync_datamaps(service: "DatamapService", table: str | None) -> LocalResult:
    """SYNC DATAMAPS [ON TABLE table] (blocking: run it in a worker thread)."""
    return sync_tables(service, target_tables(service, table))
