"""Keeping datamaps in step with their base tables: refresh, full build, the hooks after a
load or DROP TABLE through the proxy, and recovery at start.

Every method blocks (SQLite, py4j); asyncio callers use `asyncio.to_thread`. The order of
a refresh is always: sync the base tables' file listings into base segments -> reserve a
datamap segment id -> pipeline job writes that partition -> one catalog commit publishes
it (and hides what it supersedes) -> `<name>_table`, the view of the live segments, is
replaced to show them (proxy/datamaps/upkeep/live_view.py) -> drop superseded partitions. A
failed job marks its segment FAILED and disables the datamap; it never becomes visible.
"""
from __future__ import annotations

import dataclasses
import logging
import time
from enum import StrEnum
from typing import TYPE_CHECKING, Callable, Iterable

from pipeline import cleanup_orphans, drop, full_build, incremental_append, list_files, plan_delta
from pipeline.table import PipelineError
from proxy.datamaps.catalog.records import CatalogError, DatamapRecord, DatamapStatus
from proxy.datamaps.catalog.store import Catalog
from proxy.datamaps.failures import describe, job_failed, logged
from proxy.datamaps.locks import KeyedLocks
from proxy.datamaps.schemas import SchemaCache
from proxy.datamaps.upkeep.compaction import Compaction, SegmentGarbage
from proxy.datamaps.upkeep.job_progress import spark_progress, stage
from proxy.datamaps.upkeep.segment_rows import parquet_rows
from proxy.errors import ClientError
from rewriter.api import storage_table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("proxy.datamaps")


class RefreshOutcome(StrEnum):
    """What a refresh (or SYNC DATAMAPS) did to a datamap; the values are the words SYNC
    DATAMAPS reports in its DataMaps column."""
    REFRESHED = "refreshed"     # an incremental segment was appended
    REBUILT = "rebuilt"         # built anew from the whole base tables
    ENABLED = "enabled"         # nothing to catch up, but it was DISABLED
    DISABLED = "disabled"       # lazy, over a changed table: waits for REBUILD
    UNCHANGED = "unchanged"
    FAILED = "failed"           # reported as "failed: <reason>"; the datamap is DISABLED


def _segments(by_table) -> str:
    """{table: segments or their ids} -> "base segments 0-1 of default.sales" (progress)."""
    parts = []
    for table, segs in by_table.items():
        ids = [getattr(s, "id", s) for s in segs]
        shown = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
        parts.append(f"base segment{'s' if len(ids) != 1 else ''} {shown or 'none'} of {table}")
    return "; ".join(parts) or "no base segments"


def client_error(exc: Exception) -> ClientError:
    return ClientError(str(exc), getattr(exc, "sqlstate", "HY000") or "HY000")


@dataclasses.dataclass(frozen=True)
class BaseSync:
    """What one look at a base table's files found."""
    table: str
    segment: str | None     # the base segment cut for the new files, if any
    added: int              # files the catalog did not know
    removed: int            # known files that are gone (a full rebuild is due)
    replaced: bool = False  # files gone, or contents rewritten in place: full rebuild due

    @property
    def changed(self) -> bool:
        return self.segment is not None or self.replaced    # removed > 0 implies replaced


