"""ExternalTables: the blocking operations on external-format tables (docs/external.md).

Each runs in a worker thread under the table's lock. The catalog commit is the moment a
change is made: ADD SEGMENT stages links, calls the index hook, renames the staging
directory and then commits (a crash before the commit leaves links the catalog does not
know, which `recover` removes at start); DELETE SEGMENT commits, then unlinks. Datamaps
over the table catch up afterwards through the datamap service (`after_load`), as after
a load through the proxy.
"""
from __future__ import annotations

import logging
import os
import time
import uuid
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable

from pipeline import external as spark_side
from proxy.datamaps.catalog.store import Catalog
from proxy.datamaps.locks import KeyedLocks
from proxy.datamaps.upkeep.job_progress import stage
from proxy.errors import ClientError
from proxy.external import grammar, links
from proxy.external.hooks import SegmentHooks
from proxy.external.store import LIVE, ExternalSegment, ExternalStore, ExternalTable, MappedFile
from proxy.routing.sqlscan import StatementError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from proxy.datamaps.service import DatamapService

log = logging.getLogger("proxy.external")


def client_error(e: StatementError) -> ClientError:
    return ClientError(e.message, e.sqlstate)


class ExternalTables:
    def __init__(self, catalog: Catalog, spark: Callable[[], "SparkSession"], state_dir,
                 datamaps: "DatamapService | None" = None, hooks: SegmentHooks | None = None):
        self.store = ExternalStore(catalog)
        self.spark = spark
        self.root = Path(state_dir).resolve() / "external"
        self.datamaps = datamaps
        self.hooks = hooks or SegmentHooks()
        # the datamaps' locks carry the catalog leases (locks.py): replicas sharing the
        # catalog must not pick the same segment id or compact the same segments at once
        self._locks = datamaps.locks if datamaps is not None else KeyedLocks()

    def lock(self, table: str):
        return self._locks(f"external:{table}")

    def get(self, table: str) -> ExternalTable | None:
        return self.store.get(table)

    def require(self, table: str) -> ExternalTable:
        t = self.store.get(table)
        if t is None:
            raise ClientError(f"Table {table} is not an external-format table", "42S02")
        return t

    # -- CREATE / DROP ---------------------------------------------------------------------
    def create(self, stmt: grammar.CreateExternal) -> None:
        table = stmt.table
        with self.lock(table):
            spark = self.spark()
            if self.store.get(table) is not None or spark_side.exists(spark, table):
                if stmt.if_not_exists:
                    return
                raise ClientError(f"Table {table} already exists", "42710")
            db, _, name = table.partition(".")
            source = f"{db}.{name}__csv_{uuid.uuid4().hex[:8]}"
            location = self.root / db / source.partition(".")[2]
            location.mkdir(parents=True, exist_ok=True)
            t = ExternalTable(table, source, str(location), stmt.fields, stmt.header,
                              dict(stmt.properties))
            spark_side.create(spark, table, source, t.layout(), t.fields, stmt.options(),
                              str(location))
            try:
                self.store.add(t)
            except Exception:
                spark_side.drop(spark, table, source)
                raise

    def drop(self, table: str) -> None:
        """View, source table, links and catalog rows; never the files; then the
        datamaps over the table, as DROP TABLE of a base table drops them."""
        with self.lock(table):
            t = self.require(table)
            gone = [f.link for s in self.store.segments(table, live_only=True) for f in s.files]
            spark_side.drop(self.spark(), table, t.source)
            self.store.remove(table)
            links.unlink_dir(t.location)
            self._gone(table, gone)
        if self.datamaps is not None:
            self.datamaps.after_drop_table(table)

    def _gone(self, table: str, files: list[str]) -> None:
        if files:
            try:
                self.hooks.on_files_gone(table, files)
            except Exception:  # noqa: BLE001 - the files are unmapped all the same
                log.warning("on_files_gone hook failed for %s", table, exc_info=True)

    # -- segments --------------------------------------------------------------------------
    @contextmanager
    def _writing(self, table: str):
        """As for an INSERT through the proxy: until the change and the datamaps' refresh
        are done, statements that arrived before it began do not see the files it maps
        (FreshnessGuard.begin_write); later ones are judged on every file there."""
        guard = self.datamaps.guard if self.datamaps is not None else None
        token = guard.begin_write([table]) if guard else None
        try:
            yield
        finally:
            if guard:
                guard.end_write(token)

    def add_segment(self, stmt: grammar.AddSegment) -> int:
        with self._writing(stmt.table):
            return self._add_segment(stmt)

    def _add_segment(self, stmt: grammar.AddSegment) -> int:
        table = stmt.table
        with self.lock(table):
            t = self.require(table)
            mapped = {f.target: s.id for s in self.store.segments(table, live_only=True)
                      for f in s.files}
            try:
                files = links.segment_files(table, stmt.paths, mapped)
            except StatementError as e:
                raise client_error(e) from None
            started, t0 = time.time(), time.monotonic()
            seg_id = self.store.next_id(table)
            staged: list[tuple[str, str, str]] = []
            indexed = False
            stage(f"adding segment {seg_id} to {table}: mapping {len(files)} file(s) in place")
            try:
                staged = links.stage(t.location, seg_id, files)
                rows = self.hooks.on_segment_files(table, seg_id,
                                                   [(s, f) for s, f, _ in staged])
                indexed = True
                stage(f"publishing segment {seg_id} of {table} ("
                      + (f"{rows} rows, " if isinstance(rows, int) else "")
                      + f"{len(staged)} file(s))")
                links.publish(t.location, seg_id)
            except Exception as e:
                links.discard(t.location, seg_id)
                if indexed:        # the index hook keeps state for files never visible
                    self._gone(table, [final for _, final, _ in staged])
                if isinstance(e, (ClientError, StatementError)):
                    raise
                step = "publishing" if indexed else "indexing"
                raise ClientError(f"ADD SEGMENT of {table} failed while {step} its files "
                                  f"(nothing was added): {e}", "HY000") from e
            mapped_files = tuple(MappedFile(final, target, os.path.getsize(target))
                                 for _, final, target in staged)
            seg = ExternalSegment(table, seg_id, LIVE, stmt.paths, mapped_files,
                                  sum(f.size for f in mapped_files),
                                  rows if isinstance(rows, int) else None, started,
                                  time.monotonic() - t0)
            try:
                self.store.add_segment(seg)
            except Exception:
                links.discard(t.location, seg_id, published=True)
                self._gone(table, [f.link for f in mapped_files])
                raise
            self._changed(t)
            stage(f"segment {seg_id} of {table} published")
        self._datamaps_catch_up(table)
        return seg_id

    def delete_segments(self, stmt: grammar.DeleteSegments) -> list[int]:
        with self._writing(stmt.table):
            return self._delete_segments(stmt)

    def _delete_segments(self, stmt: grammar.DeleteSegments) -> list[int]:
        table = stmt.table
        with self.lock(table):
            t = self.require(table)
            every = {s.id: s for s in self.store.segments(table)}
            if stmt.before is not None:
                limit = stmt.before.timestamp()       # local time, as SHOW SEGMENTS shows
                chosen = [s for s in every.values() if s.status == LIVE and s.load_start < limit]
            else:
                unknown = [i for i in stmt.ids if i not in every]
                if unknown:
                    raise ClientError(f"Table {table} has no segment "
                                      f"{', '.join(map(str, unknown))}", "42000")
                dead = [f"{i} ({every[i].status})" for i in stmt.ids if every[i].status != LIVE]
                if dead:
                    raise ClientError(f"Segments of {table} are not live: {', '.join(dead)}",
                                      "42000")
                chosen = [every[i] for i in stmt.ids]
            if not chosen:
                return []
            self.store.mark_deleted(table, [s.id for s in chosen])
            gone = [f.link for s in chosen for f in s.files]
            links.unlink_files(gone)
            self._gone(table, gone)
            self._changed(t)
        self._datamaps_catch_up(table)
        return [s.id for s in chosen]

    def compact(self, stmt: grammar.Compact) -> int | None:
        """Live segments -> one, re-mapping the same links (no file is touched, so neither
        datamaps nor per-file indexes need to read anything). MAJOR takes every live
        segment; MINOR those ADD SEGMENT made (not earlier compactions' results); CUSTOM
        the live segments named (each must be live: else 42000, nothing changes)."""
        table = stmt.table
        with self.lock(table):
            self.require(table)
            every = self.store.segments(table)
            merged = {s.merged_into for s in every if s.merged_into is not None}
            if stmt.kind == "custom":
                by_id = {s.id: s for s in every if s.status == LIVE}
                missing = [i for i in stmt.ids if i not in by_id]
                if missing:
                    raise ClientError(
                        f"COMPACT 'CUSTOM' of {table}: no live segment "
                        f"{', '.join(map(str, missing))} (SHOW SEGMENTS FOR TABLE {table})",
                        "42000")
                live = sorted((by_id[i] for i in stmt.ids), key=lambda s: s.id)
            else:
                live = sorted((s for s in every if s.status == LIVE and (
                    stmt.kind == "major" or s.id not in merged)), key=lambda s: s.id)
            if len(live) < 2:
                return None
            new_id = self.store.next_id(table)
            old = [s.id for s in live]
            try:
                self.hooks.on_compacted(table, old, new_id)
            except ClientError:
                raise
            except Exception as e:
                raise ClientError(f"COMPACT of {table} failed while re-mapping its file "
                                  f"indexes (nothing changed): {e}", "HY000") from e
            rows = None if any(s.rows is None for s in live) else sum(s.rows for s in live)
            seg = ExternalSegment(table, new_id, LIVE,
                                  tuple(p for s in live for p in s.paths),
                                  tuple(f for s in live for f in s.files),
                                  sum(s.size for s in live), rows, time.time(), 0.0)
            self.store.add_segment(seg, replaces=tuple(old))
            return new_id

    def _changed(self, t: ExternalTable) -> None:
        """Spark sessions keep a file list per table: the pipeline session lists again now;
        the client sessions through the freshness guard (REFRESH TABLE before their next
        query naming the table)."""
        spark_side.refresh(self.spark(), t.source)
        if self.datamaps is not None:
            self.datamaps.guard.note_change(t.table)

    def _datamaps_catch_up(self, table: str) -> None:
        if self.datamaps is not None:
            self.datamaps.after_load(table)

    # -- ALTER TABLE -----------------------------------------------------------------------
    def rename(self, old: str, new: str) -> None:
        if old.partition(".")[0] != new.partition(".")[0]:
            raise ClientError(f"Table {old} cannot be renamed to another database ({new})",
                              "0A000")
        with self.lock(old):
            t = self.require(old)
            if self.datamaps is not None and (
                    self.datamaps.catalog.list_datamaps(base_table=old)
                    or self.datamaps.indexes.store.names_on(old)):
                raise ClientError(f"Table {old} cannot be renamed: datamaps are defined over "
                                  "it; DROP DATAMAP them first", "0A000")
            spark = self.spark()
            if self.store.get(new) is not None or spark_side.exists(spark, new):
                raise ClientError(f"Table {new} already exists", "42710")
            spark_side.rename(spark, old, new)
            self.store.update(replace(t, table=new), old_name=old)

    def drop_columns(self, table: str, columns: list[str]) -> None:
        with self.lock(table):
            t = self.require(table)
            names = [n for n, _ in t.fields]
            missing = [c for c in columns if c not in names]
            if missing:
                raise ClientError(f"Table {table} has no field {', '.join(missing)}", "42000")
            kept = tuple(f for f in t.fields if f[0] not in columns)
            if not kept:
                raise ClientError(f"Table {table}: cannot drop every field", "42000")
            t = replace(t, fields=kept)        # the header, so the file layout, stays
            spark_side.replace_view(self.spark(), table, t.source, t.fields)
            self.store.update(t)
        # a datamap reading a dropped field fails its rebuild and is DISABLED with the reason
        self._schema_changed(table, rebuild=True)

    def change_type(self, table: str, column: str, new_name: str, new_type: str) -> None:
        with self.lock(table):
            t = self.require(table)
            if column not in dict(t.fields):
                raise ClientError(f"Table {table} has no field {column}", "42000")
            if new_name != column:
                raise ClientError(f"Table {table}: renaming field {column} is not supported "
                                  "(its name is the file header's)", "0A000")
            fields = tuple((n, new_type if n == column else ty) for n, ty in t.fields)
            self._recreate(replace(t, fields=fields))
        self._schema_changed(table, rebuild=True)

    def set_properties(self, table: str, props: dict[str, str], unset: bool = False) -> None:
        with self.lock(table):
            t = self.require(table)
            merged = dict(t.properties)
            for key, value in props.items():
                if key == "format" or not key.startswith("csv."):
                    raise ClientError(f"Table {table}: property '{key}' cannot be "
                                      f"{'unset' if unset else 'set'} on an external-format "
                                      "table (only csv. properties)", "0A000")
                if unset:
                    merged.pop(key, None)
                else:
                    merged[key] = value
            try:
                header = grammar.check_properties(table, merged, t.fields)
            except StatementError as e:
                raise client_error(e) from None
            self._recreate(replace(t, properties=merged, header=header))
        self._schema_changed(table, rebuild=True)

    def _recreate(self, t: ExternalTable) -> None:
        if self.datamaps is not None:   # index entries hold values read the old way
            self.datamaps.indexes.suspend(t.table)
        spark_side.recreate_source(self.spark(), t.table, t.source, t.layout(), t.fields,
                                   grammar.csv_options(t.properties), t.location)
        self.store.update(t)
        self._changed(t)

    def _schema_changed(self, table: str, rebuild: bool = False) -> None:
        if self.datamaps is None:
            return
        self.datamaps.invalidate_schemas(table)
        if rebuild:      # same files, other values: a listing diff cannot see it
            self.datamaps.after_load(table, overwrite=True)

    # -- start -----------------------------------------------------------------------------
    def recover(self) -> None:
        """Crash safety: staging directories go, link directories follow the catalog."""
        for table in self.store.names():
            t = self.store.get(table)
            live = {f.link: f.target for s in self.store.segments(table, live_only=True)
                    for f in s.files}
            try:
                for line in links.reconcile(t.location, live):
                    log.info("external table %s: %s", table, line)
            except OSError:
                log.warning("cannot reconcile the links of %s", table, exc_info=True)

    # -- segment selection -----------------------------------------------------------------
    def scopes(self, selections: dict[str, tuple[int, ...]]):
        """{table: (source, fields, files of the selected live segments)} for
        rewriter.prune.scope.restrict."""
        out = {}
        for table, ids in selections.items():
            t = self.store.get(table)
            if t is None:
                continue
            out[table] = (t.source, [n for n, _ in t.fields], self.live_files(table, ids))
        return out

    def live_files(self, table: str, ids: Iterable[int] | None = None) -> list[str]:
        """The link paths (Spark's spelling) of the table's live segments, or of `ids`:
        what per-file indexes are keyed by (REBUILD reads them)."""
        wanted = None if ids is None else set(ids)
        return [f.link for s in self.store.segments(table, live_only=True)
                if wanted is None or s.id in wanted for f in s.files]

    def check_selection(self, table: str, ids: tuple[int, ...]) -> None:
        self.require(table)
        live = {s.id for s in self.store.segments(table, live_only=True)}
        missing = [i for i in ids if i not in live]
        if missing:
            raise ClientError(f"Table {table} has no live segment "
                              f"{', '.join(map(str, missing))}", "42000")
