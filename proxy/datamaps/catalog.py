"""The datamap catalog: one transactional store (SQLite under the state directory).

It holds datamap definitions and status, base-table segments (the files one load added),
datamap segments (one partition of `<name>_table` each, with CarbonData's extraInfo
mapping of the base segments it covers, and a `visible` flag), an event history, and a
catalog version that every change bumps (the rewriter caches on it).

Publishing a refresh is one transaction (`publish_segment`): the new segment becomes visible
and the segments it supersedes stop being visible at the same commit, so a reader sees the
datamap before or after a refresh, never half of it.

Methods are synchronous and short; asyncio callers run them in a thread. One connection is
shared under a lock; WAL mode and a busy timeout let other processes (replicas, tools) use
the same file. The schema is versioned with PRAGMA user_version and a list of migrations.
"""
from __future__ import annotations

import dataclasses
import json
import os
import sqlite3
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from typing import Iterator, Mapping, Sequence

from rewriter.api import DatamapDefinition, StoredColumn



class DatamapStatus(StrEnum):
    """Whether a datamap may answer queries (SHOW DATAMAP's DataMap Status). Not to be
    confused with maintenance.RefreshOutcome, what a refresh did."""
    ENABLED = "ENABLED"
    DISABLED = "DISABLED"


# Base segment status.
SEG_SUCCESS = "SUCCESS"
SEG_DELETED = "MARKED_FOR_DELETE"
# Datamap segment status (SEG_SUCCESS and SEG_DELETED too).
SEG_IN_PROGRESS = "INSERT_IN_PROGRESS"
SEG_COMPACTED = "COMPACTED"
SEG_FAILED = "FAILED"

SOURCES = ("proxy-load", "discovered")

# MIGRATIONS[i] takes the schema from version i to i + 1. Append only.
MIGRATIONS: list[str] = [
    """
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    INSERT INTO meta VALUES ('catalog_version', '0');
    CREATE TABLE counters (scope TEXT PRIMARY KEY, next_id INTEGER NOT NULL);
    CREATE TABLE datamaps (
        db TEXT NOT NULL, name TEXT NOT NULL,
        provider TEXT NOT NULL,
        select_sql TEXT NOT NULL,
        original_sql TEXT NOT NULL,
        base_tables TEXT NOT NULL,
        lazy INTEGER NOT NULL,
        properties TEXT NOT NULL,
        definition TEXT,
        compiled_version INTEGER,
        status TEXT NOT NULL CHECK (status IN ('ENABLED', 'DISABLED')),
        status_reason TEXT NOT NULL DEFAULT '',
        created_at REAL NOT NULL,
        PRIMARY KEY (db, name));
    CREATE TABLE base_segments (
        tbl TEXT NOT NULL, id INTEGER NOT NULL,
        files TEXT NOT NULL, rows INTEGER,
        load_start REAL NOT NULL, load_seconds REAL NOT NULL,
        source TEXT NOT NULL CHECK (source IN ('proxy-load', 'discovered')),
        status TEXT NOT NULL,
        PRIMARY KEY (tbl, id));
    CREATE TABLE dm_segments (
        db TEXT NOT NULL, name TEXT NOT NULL, id INTEGER NOT NULL,
        files TEXT NOT NULL DEFAULT '[]', rows INTEGER,
        extra_info TEXT NOT NULL,
        visible INTEGER NOT NULL DEFAULT 0,
        status TEXT NOT NULL,
        dropped INTEGER NOT NULL DEFAULT 0,
        load_start REAL NOT NULL, load_seconds REAL,
        PRIMARY KEY (db, name, id),
        FOREIGN KEY (db, name) REFERENCES datamaps (db, name) ON DELETE CASCADE);
    CREATE TABLE events (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        db TEXT NOT NULL, name TEXT NOT NULL, at REAL NOT NULL, kind TEXT NOT NULL,
        rows INTEGER, seconds REAL, detail TEXT NOT NULL DEFAULT '',
        FOREIGN KEY (db, name) REFERENCES datamaps (db, name) ON DELETE CASCADE);
    CREATE INDEX events_by_datamap ON events (db, name, seq);
    """,
    # 1 -> 2: how each published datamap segment was made (built, refreshed, compacted),
    # which auto-compaction needs; before, it was read back from the history's text.
    """
    ALTER TABLE dm_segments ADD COLUMN kind TEXT;
    UPDATE dm_segments SET kind = (
        SELECT e.kind FROM events e
        WHERE e.db = dm_segments.db AND e.name = dm_segments.name
          AND e.kind IN ('built', 'refreshed', 'compacted')
          AND (e.detail = 'segment ' || dm_segments.id
               OR e.detail LIKE 'segment ' || dm_segments.id || ' %')
        ORDER BY e.seq DESC LIMIT 1)
    """,
]
SCHEMA_VERSION = len(MIGRATIONS)


