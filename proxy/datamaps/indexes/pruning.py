"""Index datamaps at query time: the SQL about to be sent, with files no row can come from
skipped (rewriter/prune/files.py decides; this module gathers what it needs and checks files).

    pruner = Pruner(store, shapes)             # store: the index store (IndexStore protocol)
    outcome = pruner.prune(sql, current_db)    # None: send `sql` as it is
    outcome.sql, outcome.lines                 # the pruned SQL, EXPLAIN's lines

Runs on the decision path (proxy/datamaps/handler.py calls it after the datamap rewrite,
on the SQL that will be sent: only base-table references left in it are pruned), so it
never waits for Spark: a table whose shape (columns, source table) is not known yet is not
pruned, and its shape is loaded in the background.

Before a file is skipped it is stat()ed: when its size or mtime differ from what the index
recorded (`file_identity`: rewritten in place) or it cannot be stat()ed, it is read. Paths
that are not local (`hdfs:`, `s3a:` ...) cannot be checked, so they are never skipped.
Hive-serde tables (no `_metadata` column; `input_file_name()` would filter rows after
reading every file, saving nothing) are not pruned.
"""
from __future__ import annotations

import logging
import os
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Protocol

from pipeline.files import hive_scan, table_meta
from proxy.datamaps.catalog.records import display_name
from proxy.datamaps.freshness.listing import local_path
from proxy.routing.router import Remember, StatementContext
from proxy.routing.sqlscan import Cursor, StatementError
from rewriter.api import STORAGE_SUFFIX
from rewriter.normalize import NormalizeError, parse
from rewriter.prune import FileStats, IndexedTable, IndexSpec, prune_sql, referenced_tables

log = logging.getLogger("proxy.indexes")

EXTERNAL_SOURCE = "datamap.external.source"      # the view's TBLPROPERTIES (shared design)
# Larger statements are sent unpruned: compiled sqlglot holds the interpreter for the
# whole parse (tenths of a second at this size and up), which the datamap rewrite avoids by
# parsing them in a process of its own (proxy/datamaps/rewrite/isolated.py, same threshold).
MAX_SQL_BYTES = 64 * 1024


class IndexInfo(Protocol):
    db: str
    name: str
    table: str
    kind: str                   # 'minmax' | 'bloomfilter'
    columns: tuple[str, ...]
    enabled: bool


class IndexStore(Protocol):
    """What pruning reads of the index datamaps' catalog (entries.py). A store
    may also offer `indexed_tables()` (see Pruner._may_name_an_indexed_table)."""

    def indexes_on(self, table: str) -> list[Any]: ...
    def file_stats(self, table: str) -> dict[str, FileStats]: ...
    def file_identity(self, table: str) -> dict[str, tuple[int, int]]: ...


@dataclass(frozen=True)
class TableShape:
    """How to read one table's files: its columns in `SELECT *` order with Spark types,
    the table to read them from (an external table's source table, else None), and
    whether Spark's scan has `_metadata.file_path` (False: a Hive-serde scan, not pruned)."""
    columns: Mapping[str, str]
    read_from: str | None = None
    by_path: bool = True


Shapes = Callable[[str], "TableShape | None"]     # None: not known yet, do not prune


@dataclass(frozen=True)
class Outcome:
    sql: str
    lines: tuple[str, ...]            # `Pruned by index datamap x: 3 of 40 files`
    note: str                         # for the statement log line


