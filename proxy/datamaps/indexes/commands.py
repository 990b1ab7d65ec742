"""IndexService: the index datamap statements and the hooks that keep their entries
current. Blocking (py4j, SQLite): asyncio callers use asyncio.to_thread.

What an index datamap is ON: a Spark table (data-source, Hive-serde, or an external
format table's view), or an mv datamap (ON TABLE <datamap name> as in CarbonData's
design, or its `<name>_table`): then it indexes the files of the datamap's visible
segments, and its table is `<name>_table`, the table the rewriter's SQL reads.

When entries are built:
  - CREATE: over the table's current files (WITH DEFERRED REBUILD: at REBUILD);
  - after a load through the proxy, and after an mv datamap refresh/rebuild/compaction:
    `sync` indexes the files no entry covers and forgets the files that are gone;
  - ADD SEGMENT of an external table (part A calls on_segment_files before publishing);
  - REBUILD: every current file, replacing all entries.
A failed build leaves the index DISABLED with the reason (the query side uses only
ENABLED indexes, and never prunes a file without an entry). Index datamaps never reach
the rewriter's mv candidates: they live in tables of their own (entries.py).
"""
from __future__ import annotations

import json
import logging
import time
from typing import TYPE_CHECKING, Callable, Iterable, Sequence

from pipeline import list_files, normalize_path, table_exists
from pipeline.indexes import BloomSpec, build, column_types, minmax_supports
from proxy.datamaps.catalog.records import CatalogError, DatamapRecord, format_time, one_line
from proxy.datamaps.ddl import parser as ddl
from proxy.datamaps.ddl.index_providers import CreateIndexDatamap, bloom_settings
from proxy.datamaps.ddl.creating import creating
from proxy.datamaps.ddl.show import being_created, format_properties
from proxy.datamaps.ddl.words import EMPTY
from proxy.datamaps.failures import describe, job_failed
from proxy.datamaps.indexes.entries import Entry, IndexInfo, IndexStore
from proxy.datamaps.locks import KeyedLocks
from proxy.datamaps.upkeep.job_progress import spark_progress, stage
from proxy.errors import ClientError
from rewriter.prune import bloom

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("proxy.indexes")
DEFAULT_MAX_BLOOM_BYTES = 16 << 20
REBUILDING = "rebuilding: "      # the status reason of suspended indexes (sync takes them)


