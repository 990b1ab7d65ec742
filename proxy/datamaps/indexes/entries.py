"""IndexStore: index datamaps and their per-file entries in the catalog (SQLite, the
tables of catalog_schema's index migration), and what the query side reads of them.

Read path (the query side, on every query on an indexed table): `indexes_on`,
`file_stats`, `file_identity` answer from memory. The cache of a table is dropped when
the store's own writes change it, and when another process's write bumped the catalog's
`index_version` (read at most once a second).

Values: minmax bounds are kept as JSON in the column's Spark type's string form where
JSON has no type (dates, timestamps, decimals: Spark's CAST AS STRING, in the zone the
index was built in) and decoded here into rewriter/filestats's Python values. Bloom bits
are kept as rewriter/bloom.pack made them and unpacked on first use.

Size: one file of a minmax index is a row with ~40 bytes of JSON per column; one bloom
column of one file is m/8 bytes (BLOOM_SIZE n, BLOOM_FPP p: m = -n ln p / ln 2^2, so
1M values at 0.00001 is 2.9 MB, and a near-half-full filter does not compress). 200
files x 100 minmax columns + one bloom column at 1M values: ~0.8 MB + 200 x 2.9 MB =
~0.6 GB; [indexes] max_bloom_bytes (16 MB per filter by default) bounds one filter.
"""
from __future__ import annotations

import datetime
import decimal
import json
import logging
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from proxy.datamaps.catalog.records import CatalogError
from rewriter.prune import ColumnStats, FileStats, bloom

log = logging.getLogger("proxy.indexes")

ENABLED, DISABLED = "ENABLED", "DISABLED"
_VERSION_KEY = "index_version"


@dataclass(frozen=True)
class IndexInfo:
    db: str
    name: str
    table: str                                    # "db.t", lower-cased
    kind: str                                     # minmax | bloomfilter
    columns: tuple[str, ...]
    properties: dict = field(default_factory=dict)
    enabled: bool = True
    column_types: tuple[tuple[str, str], ...] = ()
    status_reason: str = ""
    built_at: float | None = None

    @property
    def qualified(self) -> str:
        return f"{self.db}.{self.name}"


@dataclass(frozen=True)
class Entry:
    """One file of one index, as the build job made it (pipeline/indexes.FileIndex)."""
    path: str
    size: int | None
    mtime_ns: int | None
    rows: int
    stats: Mapping[str, tuple[Any, Any, int]] = field(default_factory=dict)
    blooms: Mapping[str, tuple[int, int, bytes]] = field(default_factory=dict)  # m, k, packed


class _LazyBloom:
    """rewriter/prune/filestats.Membership over stored bits, unpacked on first use."""
    __slots__ = ("_type", "_m", "_k", "_blob", "_bloom")

    def __init__(self, spark_type: str, m: int, k: int, blob: bytes):
        self._type, self._m, self._k, self._blob, self._bloom = spark_type, m, k, blob, None

    def might_contain(self, value: Any) -> bool:
        if self._bloom is None:
            self._bloom = bloom.Bloom(self._type, self._m, self._k, bloom.unpack(self._blob))
        return self._bloom.might_contain(value)


def decode(value: Any, spark_type: str) -> Any:
    """A stored bound -> the Python value rewriter/filestats promises; None (unknown) when
    Python has no such value (a date past year 9999)."""
    try:
        return _decode(value, spark_type)
    except (ValueError, ArithmeticError):
        return None


def _decode(value: Any, spark_type: str) -> Any:
    if value is None:
        return None
    t = spark_type.lower()
    if t == "date":
        return datetime.date.fromisoformat(value)
    if t in ("timestamp", "timestamp_ntz"):
        return datetime.datetime.fromisoformat(value)
    if t.startswith("decimal("):
        return decimal.Decimal(value)
    if t in ("float", "double"):
        return float(value)
    return value