class CatalogError(Exception):
    """A catalog request that cannot be served; `sqlstate` per contract.md."""

    def __init__(self, message: str, sqlstate: str = "HY000"):
        super().__init__(message)
        self.sqlstate = sqlstate


@dataclass(frozen=True)
class DatamapRecord:
    db: str
    name: str
    provider: str
    select_sql: str
    original_sql: str
    base_tables: tuple[str, ...]
    lazy: bool
    properties: Mapping[str, str]
    definition: DatamapDefinition | None
    status: str
    status_reason: str
    created_at: float

    @property
    def qualified(self) -> str:
        return f"{self.db}.{self.name}"

    @property
    def table(self) -> str:
        return f"{self.db}.{self.name}_table"

    @property
    def compiled_version(self) -> int | None:
        return self.definition.version if self.definition else None


@dataclass(frozen=True)
class BaseSegment:
    table: str
    id: str
    files: tuple[str, ...]
    rows: int | None
    load_start: float
    load_seconds: float
    source: str
    status: str


@dataclass(frozen=True)
class DatamapSegment:
    db: str
    name: str
    id: str
    files: tuple[str, ...]
    rows: int | None
    extra_info: Mapping[str, tuple[str, ...]]   # {"db.table": ("0", "1")}
    visible: bool
    status: str
    dropped: bool
    load_start: float
    load_seconds: float | None
    kind: str | None = None     # built | refreshed | compacted, once published


@dataclass(frozen=True)
class Event:
    seq: int
    at: float
    kind: str          # created, built, refreshed, compacted, enabled, disabled, failed, ...
    rows: int | None
    seconds: float | None
    detail: str


def definition_to_json(definition: DatamapDefinition) -> str:
    return json.dumps(dataclasses.asdict(definition), sort_keys=True)


def definition_from_json(text: str) -> DatamapDefinition:
    data = json.loads(text)
    data["columns"] = tuple(StoredColumn(**c) for c in data["columns"])
    data["base_tables"] = tuple(data["base_tables"])
    data["join_kinds"] = tuple(data.get("join_kinds", ()))
    return DatamapDefinition(**data)