class Pruner:
    def __init__(self, store: IndexStore, shapes: Shapes,
                 stat: Callable[[str], os.stat_result] = os.stat,
                 max_sql_bytes: int = MAX_SQL_BYTES):
        self.store = store
        self.shapes = shapes
        self._stat = stat
        self.max_sql_bytes = max_sql_bytes

    def prune(self, sql: str, current_db: str,
              temp_views: frozenset[str] = frozenset()) -> Outcome | None:
        """The pruned statement, or None (nothing to skip, or anything went wrong: logged).
        `temp_views`: the session's (`temp_views(ctx.conf)`), which unqualified names read."""
        if len(sql) >= self.max_sql_bytes or not self._may_name_an_indexed_table(sql):
            return None
        try:
            tree = parse(sql)
        except (NormalizeError, RecursionError):
            return None          # Spark reports the syntax error itself
        try:
            identity: dict[str, Mapping[str, tuple[int, int]]] = {}
            tables = [t for t in (self._indexed(name, identity, temp_views) for name in
                                  referenced_tables(tree, current_db)) if t is not None]
            if not tables:
                return None
            done = prune_sql(tree, tables, current_db,
                             lambda table, path: self._unchanged(identity[table], path))
        except RecursionError:
            return None
        except Exception:  # noqa: BLE001 - style.md: a pruning failure forwards the original
            log.warning("index pruning failed; sending the statement unpruned", exc_info=True)
            return None
        if done is None:
            return None
        new_sql, counts = done
        lines = tuple(f"Pruned by index datamap {display_name(name, current_db)}: "
                      f"{read} of {known} files" for name, (read, known) in counts.items())
        note = "pruned:" + ",".join(f"{display_name(n, current_db)}={r}/{k}"
                                    for n, (r, k) in counts.items())
        return Outcome(new_sql, lines, note)

    def _may_name_an_indexed_table(self, sql: str) -> bool:
        """A look at the text before a parse (~10 µs a byte): a store that can list its
        indexed tables (`indexed_tables() -> set of "db.t"`, optional) spares every
        statement that names none of them."""
        listing = getattr(self.store, "indexed_tables", None)
        if listing is None:
            return True
        try:
            tables = listing()
        except Exception:  # noqa: BLE001 - then parse and ask per table
            return True
        text = sql.lower()
        return any(t.rsplit(".", 1)[-1] in text for t in tables)

    def _indexed(self, table: str, identity: dict,
                 temp_views: frozenset[str] = frozenset()) -> IndexedTable | None:
        specs = tuple(IndexSpec(i.name.lower(), i.kind.lower(),
                                tuple(c.lower() for c in i.columns))
                      for i in self.store.indexes_on(table) if i.enabled)
        if not specs:
            return None
        shape = self.shapes(table)
        if shape is None or not shape.by_path:
            return None
        stats = self.store.file_stats(table)
        if not stats:
            return None
        identity[table] = self.store.file_identity(table)
        return IndexedTable(table, shape.columns, stats, specs, shape.read_from,
                            shadowed=table.rsplit(".", 1)[-1] in temp_views)

    def _unchanged(self, identity: Mapping[str, tuple[int, int]], path: str) -> bool:
        """May this file be skipped: local, and as big and as old as when it was indexed?"""
        recorded = identity.get(path)
        local = local_path(path) if path.startswith("file:") else None
        if recorded is None or local is None:
            return False
        try:
            st = self._stat(local)
        except OSError:
            return False
        return (st.st_size, st.st_mtime_ns) == tuple(recorded)


class ServiceShapes:
    """Shapes from the proxy's own knowledge: columns from the datamap service's schema
    cache (invalidated on ALTER TABLE like the rewriter's), the external source and the kind
    of scan from the metastore, read once per table on a worker thread (`spark()` is the
    pipeline session). On the decision path a miss answers None and loads in the
    background; the next query on the table is pruned."""

    def __init__(self, schema_cache, spark: Callable[[], Any]):
        self._schemas = schema_cache
        self._spark = spark
        self._kinds: dict[str, tuple[str | None, bool]] = {}
        self._pending: set[str] = set()
        self._guard = threading.Lock()
        self._loader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="index-shapes")

    def __call__(self, table: str) -> TableShape | None:
        if table not in self._schemas:
            # gone from the schema cache: the table was altered, dropped or re-created
            # (maybe as another kind of table), so its kind is read again with its columns
            self._kinds.pop(table, None)
        kind = self._kinds.get(table)
        if kind is None:
            self._request(table)
            return None
        columns = self._schemas.schemas([table]).get(table.split(".")[0], {}).get(
            table.split(".", 1)[1])
        return None if columns is None else TableShape(columns, kind[0], kind[1])

    def warm(self, tables) -> None:
        """Load these tables' shapes in the background now (indexed tables, as soon as they
        are): else the first query on a table is sent unpruned while its shape loads."""
        for table in tables:
            if table not in self._kinds:
                self._request(table)

    def invalidate(self, table: str | None = None) -> None:
        with self._guard:
            if table is None:
                self._kinds.clear()
            else:
                self._kinds.pop(table, None)

    def close(self) -> None:
        self._loader.shutdown(wait=False, cancel_futures=True)

    def _request(self, table: str) -> None:
        with self._guard:
            if table in self._pending:
                return
            self._pending.add(table)
        self._loader.submit(self._load, table)

    def _load(self, table: str) -> None:
        try:
            if table not in self._schemas:
                self._schemas.load([table])
            self._kinds[table] = read_kind(self._spark(), table)
        except Exception as e:  # noqa: BLE001 - not pruned; tried again by the next query
            log.info("cannot tell how to prune %s (%s)", table, e)
        finally:
            with self._guard:
                self._pending.discard(table)


def read_kind(spark, table: str) -> tuple[str | None, bool]:
    """(the external view's source table or None, whether rows carry _metadata). Any
    other view, and a name the metastore does not know (a temporary view), is not pruned:
    a view has no `_metadata` column."""
    meta = table_meta(spark, table)
    if meta is None:
        return None, False
    source = meta.properties().get(EXTERNAL_SOURCE)
    if source.isDefined():
        return str(source.get()).lower(), True
    if meta.tableType().name() == "VIEW":
        return None, False
    return None, not hive_scan(spark, table, meta)



