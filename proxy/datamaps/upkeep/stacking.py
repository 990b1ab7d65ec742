"""Datamaps on datamaps: the dependency graph between datamaps (docs/stacked.md).

A datamap is *stacked* on another when its SELECT reads that datamap's live table
`<name>_table`. The catalog already records the edge: the lower datamap's table is one of
the upper one's base tables, and the lower one's segments (their files) are the upper
one's base segments, so the ordinary refresh machinery (incremental append of new files,
full rebuild when files vanish) applies to the upper datamap unchanged. What is added
here is the order: whatever changes a datamap's rows also syncs the datamaps stacked on
it, lowest level first (proxy/datamaps/freshness/sync.py propagate), a datamap others read cannot
be dropped, and an upper datamap is fresh only while everything below it is.

Cycles cannot be built: a datamap can only read tables that exist when it is created,
and its own table is created after its definition is checked; `refresh_order` still
refuses one rather than loop.

The pure functions take the records as arguments (no catalog, no Spark), so the graph is
unit-tested on its own (tests/proxy/datamaps/test_stacking.py).
"""
from __future__ import annotations

from typing import Iterable, Sequence

from proxy.errors import ClientError
from rewriter.api import storage_table

# SQLSTATE of a DROP refused because other objects depend on it (PostgreSQL's
# dependent_objects_still_exist; the SQL standard's class 2B).
DEPENDENTS_EXIST = "2BP01"


def lower_names(rec, tables: dict[str, str]) -> list[str]:
    """The datamaps ("db.name") whose tables `rec` reads; `tables` maps each datamap's
    table ("db.<name>_table") to its name."""
    return [tables[t] for t in rec.base_tables if t in tables]


def table_index(recs: Iterable) -> dict[str, str]:
    """"db.<name>_table" -> "db.name" for every datamap."""
    return {r.table: r.qualified for r in recs}


def dependents(recs: Sequence, name: str, transitive: bool = False) -> list[str]:
    """Datamaps stacked on datamap `name` (directly, or at any level), sorted."""
    tables = table_index(recs)
    found: set[str] = set()
    todo = [name]
    while todo:
        low = todo.pop()
        for r in recs:
            if low in lower_names(r, tables) and r.qualified not in found:
                found.add(r.qualified)
                if transitive:
                    todo.append(r.qualified)
    found.discard(name)
    return sorted(found)


class CycleError(ValueError):
    pass


def refresh_order(recs: Sequence) -> list[str]:
    """Every datamap, each after all the datamaps it reads (then by name). A cycle raises
    CycleError naming its members."""
    tables = table_index(recs)
    below = {r.qualified: set(lower_names(r, tables)) for r in recs}
    order: list[str] = []
    done: set[str] = set()
    while len(done) < len(below):
        ready = sorted(n for n, deps in below.items() if n not in done and deps <= done)
        if not ready:
            stuck = sorted(n for n in below if n not in done)
            raise CycleError("datamaps read each other's tables in a cycle: "
                             + ", ".join(stuck))
        order.extend(ready)
        done.update(ready)
    return order


def table_levels(recs: Sequence) -> dict[str, int]:
    """Level of every table a datamap reads or writes: 0 for a base table, one more than
    the highest table it reads for a datamap's table. Syncing tables level by level
    refreshes every datamap after the ones it reads."""
    levels: dict[str, int] = {t: 0 for r in recs for t in r.base_tables}
    by_name = {r.qualified: r for r in recs}
    for name in refresh_order(recs):
        r = by_name[name]
        levels[r.table] = 1 + max((levels.get(t, 0) for t in r.base_tables), default=0)
    return levels


def check_drop(recs: Sequence, rec) -> None:
    """Refuse to drop `rec` while other datamaps read its table (2BP01, naming them)."""
    deps = dependents(recs, rec.qualified)
    if deps:
        raise ClientError(
            f"Cannot drop datamap {rec.qualified}: datamap{'s' if len(deps) > 1 else ''} "
            f"{', '.join(deps)} read{'' if len(deps) > 1 else 's'} its table {rec.table}; "
            "drop them first", DEPENDENTS_EXIST)


def check_create(recs: Sequence, name: str, table: str, base_tables: Iterable[str]) -> None:
    """Refuse a definition that reads a datamap's storage table (it holds superseded and
    unpublished segments too; the live table is `<name>_table`) or its own table."""
    by_storage = {storage_table(r.table): r for r in recs}
    for t in base_tables:
        if t in by_storage:
            live = by_storage[t].table
            raise ClientError(f"Datamap {name} reads {t}, the storage of datamap "
                              f"{by_storage[t].qualified}, which holds segments that are not "
                              f"visible; read its live table {live} instead", "0A000")
        if t == table:
            raise ClientError(f"Datamap {name} cannot read its own table {table}", "42000")


def stale_below(catalog, rec, tables: dict[str, str] | None = None) -> str | None:
    """Why datamap `rec` is not fresh because of a datamap below it, or None: every lower
    datamap must be ENABLED and in sync with its own base tables, and `rec` must cover
    exactly the files of the lower one's visible segments (a publish below that `rec`
    has not caught up with yet makes it stale). `tables`: table_index of every datamap
    (a caller judging many datamaps builds it once)."""
    tables = table_index(catalog.list_datamaps()) if tables is None else tables
    for low_name in lower_names(rec, tables):
        db, _, name = low_name.partition(".")
        why = catalog.unavailable_reason(db, name)
        if why is None:
            why = stale_below(catalog, catalog.get_datamap(db, name), tables)
        if why is not None:
            return f"datamap {low_name} below it is not fresh ({why})"
        low_table = f"{low_name}_table"
        visible = {f for s in catalog.visible_segments(db, name) for f in s.files}
        ids = catalog.covered_base_segments(rec.db, rec.name).get(low_table, set())
        covered = {f for s in catalog.base_segments(low_table) if s.id in ids
                   for f in s.files}
        if visible != covered:
            return f"datamap {low_name} below it has segments it has not caught up with yet"
    return None


def depends_on(catalog, rec, recs: Sequence) -> str:
    """SHOW DATAMAP's Depends On: the datamaps `rec` reads and whether they let it be fresh,
    e.g. `default.hourly (fresh)`; empty for a datamap over base tables only."""
    tables = table_index(recs)
    names = lower_names(rec, tables)
    if not names:
        return ""
    why = stale_below(catalog, rec, tables)
    return ", ".join(names) + (f" (not fresh: {why})" if why else " (fresh)")
