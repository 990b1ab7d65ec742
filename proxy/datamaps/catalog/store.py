"""The datamap catalog: one transactional store (SQLite under the state directory, or a
PostgreSQL database shared by replicas: `[state] catalog`, docs/replicas.md).

It holds datamap definitions and status, base-table segments (the files one load added),
datamap segments (one partition of `<name>_table` each, with CarbonData's extraInfo
mapping of the base segments it covers, and a `visible` flag), an event history, and a
catalog version that every change bumps (the rewriter caches on it).

Publishing a refresh is one transaction (segments.py).

Methods are synchronous and short; asyncio callers run them in a thread. One connection is
shared under a lock; WAL mode and a busy timeout let other processes (replicas, tools) use
the same file. The schema is versioned and migrated by a list of migrations.

    store.py     Catalog: connection, transactions, version, settings, datamaps, history
    segments.py  SegmentStore (mixed into Catalog): base and datamap segments
    schema.py    MIGRATIONS and migrate()
    backend.py   SQLite or PostgreSQL under one `?`-style SQL
    leases.py    LeaseStore (mixed into Catalog): leader and datamap-job leases
    creating.py  CreatingStore (mixed into Catalog): CREATE DATAMAP statements running now
    records.py   the values: DatamapRecord, segments, Event, DatamapStatus
"""
from __future__ import annotations

import json
import os
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator, Mapping, Sequence

from proxy.datamaps.catalog.backend import open_backend
from proxy.datamaps.catalog.creating import CreatingStore
from proxy.datamaps.catalog.leases import LeaseStore
from proxy.datamaps.catalog.records import (  # noqa: F401 - the catalog's values, importable here
    SEG_COMPACTED, SEG_DELETED, SEG_FAILED, SEG_IN_PROGRESS, SEG_SUCCESS, SOURCES,
    BaseSegment, CatalogError, DatamapRecord, DatamapSegment, DatamapStatus, Event,
    definition_from_json, definition_to_json, format_time, record_from_row, segment_from_row,
)
from proxy.datamaps.catalog.schema import SCHEMA_VERSION, migrate  # noqa: F401
from proxy.datamaps.catalog.segments import SegmentStore
from rewriter.api import STORAGE_SUFFIX, DatamapDefinition

_REWRITE_OFF = "rewrite_off:"      # meta key prefix: query rewrite switched off, "db.name"
# the catalog version the running write transaction commits (_tx bumps it at the end)
_NEXT_VERSION = "(SELECT CAST(value AS INTEGER) + 1 FROM meta WHERE key = 'catalog_version')"

