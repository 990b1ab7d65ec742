"""External-format tables in the datamap catalog (SQLite; tables external_tables and
external_segments, proxy/datamaps/catalog/schema.py). Every change is one catalog
transaction, which bumps the catalog version as any other change does."""
from __future__ import annotations

import json
import time
from dataclasses import dataclass

from proxy.datamaps.catalog.store import Catalog

LIVE, DELETED, COMPACTED = "Success", "Marked for Delete", "Compacted"


@dataclass(frozen=True)
class ExternalTable:
    table: str                              # "db.t": the view users query
    source: str                             # "db.<hidden csv table>"
    location: str                           # local directory of the segment link dirs
    fields: tuple[tuple[str, str], ...]     # (name, type), in the view's order
    header: tuple[str, ...]                 # the files' columns
    properties: dict[str, str]              # format, csv.*

    def layout(self) -> list[tuple[str, str]]:
        """The source table's columns: the header, typed by the fields (others STRING)."""
        types = dict(self.fields)
        return [(h, types.get(h, "string")) for h in self.header]


@dataclass(frozen=True)
class MappedFile:
    link: str          # the path Spark reads: file:/<location>/seg_<id>/<name>
    target: str        # the original file (absolute local path)
    size: int


@dataclass(frozen=True)
class ExternalSegment:
    table: str
    id: int
    status: str
    paths: tuple[str, ...]
    files: tuple[MappedFile, ...]
    size: int
    rows: int | None
    load_start: float
    load_seconds: float
    merged_into: int | None = None


def _table(row) -> ExternalTable:
    return ExternalTable(row["tbl"], row["source"], row["location"],
                         tuple(tuple(f) for f in json.loads(row["fields"])),
                         tuple(json.loads(row["header"])), json.loads(row["properties"]))


def _segment(row) -> ExternalSegment:
    return ExternalSegment(row["tbl"], row["id"], row["status"], tuple(json.loads(row["paths"])),
                           tuple(MappedFile(*f) for f in json.loads(row["files"])), row["size"],
                           row["rows"], row["load_start"], row["load_seconds"],
                           row["merged_into"])


class ExternalStore:
    def __init__(self, catalog: Catalog):
        self.catalog = catalog

    def _tx(self, write: bool = True):
        return self.catalog._tx(write)       # one lock and version for the whole catalog

    def get(self, table: str) -> ExternalTable | None:
        with self._tx(write=False) as c:
            row = c.execute("SELECT * FROM external_tables WHERE tbl = ?", (table,)).fetchone()
        return None if row is None else _table(row)

    def owner_of_source(self, source: str) -> str | None:
        """The external table whose hidden source table `source` is, or None."""
        with self._tx(write=False) as c:
            row = c.execute("SELECT tbl FROM external_tables WHERE source = ?",
                            (source,)).fetchone()
        return None if row is None else row[0]

    def names(self) -> list[str]:
        with self._tx(write=False) as c:
            return [r[0] for r in c.execute("SELECT tbl FROM external_tables ORDER BY tbl")]

    def add(self, t: ExternalTable) -> None:
        with self._tx() as c:
            c.execute("INSERT INTO external_tables VALUES (?, ?, ?, ?, ?, ?, ?)",
                      (t.table, t.source, t.location, json.dumps(t.fields), json.dumps(t.header),
                       json.dumps(t.properties, sort_keys=True), time.time()))

    def update(self, t: ExternalTable, old_name: str | None = None) -> None:
        """Store `t`'s definition; `old_name`: it was renamed from that (segments follow)."""
        with self._tx() as c:
            c.execute("UPDATE external_tables SET tbl = ?, fields = ?, header = ?, "
                      "properties = ? WHERE tbl = ?",
                      (t.table, json.dumps(t.fields), json.dumps(t.header),
                       json.dumps(t.properties, sort_keys=True), old_name or t.table))
            if old_name:
                c.execute("UPDATE external_segments SET tbl = ? WHERE tbl = ?",
                          (t.table, old_name))

    def remove(self, table: str) -> None:
        with self._tx() as c:
            c.execute("DELETE FROM external_segments WHERE tbl = ?", (table,))
            c.execute("DELETE FROM external_tables WHERE tbl = ?", (table,))

    def segments(self, table: str, live_only: bool = False) -> list[ExternalSegment]:
        """Newest first."""
        sql = "SELECT * FROM external_segments WHERE tbl = ?"
        if live_only:
            sql += f" AND status = '{LIVE}'"
        with self._tx(write=False) as c:
            return [_segment(r) for r in c.execute(sql + " ORDER BY id DESC", (table,))]

    def next_id(self, table: str) -> int:
        with self._tx(write=False) as c:
            row = c.execute("SELECT max(id) FROM external_segments WHERE tbl = ?",
                            (table,)).fetchone()
        return 0 if row[0] is None else row[0] + 1

    def add_segment(self, seg: ExternalSegment, replaces: tuple[int, ...] = ()) -> None:
        """Publish `seg`; `replaces`: segments it compacts, marked COMPACTED in the same
        transaction (so the files are never counted twice nor missed)."""
        with self._tx() as c:
            c.execute("INSERT INTO external_segments VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                      (seg.table, seg.id, seg.status, json.dumps(seg.paths),
                       json.dumps([[f.link, f.target, f.size] for f in seg.files]),
                       len(seg.files), seg.size, seg.rows, seg.load_start, seg.load_seconds,
                       None))
            for old in replaces:
                c.execute("UPDATE external_segments SET status = ?, merged_into = ? "
                          "WHERE tbl = ? AND id = ?", (COMPACTED, seg.id, seg.table, old))

    def mark_deleted(self, table: str, ids: list[int]) -> None:
        with self._tx() as c:
            c.executemany("UPDATE external_segments SET status = ? WHERE tbl = ? AND id = ?",
                          [(DELETED, table, i) for i in ids])