class IndexService:
    def __init__(self, catalog, spark: Callable[[], "SparkSession"], locks: KeyedLocks,
                 max_bloom_bytes: int = DEFAULT_MAX_BLOOM_BYTES,
                 on_indexed: Callable[[str], None] | None = None):
        self.catalog = catalog
        self.store = IndexStore(catalog)
        self._spark = spark
        self._locks = locks
        self.max_bloom_bytes = max_bloom_bytes
        # told of a table once an index on it is built (app.py: the pruner loads its shape
        # then, so the first query on it is pruned too)
        self.on_indexed = on_indexed

    # -- what a table is ---------------------------------------------------------------
    def _datamap(self, table: str) -> DatamapRecord | None:
        db, _, name = table.partition(".")
        return self.catalog.get_datamap(db, name) or self.catalog.datamap_by_table(table)

    def _target(self, on: ddl.Name, current_db: str) -> str:
        """The indexed table's name ("db.t"): an mv datamap's `<name>_table`."""
        table = on.qualified(current_db).lower()
        rec = self._datamap(table)
        if rec is not None:
            return rec.table
        if not table_exists(self._spark(), table):
            raise ClientError(f"Table {table} does not exist", "42S02")
        return table

    def _reads(self, table: str) -> str:
        """The table whose files the entries describe (a datamap's storage table)."""
        rec = self.catalog.datamap_by_table(table)
        return rec.definition.storage if rec is not None and rec.definition else table

    def current_files(self, table: str) -> tuple[str, ...]:
        rec = self.catalog.datamap_by_table(table)
        if rec is not None:
            return tuple(sorted({f for s in self.catalog.visible_segments(rec.db, rec.name)
                                 for f in s.files}))
        return list_files(self._spark(), table)

    def _columns(self, stmt: CreateIndexDatamap, table: str, subject: str
                 ) -> list[tuple[str, str]]:
        types = column_types(self._spark(), table)
        supports = bloom.supports if stmt.provider == "bloomfilter" else minmax_supports
        wanted = stmt.columns
        if wanted is None:
            out = [(c, t) for c, t in types.items() if supports(t)]
            if not out:
                raise ClientError(f"Cannot create {subject}: table {table} has no column of a "
                                  "type 'minmax' supports", "0A000")
            return out
        for c in wanted:
            if c not in types:
                raise ClientError(f"Cannot create {subject}: INDEX_COLUMNS names {c}, which is "
                                  f"not a column of {table} ({', '.join(types)})", "42703")
            if not supports(types[c]):
                raise ClientError(f"Cannot create {subject}: column {c} of {table} has type "
                                  f"{types[c]}, which '{stmt.provider}' does not support",
                                  "0A000")
        return [(c, types[c]) for c in wanted]

    # -- statements ----------------------------------------------------------------------
    def create(self, stmt: CreateIndexDatamap, current_db: str):
        db = stmt.name.db or stmt.on_table.db or current_db
        subject = f"datamap {db}.{stmt.name.name}"
        table = self._target(stmt.on_table, current_db)
        columns = self._columns(stmt, table, subject)
        if stmt.provider == "bloomfilter":
            s = bloom_settings(stmt.props)
            m, _ = bloom.size_for(s.size, s.fpp)
            if m // 8 > self.max_bloom_bytes:
                raise ClientError(
                    f"Cannot create {subject}: BLOOM_SIZE {s.size} at BLOOM_FPP {s.fpp} makes "
                    f"{m // 8} bytes per file and column, over [indexes] max_bloom_bytes "
                    f"({self.max_bloom_bytes}); lower BLOOM_SIZE or raise BLOOM_FPP", "42000")
        with self._locks(f"index:{table}"):
            try:
                info = self.store.create(db, stmt.name.name, table, stmt.provider, columns,
                                         stmt.props, reason="WITH DEFERRED REBUILD: REBUILD "
                                         "DATAMAP builds it" if stmt.lazy else "not built yet")
            except CatalogError as e:
                if e.sqlstate == "42710" and stmt.if_not_exists:
                    return EMPTY
                raise ClientError(str(e), e.sqlstate) from None
            if stmt.lazy:
                return EMPTY
            try:
                # SHOW DATAMAP's Building, on every replica, while the first build runs
                with creating(self.catalog, info.db, info.name, stmt.provider, stmt.props,
                              [table]):
                    self._build_all(info)
            except Exception as e:
                self.store.drop(info.db, info.name)
                raise job_failed(e, f"Creating {subject}") from e
        return EMPTY

    def find(self, name: ddl.Name, on_table: ddl.Name | None, current_db: str
             ) -> IndexInfo | None:
        db = name.db or (on_table.db if on_table else None) or current_db
        info = self.store.get(db, name.name)
        if info is not None and on_table is not None:
            table = on_table.qualified(current_db).lower()
            rec = self._datamap(table)
            if info.table not in (table, rec.table if rec else table):
                raise ClientError(f"Datamap {info.qualified} does not exist on table {table}",
                                  "42S02")
        return info

    def drop(self, info: IndexInfo) -> None:
        with self._locks(f"index:{info.table}"):
            self.store.drop(info.db, info.name)

    def drop_on(self, table: str) -> list[str]:
        """Every index datamap on `table` goes (the table or its mv datamap was dropped)."""
        gone = []
        for info in self.store.indexes_on(table):
            self.drop(info)
            gone.append(info.qualified)
        return gone

    def rebuild(self, info: IndexInfo) -> None:
        with self._locks(f"index:{info.table}"):
            try:
                self._build_all(info)
            except Exception as e:
                self.store.set_status(info.db, info.name, False,
                                      f"REBUILD failed: {describe(e)[0]}")
                raise job_failed(e, f"Rebuilding datamap {info.qualified}") from e

    def rows(self, table: str | None = None) -> list[tuple]:
        """SHOW DATAMAP rows (proxy/datamaps/ddl/show.py's columns) of the index datamaps."""
        if table is not None:
            rec = self._datamap(table)          # ON TABLE <mv datamap name> too
            table = rec.table if rec is not None else table
        infos = self.store.indexes_on(table) if table else self.store.all()
        running = {e.qualified: e for e in self.catalog.creating()}
        out = []
        for i in infos:
            entry = running.get(i.qualified)
            sync = "NA" if i.built_at is None else json.dumps(
                {i.table: f"{len(self.store.files(i))} files", "loadEndTime": format_time(
                    i.built_at)})
            out.append((i.name, i.kind, i.table, format_properties(i.properties),
                        "ENABLED" if i.enabled else "DISABLED", sync,
                        "" if i.enabled else one_line(i.status_reason), "", "NA",
                        being_created(entry) if entry is not None else "", "NA", ""))
        return out

    # -- building ------------------------------------------------------------------------
    def _entries(self, infos: Sequence[IndexInfo], files: Iterable[str],
                 staged: dict[str, str] | None = None) -> dict[str, list[Entry]]:
        """Entries of `files` for each of `infos` (one table), from one read of the files
        (a second one only for two bloom indexes on one column with different sizes)."""
        files = list(files)
        table = infos[0].table
        out: dict[str, list[Entry]] = {}
        pending = list(infos)
        while pending:
            minmax: list[str] = []
            specs: dict[str, tuple[BloomSpec, bool]] = {}
            batch = []
            for info in pending:
                wanted = {}
                if info.kind == "bloomfilter":
                    s = bloom_settings(info.properties)
                    m, k = bloom.size_for(s.size, s.fpp)
                    wanted = {c: (BloomSpec(c, m, k), s.compress) for c in info.columns}
                    if any(c in specs and specs[c] != w for c, w in wanted.items()):
                        continue
                batch.append(info)
                specs.update(wanted)
                if info.kind == "minmax":
                    minmax += [c for c in info.columns if c not in minmax]
            pending = [i for i in pending if i not in batch]
            spark = self._spark()
            with spark_progress(spark):     # a statement's operation log, when one listens
                built = build(spark, self._reads(table), files, minmax,
                              [spec for spec, _ in specs.values()], staged)
            for info in batch:
                out[info.qualified] = [Entry(
                    f.path, f.size, f.mtime_ns, f.rows,
                    {c: f.stats[c] for c in info.columns} if info.kind == "minmax" else {},
                    {c: (specs[c][0].m, specs[c][0].k, bloom.pack(f.blooms[c], specs[c][1]))
                     for c in info.columns} if info.kind == "bloomfilter" else {})
                    for f in built.values()]
        return out

    def _types_now(self, info: IndexInfo) -> tuple[tuple[str, str], ...]:
        """The indexed columns' types as the table declares them now: the build reads and
        hashes them so (an external table's CHANGE type changes them under the same
        files); 0A000 when one is gone or of a type the index does not take."""
        types = column_types(self._spark(), info.table)
        supports = bloom.supports if info.kind == "bloomfilter" else minmax_supports
        for c in info.columns:
            if c not in types or not supports(types[c]):
                raise ClientError(f"column {c} of {info.table} is now "
                                  f"{'gone' if c not in types else 'of type ' + types[c]}, "
                                  f"which '{info.kind}' does not index", "0A000")
        return tuple((c, types[c]) for c in info.columns)

    def _retyped(self, info: IndexInfo) -> bool:
        try:
            return self._types_now(info) != info.column_types
        except ClientError:
            return True             # _rebuild_all disables it, naming the column

    def _build_all(self, info: IndexInfo) -> None:
        files = self.current_files(info.table)
        started = time.monotonic()
        types = self._types_now(info)
        entries = self._entries([info], files)[info.qualified]
        # the types in the same transaction as the entries: never old bounds or blooms
        # decoded as the new type, nor new ones as the old
        self.store.put(info, entries, replace_all=True, enable=True, column_types=types)
        log.info("index datamap %s built over %d files in %.1fs", info.qualified, len(files),
                 time.monotonic() - started)
        if self.on_indexed is not None:
            try:
                self.on_indexed(info.table)
            except Exception:  # noqa: BLE001 - a later query loads the shape itself
                log.warning("preparing %s for pruning failed", info.table, exc_info=True)

    def sync(self, table: str, rebuild: bool = False) -> None:
        """Index the files of `table` no enabled index covers; forget the gone ones. A
        failure disables the indexes it concerns (with the reason), never raises.
        `rebuild` (or a column's type changed): the values of files that kept their
        names, sizes and dates may differ, so every entry is built again."""
        infos = [i for i in self.store.indexes_on(table)
                 if i.enabled or i.status_reason.startswith(REBUILDING)]
        if not infos:
            return
        with self._locks(f"index:{table}"):
            try:
                if rebuild or any(not i.enabled or self._retyped(i) for i in infos):
                    self._rebuild_all(table, infos)
                    return
                current = set(self.current_files(table))
                gone = set().union(*(self.store.files(i) for i in infos)) - current
                if gone:
                    self.store.forget(table, gone)
                todo = [(i, current - self.store.files(i)) for i in infos]
                new = set().union(*(f for _, f in todo))
                if not new:
                    return
                built = self._entries([i for i, f in todo if f], sorted(new))
                for info, files in todo:
                    if files:
                        self.store.put(info, [e for e in built[info.qualified]
                                              if e.path in files])
            except Exception as e:  # noqa: BLE001 - the load stands; the index waits
                log.warning("indexing new files of %s failed; disabling its index datamaps",
                            table, exc_info=True)
                for info in infos:
                    self.store.set_status(info.db, info.name, False,
                                          f"indexing files of {table} failed: {describe(e)[0]}")

    def suspend(self, table: str) -> list[str]:
        """The values under `table`'s files are about to change (an external table's CHANGE
        type or csv. properties): its enabled indexes are used by no query until the next
        sync rebuilds them (`after_load(table, overwrite=True)`). Returns them."""
        infos = [i for i in self.store.indexes_on(table) if i.enabled]
        for info in infos:
            self.store.set_status(info.db, info.name, False,
                                  f"{REBUILDING}the columns or file format of {table} changed")
        return [i.qualified for i in infos]

    def _rebuild_all(self, table: str, infos: Sequence[IndexInfo]) -> None:
        self.suspend(table)       # no query prunes by the old values meanwhile
        for info in infos:
            try:
                self._build_all(info)
            except Exception as e:  # noqa: BLE001 - this index waits for a REBUILD
                self.store.set_status(info.db, info.name, False,
                                      f"rebuilding after a change of {table} failed: "
                                      f"{describe(e)[0]}")

    def zone_changed(self, before: str, zone: str) -> list[str]:
        """TIMESTAMP bounds are wall-clock times of the zone they were built in (and such
        columns have no bloom): under another zone they mean other instants, so those
        indexes are DISABLED until REBUILD. Returns them."""
        out = []
        for info in self.store.all():
            if info.enabled and any(t == "timestamp" for _, t in info.column_types):
                self.store.set_status(info.db, info.name, False, (
                    f"the session time zone changed from {before} to {zone} after it was "
                    "built: REBUILD DATAMAP rebuilds it"))
                out.append(info.qualified)
        return out

    # -- hooks ---------------------------------------------------------------------------
    def has(self, table: str) -> bool:
        return bool(self.store.indexes_on(table))

    def after_load(self, table: str, overwrite: bool = False) -> None:
        """A load through the proxy changed `table` (its mv datamaps are refreshed
        first): the indexes on it and on its datamaps follow. `overwrite`: rebuilt."""
        self.sync(table, rebuild=overwrite)
        for rec in self.catalog.list_datamaps(base_table=table):
            self.sync(rec.table)

    def sync_tables(self, table: str | None) -> None:
        """SYNC DATAMAPS [ON TABLE t]: files written outside the proxy are indexed too
        (every indexed table, or `t` and its mv datamaps' tables)."""
        if table is None:
            for t in sorted(self.store.tables()):
                self.sync(t)
        else:
            self.after_load(table)

    def on_segment_files(self, table: str, segment_id: str,
                         files: list[tuple[str, str]]) -> int | None:
        """ADD SEGMENT of an external table, before it is published: index the staged
        `files` ((staged path, final path)) for every enabled index of `table`, stored
        under the final paths. Raising aborts the ADD SEGMENT. Returns the segment's row
        count (the indexes counted them), None without an index."""
        infos = [i for i in self.store.indexes_on(table) if i.enabled]
        if not infos or not files:
            return None
        staged = {normalize_path(final): normalize_path(s) for s, final in files}
        with self._locks(f"index:{table}"):
            stage(f"indexing segment {segment_id} of {table}: reading its {len(staged)} "
                  f"file(s) for {', '.join(i.qualified for i in infos)}")
            built = self._entries(infos, staged, staged)
            for info in infos:      # a crash after an earlier attempt left entries
                self.store.put(info, built[info.qualified], segment=str(segment_id),
                               replace_segment=True)     # under this id: not theirs
        entries = list(built[infos[0].qualified])
        if any(e.rows is None for e in entries):
            return None
        return sum(e.rows for e in entries)

    def on_files_gone(self, table: str, files: Iterable[str]) -> None:
        self.store.forget(table, [normalize_path(f) for f in files])

    def on_compacted(self, table: str, old_ids: Iterable[str], new_id: str) -> None:
        """Indexes are per file and compaction keeps the files: only the segment moves."""
        self.store.remap_segments(table, old_ids, new_id)