class Catalog:
    """Open (and migrate) the catalog at `path` ("<state dir>/catalog.db" by convention)."""

    def __init__(self, path: str | os.PathLike[str], busy_timeout_ms: int = 10_000):
        self.path = os.fspath(path)
        if self.path != ":memory:":
            os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        self._lock = threading.RLock()
        self._seen: tuple[int, float] | None = None   # (version, when read): recent_version
        self._conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False,
                                     timeout=busy_timeout_ms / 1000)
        self._conn.row_factory = sqlite3.Row
        self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        self._conn.execute("PRAGMA journal_mode = WAL")
        self._conn.execute("PRAGMA foreign_keys = ON")
        self._migrate()

    @classmethod
    def in_state_dir(cls, state_dir: str | os.PathLike[str]) -> "Catalog":
        return cls(os.path.join(os.fspath(state_dir), "catalog.db"))

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> "Catalog":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- plumbing ------------------------------------------------------------------------
    def _migrate(self) -> None:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                current = self._conn.execute("PRAGMA user_version").fetchone()[0]
                if current > SCHEMA_VERSION:
                    raise CatalogError(
                        f"Catalog {self.path} has schema version {current}, newer than this "
                        f"program supports ({SCHEMA_VERSION})", "HY000")
                for version in range(current, SCHEMA_VERSION):
                    for stmt in MIGRATIONS[version].split(";"):
                        if stmt.strip():
                            self._conn.execute(stmt)
                    self._conn.execute(f"PRAGMA user_version = {version + 1}")
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise

    @contextmanager
    def _tx(self, write: bool = True) -> Iterator[sqlite3.Connection]:
        """One transaction; a write bumps the catalog version inside it."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield self._conn
                if write:
                    self._conn.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 "
                                       "WHERE key = 'catalog_version'")
                self._conn.execute("COMMIT")
                if write:
                    self._seen = None      # our own change: recent_version reads it at once
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise

    def _next_id(self, c: sqlite3.Connection, scope: str) -> int:
        row = c.execute("SELECT next_id FROM counters WHERE scope = ?", (scope,)).fetchone()
        nid = row[0] if row else 0
        c.execute("INSERT INTO counters VALUES (?, ?) ON CONFLICT (scope) DO UPDATE SET "
                  "next_id = excluded.next_id", (scope, nid + 1))
        return nid

    @staticmethod
    def _event(c: sqlite3.Connection, db: str, name: str, kind: str, rows: int | None = None,
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
        with self._lock:
            return self._conn.execute("PRAGMA user_version").fetchone()[0]

    # -- datamaps ------------------------------------------------------------------------
    @staticmethod
    def _record(row: sqlite3.Row) -> DatamapRecord:
        return DatamapRecord(
            db=row["db"], name=row["name"], provider=row["provider"],
            select_sql=row["select_sql"], original_sql=row["original_sql"],
            base_tables=tuple(json.loads(row["base_tables"])), lazy=bool(row["lazy"]),
            properties=json.loads(row["properties"]),
            definition=definition_from_json(row["definition"]) if row["definition"] else None,
            status=row["status"], status_reason=row["status_reason"],
            created_at=row["created_at"])

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
                "status_reason, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
            return self._record(row)

    def get_datamap(self, db: str, name: str) -> DatamapRecord | None:
        with self._tx(write=False) as c:
            row = c.execute("SELECT * FROM datamaps WHERE db = ? AND name = ?",
                            (db, name)).fetchone()
            return self._record(row) if row else None

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
        recs = [self._record(r) for r in rows]
        if base_table is not None:
            recs = [r for r in recs if base_table in r.base_tables]
        return recs

    def datamap_by_table(self, table: str) -> DatamapRecord | None:
        """The datamap whose rows live in `table` ("db.<name>_table"), if any."""
        db, _, tname = table.partition(".")
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

    def set_status(self, db: str, name: str, status: str, reason: str = "") -> None:
        if status not in (DatamapStatus.ENABLED, DatamapStatus.DISABLED):
            raise ValueError(f"bad datamap status {status!r}")
        with self._tx() as c:
            cur = c.execute("UPDATE datamaps SET status = ?, status_reason = ? "
                            "WHERE db = ? AND name = ?", (status, reason, db, name))
            self._check_found(cur, db, name)
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
            self._event(c, db, name, "invalidated", detail=reason)
            return [str(r["id"]) for r in rows]

    def disable_on_table_change(self, table: str, reason: str) -> list[DatamapRecord]:
        """Disable every ENABLED lazy datamap over `table` (contract: any change to a base
        table disables a deferred datamap until its next REBUILD). Returns them."""
        changed = []
        with self._tx() as c:
            for row in c.execute("SELECT * FROM datamaps WHERE lazy = 1 AND status = ?",
                                 (DatamapStatus.ENABLED,)).fetchall():
                rec = self._record(row)
                if table in rec.base_tables:
                    c.execute("UPDATE datamaps SET status = ?, status_reason = ? WHERE db = ? "
                              "AND name = ?", (DatamapStatus.DISABLED, reason, rec.db, rec.name))
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
            segs = [self._segment(r) for r in c.execute(
                "SELECT * FROM dm_segments WHERE db = ? AND name = ? ORDER BY id", (db, name))]
            c.execute("DELETE FROM datamaps WHERE db = ? AND name = ?", (db, name))
            c.execute("DELETE FROM counters WHERE scope = ?", (f"dm:{db}.{name}",))
            return self._record(row), segs

    @staticmethod
    def _check_found(cur: sqlite3.Cursor, db: str, name: str) -> None:
        if cur.rowcount == 0:
            raise CatalogError(f"Datamap {db}.{name} does not exist", "42S02")

    # -- base-table segments -------------------------------------------------------------
    @staticmethod
    def _base(row: sqlite3.Row) -> BaseSegment:
        return BaseSegment(table=row["tbl"], id=str(row["id"]),
                           files=tuple(json.loads(row["files"])), rows=row["rows"],
                           load_start=row["load_start"], load_seconds=row["load_seconds"],
                           source=row["source"], status=row["status"])

    def add_base_segment(self, table: str, files: Sequence[str], *, rows: int | None = None,
                         source: str = "proxy-load", load_start: float | None = None,
                         load_seconds: float = 0.0) -> BaseSegment:
        """Record that one load added `files` to `table`; returns the new segment."""
        if source not in SOURCES:
            raise ValueError(f"bad segment source {source!r}")
        with self._tx() as c:
            sid = self._next_id(c, f"base:{table}")
            c.execute("INSERT INTO base_segments VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                      (table, sid, json.dumps(sorted(files)), rows,
                       time.time() if load_start is None else load_start, load_seconds,
                       source, SEG_SUCCESS))
            return self._base(c.execute("SELECT * FROM base_segments WHERE tbl = ? AND id = ?",
                                        (table, sid)).fetchone())

    def base_segments(self, table: str, live_only: bool = True) -> list[BaseSegment]:
        with self._tx(write=False) as c:
            sql = "SELECT * FROM base_segments WHERE tbl = ?"
            if live_only:
                sql += f" AND status = '{SEG_SUCCESS}'"
            return [self._base(r) for r in c.execute(sql + " ORDER BY id", (table,))]

    def base_files(self, table: str) -> set[str]:
        """Files of the live segments of `table`: what the catalog believes the table holds."""
        return {f for s in self.base_segments(table) for f in s.files}

    def mark_base_deleted(self, table: str, ids: Sequence[str] | None = None) -> int:
        """Mark segments (all live ones by default) MARKED_FOR_DELETE, e.g. after INSERT
        OVERWRITE or TRUNCATE; returns how many changed."""
        with self._tx() as c:
            if ids is None:
                cur = c.execute("UPDATE base_segments SET status = ? WHERE tbl = ? AND "
                                "status = ?", (SEG_DELETED, table, SEG_SUCCESS))
            else:
                cur = c.executemany("UPDATE base_segments SET status = ? WHERE tbl = ? AND "
                                    "id = ?", [(SEG_DELETED, table, int(i)) for i in ids])
            return cur.rowcount

    def forget_base_table(self, table: str) -> None:
        """The base table was dropped: forget its segments and counter."""
        with self._tx() as c:
            c.execute("DELETE FROM base_segments WHERE tbl = ?", (table,))
            c.execute("DELETE FROM counters WHERE scope = ?", (f"base:{table}",))

    # -- datamap segments ----------------------------------------------------------------
    @staticmethod
    def _segment(row: sqlite3.Row) -> DatamapSegment:
        return DatamapSegment(
            db=row["db"], name=row["name"], id=str(row["id"]),
            files=tuple(json.loads(row["files"])), rows=row["rows"],
            extra_info={k: tuple(v) for k, v in json.loads(row["extra_info"]).items()},
            visible=bool(row["visible"]), status=row["status"], dropped=bool(row["dropped"]),
            load_start=row["load_start"], load_seconds=row["load_seconds"], kind=row["kind"])

    def begin_segment(self, db: str, name: str,
                      extra_info: Mapping[str, Sequence[str]]) -> str:
        """Reserve a datamap segment id (its partition value) for a job about to write it.
        Not visible until `publish_segment`."""
        with self._tx() as c:
            if not c.execute("SELECT 1 FROM datamaps WHERE db = ? AND name = ?",
                             (db, name)).fetchone():
                raise CatalogError(f"Datamap {db}.{name} does not exist", "42S02")
            sid = self._next_id(c, f"dm:{db}.{name}")
            info = {t: sorted((str(i) for i in ids), key=int) for t, ids in extra_info.items()}
            c.execute("INSERT INTO dm_segments (db, name, id, extra_info, status, load_start) "
                      "VALUES (?, ?, ?, ?, ?, ?)",
                      (db, name, sid, json.dumps(info, sort_keys=True), SEG_IN_PROGRESS,
                       time.time()))
            return str(sid)

    def publish_segment(self, db: str, name: str, segment_id: str, *, rows: int,
                        files: Sequence[str] = (), seconds: float | None = None,
                        supersedes: Sequence[str] = (), kind: str = "refreshed",
                        enable: bool = True) -> None:
        """Make the segment visible and hide `supersedes` in one commit. kind: built (full
        build: superseded segments become MARKED_FOR_DELETE), refreshed (incremental append),
        compacted (superseded segments become COMPACTED)."""
        if kind not in ("built", "refreshed", "compacted"):
            raise ValueError(f"unknown segment kind {kind!r}")
        gone = SEG_COMPACTED if kind == "compacted" else SEG_DELETED
        with self._tx() as c:
            row = c.execute("SELECT * FROM dm_segments WHERE db = ? AND name = ? AND id = ?",
                            (db, name, int(segment_id))).fetchone()
            if row is None or row["status"] != SEG_IN_PROGRESS:
                raise CatalogError(f"Segment {segment_id} of datamap {db}.{name} is not being "
                                   "written", "HY000")
            if kind == "compacted":
                hidden = [i for i in supersedes if not c.execute(
                    "SELECT visible FROM dm_segments WHERE db = ? AND name = ? AND id = ?",
                    (db, name, int(i))).fetchone()[0]]
                if hidden:
                    raise CatalogError(
                        f"Compaction of datamap {db}.{name} merged segments "
                        f"{', '.join(hidden)}, which were rebuilt or invalidated meanwhile; "
                        "nothing was compacted", "HY000")
            if seconds is None:
                seconds = time.time() - row["load_start"]
            c.execute("UPDATE dm_segments SET visible = 1, status = ?, rows = ?, files = ?, "
                      "load_seconds = ?, kind = ? WHERE db = ? AND name = ? AND id = ?",
                      (SEG_SUCCESS, rows, json.dumps(list(files)), seconds, kind, db, name,
                       int(segment_id)))
            for old in supersedes:
                c.execute("UPDATE dm_segments SET visible = 0, status = ? WHERE db = ? AND "
                          "name = ? AND id = ?", (gone, db, name, int(old)))
            self._event(c, db, name, kind, rows, seconds,
                        f"segment {segment_id}" + (f" replaces {','.join(supersedes)}"
                                                   if supersedes else ""))
            if enable:
                c.execute("UPDATE datamaps SET status = ?, status_reason = '' WHERE db = ? "
                          "AND name = ?", (DatamapStatus.ENABLED, db, name))

    def fail_segment(self, db: str, name: str, segment_id: str, reason: str,
                     disable: bool = True) -> None:
        """The job writing the segment failed: never show it; disable the datamap (a failed
        refresh must not leave a datamap serving stale or partial data)."""
        with self._tx() as c:
            c.execute("UPDATE dm_segments SET visible = 0, status = ? WHERE db = ? AND "
                      "name = ? AND id = ?", (SEG_FAILED, db, name, int(segment_id)))
            self._event(c, db, name, "failed", detail=f"segment {segment_id}: {reason}")
            if disable:
                c.execute("UPDATE datamaps SET status = ?, status_reason = ? WHERE db = ? AND "
                          "name = ?", (DatamapStatus.DISABLED, reason, db, name))

    def mark_dropped(self, db: str, name: str, segment_ids: Sequence[str]) -> None:
        """Their partitions were removed from the datamap table."""
        with self._tx() as c:
            c.executemany("UPDATE dm_segments SET dropped = 1, visible = 0 WHERE db = ? AND "
                          "name = ? AND id = ?", [(db, name, int(i)) for i in segment_ids])

    def segments(self, db: str, name: str) -> list[DatamapSegment]:
        """All segments of the datamap, newest first."""
        with self._tx(write=False) as c:
            return [self._segment(r) for r in c.execute(
                "SELECT * FROM dm_segments WHERE db = ? AND name = ? ORDER BY id DESC",
                (db, name))]

    def visible_segments(self, db: str, name: str) -> list[DatamapSegment]:
        """What readers may see, oldest first."""
        return sorted((s for s in self.segments(db, name) if s.visible), key=lambda s: int(s.id))

    def garbage_segments(self, db: str, name: str) -> list[DatamapSegment]:
        """Invisible segments whose partitions may still exist (superseded or failed)."""
        return [s for s in self.segments(db, name)
                if not s.visible and not s.dropped and s.status != SEG_IN_PROGRESS]

    def covered_base_segments(self, db: str, name: str) -> dict[str, set[str]]:
        """Base segment ids (per base table) the visible datamap segments were built from."""
        covered: dict[str, set[str]] = {}
        for seg in self.visible_segments(db, name):
            for table, ids in seg.extra_info.items():
                covered.setdefault(table, set()).update(ids)
        return covered

    def pending_base_segments(self, db: str, name: str) -> dict[str, list[BaseSegment]]:
        """Live base segments of each base table that no visible datamap segment covers."""
        rec = self.require_datamap(db, name)
        covered = self.covered_base_segments(db, name)
        return {t: [s for s in self.base_segments(t) if s.id not in covered.get(t, set())]
                for t in rec.base_tables}

    def covers_deleted_base_segments(self, db: str, name: str) -> bool:
        """True when a visible segment was built from base segments that are no longer live
        (INSERT OVERWRITE, TRUNCATE, ...): its rows are stale and only a full rebuild fixes
        that."""
        for table, ids in self.covered_base_segments(db, name).items():
            live = {s.id for s in self.base_segments(table)}
            if ids - live:
                return True
        return False

    def is_in_sync(self, db: str, name: str) -> bool:
        """ENABLED and every live base segment is covered."""
        rec = self.get_datamap(db, name)
        if rec is None or rec.status != DatamapStatus.ENABLED:
            return False
        return (not any(self.pending_base_segments(db, name).values())
                and not self.covers_deleted_base_segments(db, name))

    def unavailable_reason(self, db: str, name: str) -> str | None:
        """Why the datamap may not answer queries now (one line, for EXPLAIN), or None when
        it is ENABLED and in sync (the same test as is_in_sync)."""
        rec = self.get_datamap(db, name)
        if rec is None:
            return "datamap does not exist"
        if rec.status != DatamapStatus.ENABLED:
            return f"datamap is DISABLED: {_one_line(rec.status_reason) or 'no reason recorded'}"
        pending = {t: segs for t, segs in self.pending_base_segments(db, name).items() if segs}
        if pending:
            return "datamap is not in sync: " + "; ".join(
                f"segment{'s' if len(segs) > 1 else ''} {', '.join(s.id for s in segs)} of {t}"
                for t, segs in pending.items()) + " not refreshed yet"
        if self.covers_deleted_base_segments(db, name):
            return ("datamap is not in sync: it holds rows of base segments that were "
                    "overwritten or deleted; a rebuild is due")
        return None

    def sync_status(self, db: str, name: str) -> dict[str, str] | None:
        """SHOW DATAMAP's Sync Status: last synchronised base segment per base table and the
        end time of the newest visible segment; None before the first build."""
        rec = self.require_datamap(db, name)
        visible = self.visible_segments(db, name)
        if not visible:
            return None
        covered = self.covered_base_segments(db, name)
        out = {t: (str(max(int(i) for i in covered[t])) if covered.get(t) else "NA")
               for t in rec.base_tables}
        last = max(visible, key=lambda s: s.load_start + (s.load_seconds or 0))
        out["loadEndTime"] = format_time(last.load_start + (last.load_seconds or 0))
        return out

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


def _one_line(text: str, limit: int = 300) -> str:
    """A status reason fit for one output line (reasons may hold a Spark error's text)."""
    first = next((ln.strip() for ln in (text or "").splitlines() if ln.strip()), "")
    return first if len(first) <= limit else first[: limit - 3] + "..."


def format_time(epoch: float) -> str:
    """Timestamps as Spark prints them: local time, milliseconds."""
    t = time.localtime(epoch)
    return time.strftime("%Y-%m-%d %H:%M:%S", t) + f".{int(epoch * 1000) % 1000:03d}"