class StoreForQueries:
    """entries.IndexStore as the Pruner asks it. Index datamaps `ON TABLE <mv
    datamap>` are kept under the datamap's table `db.<name>_table` (a view, without file
    names), but describe the files of its storage table `db.<name>_table_segments`, which
    is what a query answered from the datamap reads: asked about the storage table, this
    answers for the datamap's table. `is_datamap_storage(table)` tells a real storage table
    from a user table whose name only ends the same way."""

    def __init__(self, store, is_datamap_storage: Callable[[str], bool],
                 warm: Callable[[Iterable[str]], None] | None = None):
        self.store = store
        self._is_storage = is_datamap_storage
        self._warm = warm             # told of the tables queries may be pruned on
        self._storages: set[str] = set()
        self._tables: tuple[int, frozenset[str]] | None = None
        self._loading: set[str] = set()
        self._guard = threading.Lock()
        self._loader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="index-entries")

    def _name(self, table: str) -> str:
        if not table.endswith(STORAGE_SUFFIX):
            return table
        if table not in self._storages:
            if not self._is_storage(table):
                return table
            self._storages.add(table)     # a datamap's storage name stays one
        return table[: -len(STORAGE_SUFFIX)]

    def read_as(self, table: str) -> list[str]:
        """The names a query reads `table`'s indexed files by: itself, and an mv
        datamap's storage table."""
        storage = table + STORAGE_SUFFIX
        return [table] + ([storage] if self._name(storage) == table else [])

    def indexes_on(self, table: str) -> list[Any]:
        """None known while the store's entries of the table are not loaded at its current
        version: they are loaded on a worker thread (a table's blooms can be large; the
        decision runs on the event loop), and this statement is sent unpruned. The store
        loads them again itself after each of its writes."""
        name = self._name(table)
        fresh = getattr(self.store, "fresh", None)
        if fresh is not None and not fresh(name):
            self._load(name)
            return []
        return self.store.indexes_on(name)

    def _load(self, name: str) -> None:
        with self._guard:
            if name in self._loading:
                return
            self._loading.add(name)

        def load() -> None:
            try:
                self.store.indexes_on(name)
            except Exception as e:  # noqa: BLE001 - not pruned; the next query tries again
                log.info("cannot load the index entries of %s (%s)", name, e)
            finally:
                with self._guard:
                    self._loading.discard(name)
        try:
            self._loader.submit(load)
        except RuntimeError:          # shut down: the proxy is stopping
            with self._guard:
                self._loading.discard(name)

    def close(self) -> None:
        self._loader.shutdown(wait=False, cancel_futures=True)

    def file_stats(self, table: str) -> dict[str, FileStats]:
        return self.store.file_stats(self._name(table))

    def file_identity(self, table: str) -> dict[str, tuple[int, int]]:
        return self.store.file_identity(self._name(table))

    def indexed_tables(self) -> frozenset[str]:
        """Indexed tables and their storage names, re-read when the store's version moves
        (every statement asks: one SQLite read a second at most)."""
        version = self.store.version()
        known = self._tables
        if known is None or known[0] != version:
            names = {t.lower() for t in self.store.tables()}
            storages = {t + STORAGE_SUFFIX for t in names
                        if self._name(t + STORAGE_SUFFIX) != t + STORAGE_SUFFIX}
            known = (version, frozenset(names | storages))
            self._tables = known
            if self._warm is not None:
                self._warm(sorted(known[1]))
        return known[1]


# The session's temporary views (a comma-separated list in its conf): Spark resolves an
# unqualified name to the temporary view first, so a table of that bare name is never
# pruned there (the pruned SQL would read the table instead of the view).
TEMP_VIEWS_KEY = "datamap.session.temp_views"


def temp_views(conf) -> frozenset[str]:
    return frozenset(v for v in conf.get(TEMP_VIEWS_KEY, "").split(",") if v)


def names_temp_view(statement: str, views: frozenset[str]) -> bool:
    """Does the text name one of `views` unqualified (not as `db.x`)? A look at the text:
    a false positive only forgoes a datamap answer."""
    return bool(views) and any(re.search(rf"(?<![\w.`])`?{re.escape(v)}`?(?![\w`.])",
                                         statement, re.IGNORECASE) for v in views)


def watch_temp_views(ctx: StatementContext, statement: str) -> Remember | None:
    """A Router handler that never decides: remembers the name of a temporary view the
    statement creates (CREATE [OR REPLACE] TEMP[ORARY] VIEW, CACHE TABLE x AS ...). A view
    that failed to be created or was dropped only costs that name its pruning."""
    name = _temp_view_name(statement)
    known = temp_views(ctx.conf)
    if name is None or name in known:
        return None
    return Remember(((TEMP_VIEWS_KEY, ",".join(sorted(known | {name}))),))


def _temp_view_name(statement: str) -> str | None:
    try:
        cur = Cursor(statement)
        if cur.accept("cache"):
            cur.accept("lazy")
            if not cur.accept("table"):
                return None
            name = cur.ident("a name")
            return None if cur.peek().kind == "end" or cur.accept_op(";") else name
        if not cur.accept("create"):
            return None
        if cur.accept("or") and not cur.accept("replace"):
            return None
        if not cur.accept("temporary", "temp") or not cur.accept("view", "table"):
            return None                  # GLOBAL TEMPORARY: read as global_temp.<name>
        if cur.accept("if") and not (cur.accept("not") and cur.accept("exists")):
            return None
        return cur.ident("a name")
    except StatementError:
        return None