def _info(row) -> IndexInfo:
    cols = json.loads(row["columns"])
    return IndexInfo(row["db"], row["name"], row["tbl"], row["provider"],
                     tuple(c for c, _ in cols), json.loads(row["properties"]),
                     row["status"] == ENABLED, tuple((c, t) for c, t in cols),
                     row["status_reason"], row["built_at"])


class IndexStore:
    """Index datamaps in `catalog` (proxy/datamaps/catalog/store.Catalog: its transactions)."""

    def __init__(self, catalog, version_max_age: float = 1.0):
        self.catalog = catalog
        self._lock = threading.Lock()
        self._max_age = version_max_age
        self._seen: tuple[int, float] | None = None
        self._cache: dict[str, tuple[int, list[IndexInfo], dict, dict]] = {}

    # -- versions and cache --------------------------------------------------------------
    def _bump(self, c) -> None:
        c.execute("INSERT INTO meta VALUES (?, '1') ON CONFLICT (key) DO UPDATE SET "
                  "value = CAST(CAST(meta.value AS INTEGER) + 1 AS TEXT)", (_VERSION_KEY,))
        self._seen = None

    def version(self) -> int:
        seen = self._seen
        if seen is not None and time.monotonic() - seen[1] < self._max_age:
            return seen[0]
        with self.catalog._tx(write=False) as c:
            row = c.execute("SELECT value FROM meta WHERE key = ?", (_VERSION_KEY,)).fetchone()
        v = int(row[0]) if row else 0
        self._seen = (v, time.monotonic())
        return v

    def _cached(self, table: str):
        table = table.lower()
        v = self.version()
        hit = self._cache.get(table)
        if hit is not None and hit[0] == v:
            return hit
        with self._lock:
            loaded = (v, *self._load(table))
            self._cache[table] = loaded
            return loaded

    @contextmanager
    def _write(self):
        """A write transaction; once committed, the tables read so far are loaded again
        here (see reload)."""
        with self.catalog._tx() as c:
            yield c
        self.reload()

    def fresh(self, table: str) -> bool:
        """Is `table`'s cache loaded at the current version (answering costs no read)?"""
        hit = self._cache.get(table.lower())
        return hit is not None and hit[0] == self.version()

    def reload(self) -> None:
        """Load again every table read so far (after a write, on the writer's thread: a
        query then finds the cache current instead of loading on the event loop)."""
        for table in list(self._cache):
            try:
                self._cached(table)
            except Exception:  # noqa: BLE001 - the next reader loads it (or fails) itself
                log.warning("reloading the index entries of %s failed", table, exc_info=True)

    def _load(self, table: str) -> tuple[list[IndexInfo], dict, dict]:
        with self.catalog._tx(write=False) as c:
            infos = [_info(r) for r in c.execute(
                "SELECT * FROM index_datamaps WHERE tbl = ? ORDER BY db, name", (table,))]
            stats: dict[str, dict[str, dict[str, Any]]] = {}
            identity: dict[str, set] = {}
            rows: dict[str, int] = {}
            for info in infos:
                if not info.enabled:
                    continue
                types = dict(info.column_types)
                for r in c.execute("SELECT path, size, mtime_ns, rows, stats FROM index_files "
                                   "WHERE db = ? AND name = ?", (info.db, info.name)):
                    path = r["path"]
                    identity.setdefault(path, set()).add((r["size"], r["mtime_ns"]))
                    rows[path] = r["rows"]
                    cols = stats.setdefault(path, {})
                    for col, (low, high, nulls) in json.loads(r["stats"]).items():
                        low, high = decode(low, types[col]), decode(high, types[col])
                        if low is None or high is None:
                            low = high = None
                        cols.setdefault(col, {}).update(low=low, high=high, nulls=nulls)
                for r in c.execute("SELECT path, col, m, k, bits FROM index_blooms "
                                   "WHERE db = ? AND name = ?", (info.db, info.name)):
                    stats.setdefault(r["path"], {}).setdefault(r["col"], {})["bloom"] = \
                        _LazyBloom(types[r["col"]], r["m"], r["k"], bytes(r["bits"]))
        out, ident = {}, {}
        for path, ids in identity.items():
            if len(ids) != 1 or None in next(iter(ids)):
                continue     # indexes built from different versions of the file: none holds
            ident[path] = next(iter(ids))
            out[path] = FileStats(path, rows.get(path), {
                col: ColumnStats(**fields) for col, fields in stats.get(path, {}).items()})
        return infos, out, ident

    # -- the query side's interface ------------------------------------------------------
    def indexes_on(self, table: str) -> list[IndexInfo]:
        return list(self._cached(table)[1])

    def file_stats(self, table: str) -> dict[str, FileStats]:
        """Every enabled index datamap of `table` merged, by normalised file path. A file
        whose indexes disagree on its identity (size, mtime) is left out (never pruned)."""
        return dict(self._cached(table)[2])

    def file_identity(self, table: str) -> dict[str, tuple[int, int]]:
        """(size, mtime_ns) of each file of file_stats when its entries were built."""
        return dict(self._cached(table)[3])

    # -- definitions ---------------------------------------------------------------------
    def create(self, db: str, name: str, table: str, kind: str,
               column_types: Iterable[tuple[str, str]], properties: Mapping[str, str],
               enabled: bool = False, reason: str = "not built yet") -> IndexInfo:
        """A new index datamap (DISABLED until its first build is stored); 42710 when the
        name is taken by an index datamap or another datamap."""
        with self._write() as c:
            taken = c.execute("SELECT 1 FROM index_datamaps WHERE db = ? AND name = ? UNION "
                              "SELECT 1 FROM datamaps WHERE db = ? AND name = ?",
                              (db, name, db, name)).fetchone()
            if taken:
                raise CatalogError(f"Datamap {db}.{name} already exists", "42710")
            c.execute("INSERT INTO index_datamaps (db, name, tbl, provider, columns, properties,"
                      " status, status_reason, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                      (db, name, table.lower(), kind, json.dumps([list(p) for p in column_types]),
                       json.dumps(dict(properties), sort_keys=True),
                       ENABLED if enabled else DISABLED, "" if enabled else reason, time.time()))
            self._bump(c)
        return self.get(db, name)

    def get(self, db: str, name: str) -> IndexInfo | None:
        with self.catalog._tx(write=False) as c:
            row = c.execute("SELECT * FROM index_datamaps WHERE db = ? AND name = ?",
                            (db, name)).fetchone()
        return None if row is None else _info(row)

    def all(self) -> list[IndexInfo]:
        with self.catalog._tx(write=False) as c:
            return [_info(r) for r in c.execute("SELECT * FROM index_datamaps ORDER BY db, name")]

    def names_on(self, table: str) -> list[str]:
        """"db.name" of the index datamaps on `table` (definitions only: no entry read)."""
        with self.catalog._tx(write=False) as c:
            return [f"{r[0]}.{r[1]}" for r in c.execute(
                "SELECT db, name FROM index_datamaps WHERE tbl = ? ORDER BY db, name",
                (table.lower(),))]

    def tables(self) -> set[str]:
        return {i.table for i in self.all()}

    def drop(self, db: str, name: str) -> None:
        with self._write() as c:
            c.execute("DELETE FROM index_datamaps WHERE db = ? AND name = ?", (db, name))
            self._bump(c)

    def set_status(self, db: str, name: str, enabled: bool, reason: str = "") -> None:
        with self._write() as c:
            c.execute("UPDATE index_datamaps SET status = ?, status_reason = ? "
                      "WHERE db = ? AND name = ?",
                      (ENABLED if enabled else DISABLED, "" if enabled else reason, db, name))
            self._bump(c)

    # -- entries -------------------------------------------------------------------------
    def put(self, info: IndexInfo, entries: Iterable[Entry], segment: str | None = None,
            replace_all: bool = False, enable: bool = False,
            column_types: Iterable[tuple[str, str]] | None = None,
            replace_segment: bool = False) -> None:
        """Store entries (a file's old entry replaced) in one transaction; `replace_all`:
        the index holds exactly these afterwards (REBUILD); `replace_segment`: these are
        all of `segment`'s; `enable`: and it is ENABLED;
        `column_types`: the types they were built as (after a CHANGE type)."""
        with self._write() as c:
            if column_types is not None:
                c.execute("UPDATE index_datamaps SET columns = ? WHERE db = ? AND name = ?",
                          (json.dumps([list(p) for p in column_types]), info.db, info.name))
            if replace_all:
                c.execute("DELETE FROM index_files WHERE db = ? AND name = ?",
                          (info.db, info.name))
            elif replace_segment:
                c.execute("DELETE FROM index_files WHERE db = ? AND name = ? AND segment = ?",
                          (info.db, info.name, segment))
            for e in entries:
                c.execute("INSERT INTO index_files VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT "
                          "(db, name, path) DO UPDATE SET segment = excluded.segment, size = "
                          "excluded.size, mtime_ns = excluded.mtime_ns, rows = excluded.rows, "
                          "stats = excluded.stats",
                          (info.db, info.name, e.path, segment, e.size, e.mtime_ns, e.rows,
                           json.dumps({k: list(v) for k, v in e.stats.items()})))
                c.execute("DELETE FROM index_blooms WHERE db = ? AND name = ? AND path = ?",
                          (info.db, info.name, e.path))
                for col, (m, k, blob) in e.blooms.items():
                    c.execute("INSERT INTO index_blooms VALUES (?, ?, ?, ?, ?, ?, ?)",
                              (info.db, info.name, e.path, col, m, k, blob))
            c.execute("UPDATE index_datamaps SET built_at = ? WHERE db = ? AND name = ?",
                      (time.time(), info.db, info.name))
            if enable:
                c.execute("UPDATE index_datamaps SET status = ?, status_reason = '' "
                          "WHERE db = ? AND name = ?", (ENABLED, info.db, info.name))
            self._bump(c)

    def files(self, info: IndexInfo) -> set[str]:
        with self.catalog._tx(write=False) as c:
            return {r[0] for r in c.execute("SELECT path FROM index_files WHERE db = ? AND "
                                            "name = ?", (info.db, info.name))}

    def forget(self, table: str, paths: Iterable[str]) -> None:
        """Entries of `paths` in every index of `table` go (the files left the table)."""
        paths = list(paths)
        with self._write() as c:
            for info in c.execute("SELECT db, name FROM index_datamaps WHERE tbl = ?",
                                  (table.lower(),)).fetchall():
                c.executemany("DELETE FROM index_files WHERE db = ? AND name = ? AND path = ?",
                              [(info[0], info[1], p) for p in paths])
            self._bump(c)

    def remap_segments(self, table: str, old_ids: Iterable[str], new_id: str) -> int:
        """Compaction merged segments `old_ids` into `new_id` without touching the files:
        their entries move to the new segment. Returns the entries moved."""
        old = [str(i) for i in old_ids]
        moved = 0
        with self._write() as c:
            for info in c.execute("SELECT db, name FROM index_datamaps WHERE tbl = ?",
                                  (table.lower(),)).fetchall():
                moved += c.execute(
                    f"UPDATE index_files SET segment = ? WHERE db = ? AND name = ? AND segment IN"
                    f" ({', '.join('?' * len(old))})", (str(new_id), info[0], info[1], *old)
                ).rowcount if old else 0
            self._bump(c)
        return moved

    def segments(self, info: IndexInfo) -> dict[str, str | None]:
        """File -> the segment it was indexed under (None: a table without segments)."""
        with self.catalog._tx(write=False) as c:
            return {r[0]: r[1] for r in c.execute(
                "SELECT path, segment FROM index_files WHERE db = ? AND name = ?",
                (info.db, info.name))}