class Catalog(SegmentStore, LeaseStore, CreatingStore):
    """Open (and migrate) the catalog at `path`: a SQLite file ("<state dir>/catalog.db" by
    convention) or a "postgresql://user:password@host:port/db" URL. `path` afterwards names
    it without the password."""

    def __init__(self, path: str | os.PathLike[str], busy_timeout_ms: int = 10_000):
        self._backend = open_backend(os.fspath(path), busy_timeout_ms)
        self.path = self._backend.name
        self.shared = self._backend.kind == "postgresql"
        self._lock = threading.RLock()
        self._seen: tuple[int, float] | None = None   # (version, when read): recent_version
        self._migrate()

    @classmethod
    def in_state_dir(cls, state_dir: str | os.PathLike[str],
                     location: str | None = None) -> "Catalog":
        """`[state] catalog` when set (`location`), else `<state_dir>/catalog.db`."""
        return cls(location or os.path.join(os.fspath(state_dir), "catalog.db"))

    def close(self) -> None:
        with self._lock:
            self._backend.close()

    def __enter__(self) -> "Catalog":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- plumbing ------------------------------------------------------------------------
    def _migrate(self) -> None:
        with self._lock:
            migrate(self._backend)

    @contextmanager
    def _tx(self, write: bool = True, bump: bool = True) -> Iterator[Any]:
        """One transaction; a write bumps the catalog version inside it (unless `bump` is
        false: lease bookkeeping changes nothing a reader caches)."""
        with self._lock:
            c = self._backend.begin(write)
            try:
                yield c
                if write and bump:
                    c.execute("UPDATE meta SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT) "
                              "WHERE key = 'catalog_version'")
                self._backend.commit()
                if write and bump:
                    self._seen = None      # our own change: recent_version reads it at once
            except BaseException:
                self._backend.rollback()
                raise

    def _next_id(self, c: Any, scope: str) -> int:
        row = c.execute("SELECT next_id FROM counters WHERE scope = ?", (scope,)).fetchone()
        nid = row[0] if row else 0
        c.execute("INSERT INTO counters VALUES (?, ?) ON CONFLICT (scope) DO UPDATE SET "
                  "next_id = excluded.next_id", (scope, nid + 1))
        return nid

    @staticmethod
    def _stamp(c: Any, db: str, name: str) -> None:
        """Mark datamap db.name changed by this transaction (its row, its visible segments
        or its rewrite switch): the rewrite index reads these marks, not the rows
        (SegmentStore.rewrite_marks). Every write of what an index entry is made from
        stamps in the same transaction."""
        c.execute(f"UPDATE datamaps SET changed = {_NEXT_VERSION} WHERE db = ? AND name = ?",
                  (db, name))

    @staticmethod
    def _stamp_table(c: Any, table: str) -> None:
        """Mark base table `table`'s live segments changed by this transaction."""
        c.execute(f"INSERT INTO base_changes VALUES (?, {_NEXT_VERSION}) ON CONFLICT (tbl) "
                  "DO UPDATE SET changed = excluded.changed", (table,))

    @staticmethod
    def _event(c: Any, db: str, name: str, kind: str, rows: int | None = None,
               seconds: float | None = None, detail: str = "") -> None:
        c.execute("INSERT INTO events (db, name, at, kind, rows, seconds, detail) "
                  "VALUES (?, ?, ?, ?, ?, ?, ?)", (db, name, time.time(), kind, rows, seconds,
                                                   detail))

    # -- settings the datamaps were computed under -----------------------------------------
    def setting(self, key: str) -> str | None:
        """A value kept in the catalog's `meta` table under "setting:<key>", or None."""
        with self._tx(write=False) as c:
            row = c.execute("SELECT value FROM meta WHERE key = ?", (f"setting:{key}",)
                            ).fetchone()
            return None if row is None else row[0]

    def set_setting(self, key: str, value: str) -> None:
        with self._tx() as c:
            c.execute("INSERT INTO meta VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET "
                      "value = excluded.value", (f"setting:{key}", value))

    # -- version -------------------------------------------------------------------------
    def version(self) -> int:
        """The catalog version: changes whenever anything in the catalog changes."""
        with self._tx(write=False) as c:
            v = int(c.execute("SELECT value FROM meta WHERE key = 'catalog_version'")
                    .fetchone()[0])
        self._seen = (v, time.monotonic())
        return v

    def recent_version(self, max_age: float = 1.0) -> int:
        """version() for the per-statement path (the event loop): no SQLite and no lock while
        the last reading is younger than max_age. Changes made through this Catalog are seen
        at once; another process's within max_age."""
        seen = self._seen
        if seen is not None and time.monotonic() - seen[1] < max_age:
            return seen[0]
        return self.version()

    def schema_version(self) -> int:
        with self._tx(write=False) as c:
            return self._backend.user_version(c)

    # -- datamaps ------------------------------------------------------------------------
    def create_datamap(self, db: str, name: str, *, provider: str, select_sql: str,
                       base_tables: Sequence[str], lazy: bool = False,
                       properties: Mapping[str, str] | None = None,
                       definition: DatamapDefinition | None = None,
                       original_sql: str | None = None) -> DatamapRecord:
        """New datamap, DISABLED until its first build is published."""
        with self._tx() as c:
            if c.execute("SELECT 1 FROM datamaps WHERE db = ? AND name = ?",
                         (db, name)).fetchone():
                raise CatalogError(f"Datamap {db}.{name} already exists", "42710")
            c.execute(
                "INSERT INTO datamaps (db, name, provider, select_sql, original_sql, "
                "base_tables, lazy, properties, definition, compiled_version, status, "
                "status_reason, created_at, changed) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
                f"?, {_NEXT_VERSION})",
                (db, name, provider, select_sql, original_sql or select_sql,
                 json.dumps(list(base_tables)), int(lazy),
                 json.dumps(dict(properties or {}), sort_keys=True),
                 definition_to_json(definition) if definition else None,
                 definition.version if definition else None, DatamapStatus.DISABLED,
                 "deferred rebuild: not built yet" if lazy else "not built yet", time.time()))
            c.execute("DELETE FROM counters WHERE scope = ?", (f"dm:{db}.{name}",))
            self._event(c, db, name, "created", detail=select_sql)
            row = c.execute("SELECT * FROM datamaps WHERE db = ? AND name = ?",
                            (db, name)).fetchone()
            return record_from_row(row)

    def get_datamap(self, db: str, name: str) -> DatamapRecord | None:
        with self._tx(write=False) as c:
            row = c.execute("SELECT * FROM datamaps WHERE db = ? AND name = ?",
                            (db, name)).fetchone()
            return record_from_row(row) if row else None

    def require_datamap(self, db: str, name: str) -> DatamapRecord:
        rec = self.get_datamap(db, name)
        if rec is None:
            raise CatalogError(f"Datamap {db}.{name} does not exist", "42S02")
        return rec

    def list_datamaps(self, db: str | None = None,
                      base_table: str | None = None) -> list[DatamapRecord]:
        """All datamaps, or those of a database, or those defined over `base_table`."""
        with self._tx(write=False) as c:
            if db is None:
                rows = c.execute("SELECT * FROM datamaps ORDER BY db, name").fetchall()
            else:
                rows = c.execute("SELECT * FROM datamaps WHERE db = ? ORDER BY name",
                                 (db,)).fetchall()
        recs = [record_from_row(r) for r in rows]
        if base_table is not None:
            recs = [r for r in recs if base_table in r.base_tables]
        return recs

    def datamap_by_table(self, table: str) -> DatamapRecord | None:
        """The datamap whose rows live in `table` ("db.<name>_table", or its storage table
        "db.<name>_table_segments"), if any."""
        db, _, tname = table.partition(".")
        tname = tname.removesuffix(STORAGE_SUFFIX)
        if not tname.endswith("_table"):
            return None
        return self.get_datamap(db, tname[: -len("_table")])

    def update_definition(self, db: str, name: str, definition: DatamapDefinition) -> None:
        with self._tx() as c:
            cur = c.execute("UPDATE datamaps SET definition = ?, compiled_version = ?, "
                            "base_tables = ? WHERE db = ? AND name = ?",
                            (definition_to_json(definition), definition.version,
                             json.dumps(list(definition.base_tables)), db, name))
            self._check_found(cur, db, name)
            self._stamp(c, db, name)

    def set_status(self, db: str, name: str, status: str, reason: str = "") -> None:
        if status not in (DatamapStatus.ENABLED, DatamapStatus.DISABLED):
            raise ValueError(f"bad datamap status {status!r}")
        with self._tx() as c:
            cur = c.execute("UPDATE datamaps SET status = ?, status_reason = ? "
                            "WHERE db = ? AND name = ?", (status, reason, db, name))
            self._check_found(cur, db, name)
            self._stamp(c, db, name)
            self._event(c, db, name, status.lower(), detail=reason)

    def invalidate_datamap(self, db: str, name: str, reason: str) -> list[str]:
        """The datamap's rows are wrong as a whole (computed under settings that no longer
        hold): hide every visible segment (MARKED_FOR_DELETE) and disable it, in one
        commit. The next REBUILD or refresh finds nothing visible and builds it anew.
        Returns the hidden segment ids."""
        with self._tx() as c:
            rows = c.execute("SELECT id FROM dm_segments WHERE db = ? AND name = ? AND "
                             "visible = 1 ORDER BY id", (db, name)).fetchall()
            c.execute("UPDATE dm_segments SET visible = 0, status = ? WHERE db = ? AND "
                      "name = ? AND visible = 1", (SEG_DELETED, db, name))
            cur = c.execute("UPDATE datamaps SET status = ?, status_reason = ? "
                            "WHERE db = ? AND name = ?", (DatamapStatus.DISABLED, reason, db, name))
            self._check_found(cur, db, name)
            self._stamp(c, db, name)
            self._event(c, db, name, "invalidated", detail=reason)
            return [str(r["id"]) for r in rows]

    def disable_on_table_change(self, table: str, reason: str) -> list[DatamapRecord]:
        """Disable every ENABLED lazy datamap over `table` (contract: any change to a base
        table disables a deferred datamap until its next REBUILD). Returns them."""
        changed = []
        with self._tx() as c:
            for row in c.execute("SELECT * FROM datamaps WHERE lazy = 1 AND status = ?",
                                 (DatamapStatus.ENABLED,)).fetchall():
                rec = record_from_row(row)
                if table in rec.base_tables:
                    c.execute("UPDATE datamaps SET status = ?, status_reason = ? WHERE db = ? "
                              "AND name = ?", (DatamapStatus.DISABLED, reason, rec.db, rec.name))
                    self._stamp(c, rec.db, rec.name)
                    self._event(c, rec.db, rec.name, "disabled", detail=reason)
                    changed.append(rec)
        return changed

    def drop_datamap(self, db: str, name: str) -> tuple[DatamapRecord, list[DatamapSegment]]:
        """Remove the datamap and its segments and history; returns what was removed so the
        caller can drop the datamap table."""
        with self._tx() as c:
            row = c.execute("SELECT * FROM datamaps WHERE db = ? AND name = ?",
                            (db, name)).fetchone()
            if row is None:
                raise CatalogError(f"Datamap {db}.{name} does not exist", "42S02")
            segs = [segment_from_row(r) for r in c.execute(
                "SELECT * FROM dm_segments WHERE db = ? AND name = ? ORDER BY id", (db, name))]
            c.execute("DELETE FROM datamaps WHERE db = ? AND name = ?", (db, name))
            c.execute(f"INSERT INTO datamap_drops VALUES (?, ?, {_NEXT_VERSION}) ON CONFLICT "
                      "(db, name) DO UPDATE SET changed = excluded.changed", (db, name))
            c.execute("DELETE FROM counters WHERE scope = ?", (f"dm:{db}.{name}",))
            # a datamap created again under this name starts with rewrite on
            c.execute("DELETE FROM meta WHERE key = ?", (_REWRITE_OFF + f"{db}.{name}",))
            return record_from_row(row), segs

    @staticmethod
    def _check_found(cur: Any, db: str, name: str) -> None:
        if cur.rowcount == 0:
            raise CatalogError(f"Datamap {db}.{name} does not exist", "42S02")


    # -- query rewrite switch (ALTER DATAMAP ... ENABLE | DISABLE QUERY REWRITE) ----------
    # Kept in `meta` rather than a datamaps column: no migration, and the catalog version
    # bump of the write makes every replica's rewriter index drop or take the datamap.
    def set_rewrite(self, db: str, name: str, on: bool, detail: str = "") -> bool:
        """Switch query rewrite for the datamap; False when it already was so. The change
        is a history event of the datamap."""
        key = _REWRITE_OFF + f"{db}.{name}"
        with self._tx() as c:
            if c.execute("SELECT 1 FROM datamaps WHERE db = ? AND name = ?",
                         (db, name)).fetchone() is None:
                raise CatalogError(f"Datamap {db}.{name} does not exist", "42S02")
            was_on = c.execute("SELECT 1 FROM meta WHERE key = ?", (key,)).fetchone() is None
            if was_on == on:
                return False
            if on:
                c.execute("DELETE FROM meta WHERE key = ?", (key,))
            else:
                c.execute("INSERT INTO meta VALUES (?, ?)", (key, str(time.time())))
            self._stamp(c, db, name)
            self._event(c, db, name, "rewrite_enabled" if on else "rewrite_disabled",
                        detail=detail)
            return True

    def rewrite_off(self) -> frozenset[str]:
        """"db.name" of the datamaps whose query rewrite is switched off."""
        with self._tx(write=False) as c:
            return frozenset(r[0][len(_REWRITE_OFF):] for r in c.execute(
                "SELECT key FROM meta WHERE key LIKE ?", (_REWRITE_OFF + "%",)))

    def rewrite_marks(self) -> tuple[int, dict[str, tuple[int, str]], dict[str, int],
                                     frozenset[str]]:
        """What tells the rewrite index which datamaps changed, in one read transaction and
        without reading definitions or segments: (catalog version, "db.name" -> (the
        catalog version of its last change, its base tables as JSON), base table -> the
        catalog version of the last change of its live segments, the datamaps whose query
        rewrite is off). Every write of what an index entry is made from stamps these
        marks in its transaction (_stamp, _stamp_table)."""
        with self._tx(write=False) as c:
            version = int(c.execute("SELECT value FROM meta WHERE key = 'catalog_version'")
                          .fetchone()[0])
            rows = {r[0]: (r[1], r[2]) for r in c.execute(
                "SELECT db || '.' || name, changed, base_tables FROM datamaps")}
            base = {r[0]: r[1] for r in c.execute("SELECT tbl, changed FROM base_changes")}
            off = frozenset(r[0][len(_REWRITE_OFF):] for r in c.execute(
                "SELECT key FROM meta WHERE key LIKE ?", (_REWRITE_OFF + "%",)))
        return version, rows, base, off

    def rewrite_changes(self, since: int) -> tuple[int, dict[str, tuple[int, str, bool]],
                                                   dict[str, int], set[str]]:
        """The change marks written after catalog version `since` (-1: all), in one read
        transaction, read by the marks' indexes (the cost is that of what changed):
        (catalog version, "db.name" -> (the version of its last change, its base tables as
        JSON, whether its query rewrite is off; the oldest first, which the index warms
        first), base table -> the version of the last
        change of its live segments, "db.name" of the datamaps dropped). The version is
        read first: every write stamped at or below it has committed, so reading again
        from it misses nothing (a write between the reads may be read twice)."""
        with self._tx(write=False) as c:
            version = int(c.execute("SELECT value FROM meta WHERE key = 'catalog_version'")
                          .fetchone()[0])
            dropped = {r[0] for r in c.execute(
                "SELECT db || '.' || name FROM datamap_drops WHERE changed > ?", (since,))}
            rows = {r[0]: (r[1], r[2], r[3] is not None) for r in c.execute(
                "SELECT d.db || '.' || d.name, d.changed, d.base_tables, m.key FROM datamaps d "
                f"LEFT JOIN meta m ON m.key = '{_REWRITE_OFF}' || d.db || '.' || d.name "
                "WHERE d.changed > ? ORDER BY d.created_at, d.db, d.name", (since,))}
            base = {r[0]: r[1] for r in c.execute(
                "SELECT tbl, changed FROM base_changes WHERE changed > ?", (since,))}
        return version, rows, base, dropped

    # -- history -------------------------------------------------------------------------
    def events(self, db: str, name: str) -> list[Event]:
        with self._tx(write=False) as c:
            return [Event(r["seq"], r["at"], r["kind"], r["rows"], r["seconds"], r["detail"])
                    for r in c.execute("SELECT * FROM events WHERE db = ? AND name = ? "
                                       "ORDER BY seq", (db, name))]

    def segment_kinds(self, db: str, name: str) -> dict[str, str]:
        """How each published segment was made: built, refreshed or compacted."""
        with self._tx(write=False) as c:
            return {str(r["id"]): r["kind"] for r in c.execute(
                "SELECT id, kind FROM dm_segments WHERE db = ? AND name = ? AND kind IS NOT "
                "NULL ORDER BY id", (db, name))}

    def record_event(self, db: str, name: str, kind: str, rows: int | None = None,
                     seconds: float | None = None, detail: str = "") -> None:
        with self._tx() as c:
            self._event(c, db, name, kind, rows, seconds, detail)