class Maintenance:
    def __init__(self, catalog: Catalog, spark: Callable[[], "SparkSession"],
                 schemas: SchemaCache, locks: KeyedLocks, garbage: SegmentGarbage,
                 compaction: Compaction, *, guard=None,
                 after_change: Callable[[list[DatamapRecord]], object] | None = None,
                 build_source: Callable[[DatamapRecord, dict], tuple[str, str] | None]
                 | None = None):
        """guard: proxy/datamaps/freshness/guard.FreshnessGuard, told what Spark listed.
        after_change(recs): after datamaps changed, the ones stacked on them catch up
        (sync.propagate; freshness/sync.py imports this module). build_source(rec, live) ->
        (SELECT, "db.name") | None: a full build may read a finer datamap that holds
        exactly the same base segments (finer.finer_source). The service gives all three."""
        self.catalog = catalog
        self.schemas = schemas
        self._spark = spark
        self._locks = locks
        self._garbage = garbage
        self._compaction = compaction
        self.guard = guard
        self.after_change = after_change
        self.build_source = build_source

    def disable(self, rec: DatamapRecord, reason: str) -> None:
        """Take the datamap out of rewriting with `reason` (no-op if it was dropped)."""
        try:
            self.catalog.set_status(rec.db, rec.name, DatamapStatus.DISABLED, reason[:500])
        except CatalogError:
            pass  # dropped meanwhile

    def show_live(self, rec: DatamapRecord) -> None:
        """`<name>_table` shows the visible segments (caller holds the datamap's lock);
        a failure is raised."""
        self._garbage.live.show(rec, strict=True)

    def drop_everything(self, rec: DatamapRecord) -> None:
        """Forget the datamap, then drop its table (caller holds the datamap's lock)."""
        try:
            self.catalog.drop_datamap(rec.db, rec.name)   # first: no reader is sent to it
        except CatalogError:
            pass
        if rec.definition is not None:
            drop(self._spark(), rec.definition)

    # -- base tables ---------------------------------------------------------------------
    def sync_base_files(self, table: str, source: str = "discovered",
                        rewritten: bool = False, started: float | None = None) -> bool:
        """Cut a base segment for files the catalog does not know yet. Returns True when
        known files disappeared (overwrite, truncate, delete, DROP PARTITION): a full
        rebuild is due. `rewritten`: the caller knows contents were replaced (INSERT
        OVERWRITE, LOAD DATA ... OVERWRITE), even if the file names look unchanged."""
        return self.sync_base(table, source, rewritten, started).replaced

    def sync_base(self, table: str, source: str = "discovered",
                  rewritten: bool = False, started: float | None = None) -> BaseSync:
        """sync_base_files, reporting what it found. `started`: when the load that wrote
        the files began (epoch seconds), for the segment's load time; None when the files
        were found rather than loaded through the proxy."""
        with self._locks(f"base:{table}"):
            before = self.guard.files_now(table) if self.guard else None
            current = set(list_files(self._spark(), table))
            unfinished: frozenset[str] = frozenset()
            if self.guard:
                self.guard.listed(table, before, current)
                unfinished = self.guard.unfinished(table, current)
            known = self.catalog.base_files(table)
            # a job's files go into one segment together: those of a commit still going on
            # are left to the next sync (until then the guard holds them back or compensates)
            current -= unfinished - known
            added, removed = len(current - known), len(known - current)
            replaced = bool(removed or (rewritten and known))
            seg = None
            if replaced:
                self.catalog.mark_base_deleted(table)
                if current:
                    seg = self._cut(table, sorted(current), source, started)
            elif added:
                seg = self._cut(table, sorted(current - known), source, started)
            found = BaseSync(table, seg.id if seg else None, added, removed, replaced)
            if found.changed and self.guard:
                self.guard.note_change(table)
            return found

    def _cut(self, table: str, files: list[str], source: str, started: float | None):
        """A new base segment of `files`, with its row count (segment_rows.py) and load
        time for SHOW SEGMENTS."""
        rows = parquet_rows(files)
        now = time.time()
        return self.catalog.add_base_segment(
            table, files, rows=rows, source=source,
            load_start=now if started is None else started,
            load_seconds=0.0 if started is None else max(0.0, now - started))

    # -- refresh -------------------------------------------------------------------------
    def refresh(self, db: str, name: str, synced: Iterable[str] = ()) -> RefreshOutcome:
        """Bring the datamap in sync (REBUILD / after a load): incremental when possible.
        Returns REFRESHED, REBUILT, ENABLED (nothing to catch up, was DISABLED) or
        UNCHANGED. `synced`: base tables the caller has just cut a segment of (sync_base),
        which are not listed again (files added since are cut by the caller that added
        them, or by the next sync)."""
        rec = self.catalog.get_datamap(db, name)
        if rec is None:
            raise ClientError(f"Datamap {db}.{name} does not exist", "42S02")
        with self._locks(rec.qualified):
            return self.refresh_locked(rec, frozenset(synced))

    def refresh_locked(self, rec: DatamapRecord,
                       synced: frozenset[str] = frozenset()) -> RefreshOutcome:
        """refresh() for a caller that holds the datamap's lock."""
        t0 = time.monotonic()
        defn = rec.definition
        # Holding the lock and its catalog lease, nobody writes this datamap: a segment
        # still IN_PROGRESS is a dead job's (a replica killed mid-build), and its partition
        # is garbage. A job that only lost its lease cannot publish it after this either:
        # publish_segment requires IN_PROGRESS. Without leases another process may be
        # writing it.
        if self._locks.leases is not None:
            self._fail_interrupted(rec)
        self._garbage.drop(rec)   # segments superseded long enough ago
        try:
            rewritten = [t not in synced and self.sync_base_files(t)
                         for t in dict.fromkeys(defn.base_tables)]
        except Exception as e:  # noqa: BLE001
            raise job_failed(e, f"Listing the base tables of datamap {rec.qualified}") from e
        visible = self.catalog.visible_segments(rec.db, rec.name)
        if (any(rewritten) or not visible
                or self.catalog.covers_deleted_base_segments(rec.db, rec.name)):
            self._build(rec, [s.id for s in visible])
            return RefreshOutcome.REBUILT
        pending = {t: segs for t, segs in
                   self.catalog.pending_base_segments(rec.db, rec.name).items() if segs}
        if not pending:
            if self.catalog.get_datamap(rec.db, rec.name).status != DatamapStatus.ENABLED:
                self.catalog.set_status(rec.db, rec.name, DatamapStatus.ENABLED, "")
                return RefreshOutcome.ENABLED
            return RefreshOutcome.UNCHANGED
        plan = plan_delta(defn, pending)
        if plan.full_rebuild:
            self._build(rec, [s.id for s in visible])
            return RefreshOutcome.REBUILT
        covered = self.catalog.covered_base_segments(rec.db, rec.name)
        old_files = {t: [f for s in self.catalog.base_segments(t) if s.id in covered.get(t, ())
                         for f in s.files] for t in defn.base_tables}
        new_files = {t: [f for s in segs for f in s.files] for t, segs in pending.items()}
        spark = self._spark()
        sid = self.catalog.begin_segment(rec.db, rec.name,
                                         {t: [s.id for s in segs] for t, segs in pending.items()})
        t_job = time.monotonic()
        stage(f"refreshing datamap {rec.qualified}: segment {sid} reads "
              f"{_segments(pending)} and writes its files")
        try:
            with spark_progress(spark):
                res = incremental_append(spark, defn, sid, new_files, old_files,
                                         rec.properties, read_as=self._storages(defn.base_tables))
        except Exception as e:
            self.catalog.fail_segment(rec.db, rec.name, sid, f"refresh failed: {describe(e)[0]}")
            raise job_failed(e, f"Refreshing datamap {rec.qualified}") from e
        if res.write is None:   # the plan said incremental; nothing was written
            self.catalog.fail_segment(rec.db, rec.name, sid, res.reason or "nothing written",
                                      disable=False)
            if res.full_rebuild:
                self._build(rec, [s.id for s in visible])
                return RefreshOutcome.REBUILT
            return RefreshOutcome.UNCHANGED
        stage(f"publishing segment {sid} of {rec.qualified} ({res.write.rows} rows, "
              f"{len(res.write.files)} files)")
        self.catalog.publish_segment(rec.db, rec.name, sid, rows=res.write.rows,
                                     files=res.write.files, seconds=res.write.seconds,
                                     kind="refreshed")
        t_view = time.monotonic()
        self._garbage.live.show(rec)
        stage(f"segment {sid} of {rec.qualified} published")
        log.info("datamap %s: segment %s appended (%d rows) in %.2fs: sync+plan %.2fs, "
                 "job %.2fs, view %.2fs", rec.qualified, sid, res.write.rows,
                 time.monotonic() - t0, t_job - t0, t_view - t_job, time.monotonic() - t_view)
        self._compaction.after_refresh(rec)
        return RefreshOutcome.REFRESHED

    def _storages(self, tables: Iterable[str]) -> dict[str, str]:
        """Datamap tables among `tables` -> their storage tables: a datamap stacked on
        another reads the lower one's new segment files from the storage table (a view
        cannot be read by file)."""
        return {t: storage_table(t) for t in tables if self.catalog.datamap_by_table(t)}

    def _build(self, rec: DatamapRecord, supersede: list[str]) -> None:
        live = {t: [s.id for s in self.catalog.base_segments(t)] for t in rec.base_tables}
        source = self.build_source(rec, live) if self.build_source else None
        spark = self._spark()
        sid = self.catalog.begin_segment(rec.db, rec.name, live)
        read = (f"datamap {source[1]}" if source else
                _segments({t: ids for t, ids in live.items()}))
        stage(f"building datamap {rec.qualified}: segment {sid} reads {read} and writes its "
              "files")
        try:
            with spark_progress(spark):
                w = full_build(spark, rec.definition, sid, rec.properties,
                               sql=source[0] if source else None)
        except Exception as e:
            self.catalog.fail_segment(rec.db, rec.name, sid, f"build failed: {describe(e)[0]}")
            if isinstance(e, PipelineError):
                raise client_error(e) from e
            raise job_failed(e, f"Building datamap {rec.qualified}") from e
        stage(f"publishing segment {sid} of {rec.qualified} ({w.rows} rows, "
              f"{len(w.files)} files)")
        self.catalog.publish_segment(rec.db, rec.name, sid, rows=w.rows, files=w.files,
                                     seconds=w.seconds, supersedes=supersede, kind="built")
        if source:
            self.catalog.record_event(rec.db, rec.name, "built-from", w.rows, w.seconds,
                                      f"segment {sid} from datamap {source[1]}")
        self._garbage.published(rec)
        stage(f"segment {sid} of {rec.qualified} published")

    # -- hooks of statements that passed through the proxy -------------------------------
    def after_load(self, table: str, source: str = "proxy-load", overwrite: bool = False,
                   started: float | None = None) -> None:
        """A statement that passed through the proxy changed `table`: cut its segment,
        refresh the non-lazy datamaps over it, disable the lazy ones. `overwrite`: it
        replaced contents (INSERT OVERWRITE, LOAD DATA ... OVERWRITE): rebuild. `started`:
        when the statement began (the segment's load time runs from it to now)."""
        recs = self.catalog.list_datamaps(base_table=table)
        if not recs:
            return
        try:
            self.schemas.schemas([table], refresh=True)   # here, in a worker thread
            self.sync_base_files(table, source, rewritten=overwrite, started=started)
        except Exception as e:  # noqa: BLE001 - the load itself succeeded upstream
            log.warning("cannot list %s after a load; disabling its datamaps", table,
                        exc_info=True)
            for rec in recs:
                self.disable(rec, f"base table {table} changed and could not be listed: {e}")
            return
        self.catalog.disable_on_table_change(table, f"base table {table} changed")
        changed = []
        # finer datamaps first: a coarser one's rebuild may then read a finer one's rows
        for rec in sorted(recs, key=self._rows, reverse=True):
            if rec.lazy:
                continue
            try:
                if self.refresh(rec.db, rec.name, synced=[table]) != RefreshOutcome.UNCHANGED:
                    changed.append(rec)
            except Exception as e:  # noqa: BLE001 - never serve it stale; the load stands
                log.warning("refresh of %s after a load of %s failed: %s", rec.qualified, table,
                            describe(e)[0], exc_info=not logged(e))
                self.disable(rec, f"refresh after a load of {table} failed: {describe(e)[0]}")
        if changed and self.after_change is not None:
            try:
                self.after_change(changed)
            except Exception:  # noqa: BLE001 - each failed one is disabled; the load stands
                log.warning("datamaps stacked on those of %s were not synced after a load",
                            table, exc_info=True)

    def _rows(self, rec: DatamapRecord) -> int:
        return sum(s.rows or 0 for s in self.catalog.visible_segments(rec.db, rec.name))

    def after_drop_table(self, table: str) -> list[str]:
        """The base table was dropped through the proxy: drop its datamaps (and their
        tables, and the datamaps stacked on them) and forget its segments. Returns the
        dropped datamaps."""
        gone = []
        for rec in self.catalog.list_datamaps(base_table=table):
            gone += self.after_drop_table(rec.table)   # its table goes: those stacked on it too
            with self._locks(rec.qualified):
                try:
                    self.drop_everything(rec)
                    gone.append(rec.qualified)
                except Exception:  # noqa: BLE001 - at least keep it from being used
                    log.warning("dropping datamap %s after DROP TABLE %s failed",
                                rec.qualified, table, exc_info=True)
                    self.disable(rec, f"base table {table} was dropped")
        self.catalog.forget_base_table(table)
        self.schemas.invalidate(table)
        if self.guard:
            self.guard.forget(table)
        return gone

    def recover(self) -> dict[str, list[str]]:
        """At start: segments left INSERT_IN_PROGRESS by a crash are failed, `<name>_table`
        is made to show the visible segments again (a crash or failure between a publish
        and the view's replace left it one publish behind), and partitions the catalog does
        not show are dropped (but none the view still names, if it could not be replaced).
        A datamap table from before that view becomes the storage table first. A datamap
        whose job another live replica runs now (its lease, locks.py) is left alone: its
        IN_PROGRESS segment is that job's. Returns the dropped ids per datamap."""
        dropped: dict[str, list[str]] = {}
        for rec in self.catalog.list_datamaps():
            with self._locks.try_hold(rec.qualified) as held:
                if not held:
                    log.info("datamap %s: a job holds it (here or in another replica); "
                             "not recovering it", rec.qualified)
                    continue
                self._fail_interrupted(rec)
                gone = self._reconcile_storage(rec)
                if gone is not None:
                    dropped[rec.qualified] = gone
        if self.guard:     # where the base tables' files are, before the first query
            self.guard.load_layouts(t for rec in self.catalog.list_datamaps()
                                    for t in rec.base_tables)
        return dropped

    def _fail_interrupted(self, rec: DatamapRecord) -> None:
        for seg in self.catalog.segments(rec.db, rec.name):
            if seg.status == "INSERT_IN_PROGRESS":
                self.catalog.fail_segment(rec.db, rec.name, seg.id,
                                          "interrupted (a restart, or its replica died)",
                                          disable=False)

    def _reconcile_storage(self, rec: DatamapRecord) -> list[str] | None:
        """The view and the partitions follow the catalog; the dropped ids, or None when
        the datamap had to be disabled."""
        keep = [s.id for s in self.catalog.visible_segments(rec.db, rec.name)]
        try:
            self._garbage.live.adopt(rec)
        except Exception:  # noqa: BLE001 - its rewritten queries fail: keep it out
            log.warning("datamap %s: cannot move %s to %s", rec.qualified,
                        rec.definition.table, rec.definition.storage, exc_info=True)
            self.disable(rec, f"its table {rec.definition.table} could not become the "
                              f"storage table {rec.definition.storage}")
            return None
        named = self._garbage.live.named(rec)
        if named != frozenset(keep) and not self._garbage.live.show(rec):
            keep += sorted(named or ())
        gone = cleanup_orphans(self._spark(), rec.definition, keep)
        self.catalog.mark_dropped(rec.db, rec.name, gone)
        return gone
