"""Datamap maintenance orchestration: the catalog plus the pipeline on one SparkSession.

Every method blocks (SQLite, py4j); asyncio callers use `asyncio.to_thread`. The order of
a refresh is always: sync the base tables' file listings into base segments -> reserve a
datamap segment id -> pipeline job writes that partition -> one catalog commit publishes
it (and hides what it supersedes) -> drop superseded partitions. A failed job marks its
segment FAILED and disables the datamap; it never becomes visible.

Client-facing failures are `proxy.errors.ClientError` with the contract's SQLSTATE.
"""
from __future__ import annotations

import dataclasses
import logging
import threading
import time
from contextlib import ExitStack
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Callable, Iterable, Mapping

from pipeline import (
    cleanup_orphans, compact, create_table, drop, full_build, incremental_append, list_files,
    plan_delta, table_exists, table_schemas, with_spark_types,
)
from pipeline.table import PipelineError, drop_segments
from proxy.datamaps import ddl
from proxy.datamaps.catalog import ENABLED, Catalog, CatalogError, DatamapRecord
from proxy.datamaps.failures import describe, job_failed, logged
from proxy.datamaps.show import show_datamaps, show_segments
from proxy.datamaps.sync import sync_datamaps
from proxy.errors import ClientError
from proxy.router import LocalResult
from rewriter import compile_datamap
from rewriter.api import Candidate, DatamapDefinitionError
from rewriter.bytecache import ByteLRU, text_size

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("proxy.datamaps")
EMPTY = LocalResult(columns=(), rows=())
SCHEMA_CACHE_BYTES = 64 << 20     # tables x columns; a 1,000-column table is ~150 KB


def _client(exc: Exception) -> ClientError:
    return ClientError(str(exc), getattr(exc, "sqlstate", "HY000") or "HY000")


MINOR_THRESHOLD_PROPERTY = "minor_compaction_threshold"
DEFAULT_MINOR_THRESHOLD = 4
AUTO_COMPACTION_PROPERTY = "auto_compaction"


def minor_threshold(props: Mapping[str, str]) -> int:
    """How many of the newest segments COMPACT 'MINOR' merges (DMPROPERTIES, default 4)."""
    raw = str(props.get(MINOR_THRESHOLD_PROPERTY, DEFAULT_MINOR_THRESHOLD)).strip()
    if not raw.isdigit() or int(raw) < 2:
        raise ClientError(f"DMPROPERTIES '{MINOR_THRESHOLD_PROPERTY}'='{raw}': expected a whole "
                          "number of segments, at least 2", "42000")
    return int(raw)


def auto_compaction(props: Mapping[str, str], default: bool) -> bool:
    """DMPROPERTIES('auto_compaction'='true'|'false'); the server setting otherwise."""
    raw = props.get(AUTO_COMPACTION_PROPERTY)
    return default if raw is None else str(raw).strip().lower() == "true"


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


def referenced_tables(sql: str, current_db: str, subject: str = "the datamap") -> list[str]:
    """"db.table" names a SELECT reads (CTE names excluded), without duplicates."""
    import sqlglot
    from sqlglot import exp
    try:
        tree = sqlglot.parse_one(sql, dialect="spark")
    except sqlglot.errors.ParseError as e:
        raise ClientError(f"Cannot parse the SELECT of {subject}: {e}", "42000") from None
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    out: list[str] = []
    for t in tree.find_all(exp.Table):
        if not t.name or (not t.db and t.name.lower() in ctes):
            continue
        name = f"{(t.db or current_db).lower()}.{t.name.lower()}"
        if name not in out:
            out.append(name)
    return out


class DatamapService:
    """`spark_provider()` returns the SparkSession pipeline jobs run on (created lazily by
    the engine). `schemas_provider(tables)` returns their Schemas; by default read from
    Spark and cached until a datamap over the table is refreshed or rebuilt."""

    def __init__(self, catalog: Catalog, spark_provider: Callable[[], "SparkSession"],
                 schemas_provider: Callable[[Iterable[str]], dict] | None = None):
        self.catalog = catalog
        self._spark_provider = spark_provider
        self._schemas_provider = schemas_provider
        self._schema_cache: ByteLRU[str, dict[str, str]] = ByteLRU(SCHEMA_CACHE_BYTES, text_size)
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        self._index = None
        self._index_version = -1
        # Datamaps the current index was not offered, with why (EXPLAIN only):
        # "db.name" -> (base tables, reason).
        self._unavailable: dict[str, tuple[tuple[str, ...], str]] = {}
        # Reentrant: the first index() in remote mode opens the pipeline session, whose
        # on_open hook (proxy/app.py) warms the index again in the same thread.
        self._index_guard = threading.RLock()
        self._hidden_at: dict[tuple[str, str], float] = {}
        self.garbage_grace_s = 120.0   # see _drop_garbage
        # Tables queries read next to datamap tables (dimension tables of query-delta joins):
        # their schemas are loaded off the event loop, then the index is rebuilt with them.
        self._extra_tables: set[str] = set()
        self._schema_pending: set[str] = set()
        self._schema_failed: dict[str, float] = {}
        self._schema_guard = threading.Lock()
        self._schema_loader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="datamap-schemas")
        self.schema_retry_s = 60.0
        # [datamaps] auto_compaction: MINOR compaction after a refresh once enough incremental
        # segments piled up; DMPROPERTIES('auto_compaction'=...) overrides it per datamap.
        self.auto_compaction = False
        # Remote mode, set at the pipeline session's start (proxy/app.py): why the
        # pipeline's time zone may differ from the upstream's; then datamaps whose rows
        # depend on the zone are not offered to the rewriter (EXPLAIN says why).
        self.time_zone_problem: str | None = None

    # -- helpers -------------------------------------------------------------------------
    @property
    def spark(self) -> "SparkSession":
        return self._spark_provider()

    def _lock(self, key: str) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(key, threading.Lock())

    def schemas(self, tables: Iterable[str], refresh: bool = False) -> dict:
        tables = list(tables)
        missing = [t for t in tables if refresh or t not in self._schema_cache]
        fresh: dict[str, dict[str, str]] = {}     # what the byte-bounded cache may evict
        if missing:
            try:
                got = (self._schemas_provider(missing) if self._schemas_provider
                       else table_schemas(self.spark, missing))
            except ClientError:
                raise
            except Exception as e:  # noqa: BLE001 - Spark's AnalysisException et al.
                message, state = describe(e)
                raise ClientError(f"Cannot read the schema of {', '.join(missing)}: {message}",
                                  state) from e
            for db, ts in got.items():
                for t, cols in ts.items():
                    fresh[f"{db}.{t}"] = self._schema_cache[f"{db}.{t}"] = dict(cols)
        out: dict[str, dict[str, dict[str, str]]] = {}
        for t in tables:
            db, _, name = t.partition(".")
            cols = fresh[t] if t in fresh else self._schema_cache.get(t)
            if cols is not None:
                out.setdefault(db, {})[name] = cols
        return out

    def invalidate_schemas(self, table: str | None = None) -> None:
        """Forget cached schemas (of one table, or all): call after ALTER TABLE."""
        if table is None:
            self._schema_cache.clear()
        else:
            self._schema_cache.pop(table, None)
        self._index_version = -1

    def request_schemas(self, tables: Iterable[str]) -> None:
        """Non-blocking (event loop): the rewriter needs these tables' schemas. Load them in
        the background; the next index() includes them. A table that failed to load (it may
        not exist) is not tried again for schema_retry_s."""
        now = time.monotonic()
        todo: list[str] = []
        with self._schema_guard:
            for t in tables:
                if t in self._schema_cache:
                    self._extra_tables.add(t)
                    self._index_version = -1      # cached but not in the index yet
                elif t not in self._schema_pending and \
                        now - self._schema_failed.get(t, -self.schema_retry_s) >= self.schema_retry_s:
                    self._schema_pending.add(t)
                    todo.append(t)
        if todo:
            self._schema_loader.submit(self.load_schemas, todo)

    def load_schemas(self, tables: Iterable[str]) -> None:
        """Blocking (worker thread): load tables' schemas for the rewriter, one by one so that
        one missing table does not hide the others, then have the index rebuilt."""
        for t in tables:
            try:
                self.schemas([t])
            except Exception as e:  # noqa: BLE001 - e.g. the table does not exist
                log.info("no schema for %s (%s); queries reading it are forwarded unchanged",
                         t, str(e).splitlines()[0] if str(e) else type(e).__name__)
                with self._schema_guard:
                    if len(self._schema_failed) >= 4096:   # names clients made up: forget
                        self._schema_failed.clear()         # them rather than grow forever
                    self._schema_failed[t] = time.monotonic()
            else:
                with self._schema_guard:
                    self._extra_tables.add(t)
                    self._schema_failed.pop(t, None)
            finally:
                with self._schema_guard:
                    self._schema_pending.discard(t)
        self._index_version = -1

    def close(self) -> None:
        self._schema_loader.shutdown(wait=False, cancel_futures=True)

    def _resolve(self, name: ddl.Name, on_table: ddl.Name | None, current_db: str) -> tuple[str, str]:
        db = name.db or (on_table.db if on_table else None) or current_db
        return db, name.name

    def _require(self, name: ddl.Name, on_table: ddl.Name | None,
                 current_db: str) -> DatamapRecord:
        db, dm = self._resolve(name, on_table, current_db)
        rec = self.catalog.get_datamap(db, dm)
        if rec is None and name.db is None and on_table is not None:
            # named into another database than its table's (CREATE MATERIALIZED VIEW
            # db2.x AS ... FROM db1.t): ON TABLE db1.t still finds it when it is the only one
            over = [r for r in self.catalog.list_datamaps(
                base_table=on_table.qualified(current_db)) if r.name == dm]
            rec = over[0] if len(over) == 1 else None
        if rec is None:
            raise ClientError(f"Datamap {db}.{dm} does not exist", "42S02")
        if on_table is not None and on_table.qualified(current_db) not in rec.base_tables:
            raise ClientError(f"Datamap {db}.{dm} does not exist on table "
                              f"{on_table.qualified(current_db)}", "42S02")
        return rec

    # -- DDL -----------------------------------------------------------------------------
    def create(self, stmt: ddl.CreateDatamap, current_db: str) -> LocalResult:
        tables = referenced_tables(stmt.select_sql, current_db,
                                   f"datamap {stmt.name.qualified(current_db)}")
        schemas = self.schemas(tables)
        try:
            definition = compile_datamap(stmt.name.name, stmt.select_sql, schemas, current_db)
        except DatamapDefinitionError as e:
            raise _client(e) from None
        db = stmt.name.db or definition.database
        definition = dataclasses.replace(definition, database=db,
                                         table=f"{db}.{stmt.name.name}_table")
        if stmt.on_table is not None:
            on = stmt.on_table.qualified(current_db)
            if on not in definition.base_tables:
                raise ClientError(f"ON TABLE {on} of datamap {db}.{stmt.name.name} is not a "
                                  f"table of its SELECT ({', '.join(definition.base_tables)})",
                                  "42000")
        try:
            definition = with_spark_types(self.spark, definition)
        except PipelineError as e:
            raise _client(e) from None
        except Exception as e:  # noqa: BLE001 - Spark cannot analyze the build SELECT
            raise job_failed(e, f"Creating datamap {db}.{stmt.name.name}", stmt.original_sql) from e
        with self._lock(f"{db}.{stmt.name.name}"):
            if self.catalog.get_datamap(db, stmt.name.name) is not None:
                if stmt.if_not_exists:
                    return EMPTY
                raise ClientError(f"Datamap {db}.{stmt.name.name} already exists", "42710")
            if table_exists(self.spark, definition.table):
                raise ClientError(f"Cannot create datamap {db}.{stmt.name.name}: table "
                                  f"{definition.table} already exists", "42710")
            try:
                rec = self.catalog.create_datamap(
                    db, stmt.name.name, provider=stmt.provider, select_sql=stmt.select_sql,
                    original_sql=stmt.original_sql, base_tables=definition.base_tables,
                    lazy=stmt.lazy, properties=stmt.props, definition=definition)
            except CatalogError as e:
                if e.sqlstate == "42710" and stmt.if_not_exists:
                    return EMPTY
                raise _client(e) from None
            try:
                create_table(self.spark, definition, rec.properties)
                if not stmt.lazy:
                    self._refresh_locked(rec)
            except Exception as e:
                self._drop_everything(rec)
                if isinstance(e, ClientError):
                    raise
                raise job_failed(e, f"Creating datamap {db}.{stmt.name.name}",
                                 stmt.original_sql) from e
        return EMPTY

    def drop(self, stmt: ddl.DropDatamap, current_db: str) -> LocalResult:
        try:
            rec = self._require(stmt.name, stmt.on_table, current_db)
        except ClientError:
            if stmt.if_exists:
                return EMPTY
            raise
        with self._lock(rec.qualified):
            self._drop_everything(rec)
        return EMPTY

    def _drop_everything(self, rec: DatamapRecord) -> None:
        try:
            self.catalog.drop_datamap(rec.db, rec.name)   # first: no reader is sent to it
        except CatalogError:
            pass
        if rec.definition is not None:
            drop(self.spark, rec.definition)

    def show(self, stmt: ddl.ShowDatamaps, current_db: str) -> LocalResult:
        if stmt.on_table is None:
            return show_datamaps(self.catalog, self.catalog.list_datamaps())
        table = stmt.on_table.qualified(current_db)
        return show_datamaps(self.catalog, self.catalog.list_datamaps(base_table=table))

    def show_segments(self, stmt: ddl.ShowSegments, current_db: str) -> LocalResult:
        table = stmt.table.qualified(current_db)
        result = show_segments(self.catalog, table)
        if result is None:
            raise ClientError(f"Table {table} has no segments: it is neither a datamap table "
                              "nor a base table of a datamap", "42S02")
        return result

    def rebuild(self, stmt: ddl.RebuildDatamap, current_db: str) -> LocalResult:
        rec = self._require(stmt.name, stmt.on_table, current_db)
        self.refresh(rec.db, rec.name)
        return EMPTY

    def sync(self, stmt: ddl.SyncDatamaps, current_db: str) -> LocalResult:
        """SYNC DATAMAPS [ON TABLE t]: proxy/datamaps/sync.py."""
        table = stmt.on_table.qualified(current_db) if stmt.on_table else None
        return sync_datamaps(self, table)

    def sync_all(self) -> LocalResult:
        """The periodic sync of `serve` ([datamaps] sync_interval_s): every base table."""
        return sync_datamaps(self, None)

    def compact(self, stmt: ddl.CompactDatamap, current_db: str) -> LocalResult:
        rec = self._require(stmt.name, None, current_db)
        with self._lock(rec.qualified):
            visible = [s.id for s in self.catalog.visible_segments(rec.db, rec.name)]
            if stmt.mode == "custom":
                unknown = [i for i in stmt.segment_ids if i not in visible]
                if unknown:
                    raise ClientError(f"Segment {', '.join(unknown)} of datamap {rec.qualified}"
                                      f" is not a valid segment (valid: {', '.join(visible)})",
                                      "42S02")
                ids = list(stmt.segment_ids)
            elif stmt.mode == "minor":
                # CarbonData's minor compaction: the newest `threshold` segments merge into
                # one; with fewer there is nothing to do yet.
                threshold = minor_threshold(rec.properties)
                if len(visible) < threshold:
                    return EMPTY
                ids = visible[-threshold:]
            else:
                ids = visible           # MAJOR: everything, one row per group afterwards
            if len(ids) < 2:
                return EMPTY
            self._compact_locked(rec, ids)
        return EMPTY

    def _compact_locked(self, rec: DatamapRecord, ids: list[str]) -> str:
        """Merge visible segments `ids` into a new one (caller holds the datamap's lock)."""
        merged: dict[str, set[str]] = {}
        for seg in self.catalog.visible_segments(rec.db, rec.name):
            if seg.id in ids:
                for t, bids in seg.extra_info.items():
                    merged.setdefault(t, set()).update(bids)
        sid = self.catalog.begin_segment(rec.db, rec.name, merged)
        try:
            w = compact(self.spark, rec.definition, ids, sid, rec.properties)
        except Exception as e:
            self.catalog.fail_segment(rec.db, rec.name, sid, f"compaction failed: {describe(e)[0]}",
                                      disable=False)
            raise job_failed(e, f"Compacting datamap {rec.qualified} (segments {', '.join(ids)})") from e
        try:
            self.catalog.publish_segment(rec.db, rec.name, sid, rows=w.rows, files=w.files,
                                         seconds=w.seconds, supersedes=ids, kind="compacted",
                                         enable=rec.status == ENABLED)
        except CatalogError as e:
            self.catalog.fail_segment(rec.db, rec.name, sid, str(e), disable=False)
            raise ClientError(str(e), e.sqlstate) from e
        self._drop_garbage(rec)
        return sid

    def _auto_compact(self, rec: DatamapRecord) -> None:
        """After a refresh published a segment (datamap lock held): with auto-compaction on
        and at least `minor_compaction_threshold` incremental segments visible, merge the
        newest of them (CarbonData's auto load merge). Built and compacted segments are left
        alone, so the cost follows the recent loads, not the table. A failure is logged and
        recorded; it never fails the load or disables the datamap: the refreshed segments
        stay visible and correct."""
        if not auto_compaction(rec.properties, self.auto_compaction):
            return
        try:
            rec = self.catalog.require_datamap(rec.db, rec.name)   # status after the publish
            threshold = minor_threshold(rec.properties)
            incremental = [s.id for s in self.catalog.visible_segments(rec.db, rec.name)
                           if s.kind == "refreshed"]
            if len(incremental) < threshold:
                return
            ids = incremental[-threshold:]
            t0 = time.monotonic()
            sid = self._compact_locked(rec, ids)
            log.info("datamap %s: auto-compaction merged segments %s into %s in %.2fs",
                     rec.qualified, ",".join(ids), sid, time.monotonic() - t0)
        except Exception as e:  # noqa: BLE001 - see the docstring
            log.warning("auto-compaction of datamap %s failed: %s", rec.qualified, describe(e)[0],
                        exc_info=not logged(e))
            try:
                self.catalog.record_event(rec.db, rec.name, "auto-compaction-failed",
                                          detail=describe(e)[0][:500])
            except CatalogError:
                pass   # dropped meanwhile

    # -- maintenance ---------------------------------------------------------------------
    def sync_base_files(self, table: str, source: str = "discovered",
                        rewritten: bool = False) -> bool:
        """Cut a base segment for files the catalog does not know yet. Returns True when
        known files disappeared (overwrite, truncate, delete, DROP PARTITION): a full
        rebuild is due. `rewritten`: the caller knows contents were replaced (INSERT
        OVERWRITE, LOAD DATA ... OVERWRITE), even if the file names look unchanged."""
        return self.sync_base(table, source, rewritten).replaced

    def sync_base(self, table: str, source: str = "discovered",
                  rewritten: bool = False) -> BaseSync:
        """sync_base_files, reporting what it found."""
        with self._lock(f"base:{table}"):
            current = set(list_files(self.spark, table))
            known = self.catalog.base_files(table)
            added, removed = len(current - known), len(known - current)
            replaced = bool(removed or (rewritten and known))
            seg = None
            if replaced:
                self.catalog.mark_base_deleted(table)
                if current:
                    seg = self.catalog.add_base_segment(table, sorted(current), source=source)
            elif added:
                seg = self.catalog.add_base_segment(table, sorted(current - known),
                                                    source=source)
            return BaseSync(table, seg.id if seg else None, added, removed, replaced)

    def refresh(self, db: str, name: str, synced: Iterable[str] = ()) -> str:
        """Bring the datamap in sync (REBUILD / after a load): incremental when possible.
        Returns what happened: "refreshed", "rebuilt", "enabled" (nothing to catch up, was
        DISABLED) or "unchanged". `synced`: base tables the caller has just cut a segment
        of (sync_base), which are not listed again (files added since are cut by the
        caller that added them, or by the next sync)."""
        rec = self.catalog.get_datamap(db, name)
        if rec is None:
            raise ClientError(f"Datamap {db}.{name} does not exist", "42S02")
        with self._lock(rec.qualified):
            return self._refresh_locked(rec, frozenset(synced))

    def _refresh_locked(self, rec: DatamapRecord, synced: frozenset[str] = frozenset()) -> str:
        t0 = time.monotonic()
        defn = rec.definition
        self._drop_garbage(rec)   # segments superseded long enough ago
        try:
            rewritten = [t not in synced and self.sync_base_files(t)
                         for t in dict.fromkeys(defn.base_tables)]
        except Exception as e:  # noqa: BLE001
            raise job_failed(e, f"Listing the base tables of datamap {rec.qualified}") from e
        visible = self.catalog.visible_segments(rec.db, rec.name)
        if (any(rewritten) or not visible
                or self.catalog.covers_deleted_base_segments(rec.db, rec.name)):
            self._build(rec, [s.id for s in visible])
            return "rebuilt"
        pending = {t: segs for t, segs in
                   self.catalog.pending_base_segments(rec.db, rec.name).items() if segs}
        if not pending:
            if self.catalog.get_datamap(rec.db, rec.name).status != ENABLED:
                self.catalog.set_status(rec.db, rec.name, ENABLED, "")
                return "enabled"
            return "unchanged"
        plan = plan_delta(defn, pending)
        if plan.full_rebuild:
            self._build(rec, [s.id for s in visible])
            return "rebuilt"
        covered = self.catalog.covered_base_segments(rec.db, rec.name)
        old_files = {t: [f for s in self.catalog.base_segments(t) if s.id in covered.get(t, ())
                         for f in s.files] for t in defn.base_tables}
        new_files = {t: [f for s in segs for f in s.files] for t, segs in pending.items()}
        sid = self.catalog.begin_segment(rec.db, rec.name,
                                         {t: [s.id for s in segs] for t, segs in pending.items()})
        t_job = time.monotonic()
        try:
            res = incremental_append(self.spark, defn, sid, new_files, old_files, rec.properties)
        except Exception as e:
            self.catalog.fail_segment(rec.db, rec.name, sid, f"refresh failed: {describe(e)[0]}")
            raise job_failed(e, f"Refreshing datamap {rec.qualified}") from e
        if res.write is None:   # the plan said incremental; nothing was written
            self.catalog.fail_segment(rec.db, rec.name, sid, res.reason or "nothing written",
                                      disable=False)
            if res.full_rebuild:
                self._build(rec, [s.id for s in visible])
                return "rebuilt"
            return "unchanged"
        self.catalog.publish_segment(rec.db, rec.name, sid, rows=res.write.rows,
                                     files=res.write.files, seconds=res.write.seconds,
                                     kind="refreshed")
        log.info("datamap %s: segment %s appended (%d rows) in %.2fs: sync+plan %.2fs, "
                 "job %.2fs", rec.qualified, sid, res.write.rows, time.monotonic() - t0,
                 t_job - t0, time.monotonic() - t_job)
        self._auto_compact(rec)
        return "refreshed"

    def _build(self, rec: DatamapRecord, supersede: list[str]) -> None:
        live = {t: [s.id for s in self.catalog.base_segments(t)] for t in rec.base_tables}
        sid = self.catalog.begin_segment(rec.db, rec.name, live)
        try:
            w = full_build(self.spark, rec.definition, sid, rec.properties)
        except Exception as e:
            self.catalog.fail_segment(rec.db, rec.name, sid, f"build failed: {describe(e)[0]}")
            if isinstance(e, PipelineError):
                raise _client(e) from e
            raise job_failed(e, f"Building datamap {rec.qualified}") from e
        self.catalog.publish_segment(rec.db, rec.name, sid, rows=w.rows, files=w.files,
                                     seconds=w.seconds, supersedes=supersede, kind="built")
        self._drop_garbage(rec)

    def _drop_garbage(self, rec: DatamapRecord) -> None:
        """Remove the partitions of invisible segments. A superseded segment (rebuild,
        compaction) is kept for `garbage_grace_s` after it was first seen hidden: a query
        rewritten just before the publish still names it and must find its rows. Such
        segments are dropped by a later maintenance run on the datamap (or at restart by
        recover()). Failed segments were never visible and go at once."""
        now = time.monotonic()
        garbage = []
        for seg in self.catalog.garbage_segments(rec.db, rec.name):
            key = (rec.qualified, seg.id)
            hidden_at = self._hidden_at.setdefault(key, now)
            if seg.status == "FAILED" or now - hidden_at >= self.garbage_grace_s:
                garbage.append(seg.id)
        if garbage:
            try:
                drop_segments(self.spark, rec.definition, garbage)
                self.catalog.mark_dropped(rec.db, rec.name, garbage)
                for sid in garbage:
                    self._hidden_at.pop((rec.qualified, sid), None)
            except Exception:  # noqa: BLE001 - invisible anyway; recover() retries
                log.warning("could not drop segments %s of %s", garbage, rec.qualified,
                            exc_info=True)

    def after_load(self, table: str, source: str = "proxy-load", overwrite: bool = False) -> None:
        """A statement that passed through the proxy changed `table`: cut its segment,
        refresh the non-lazy datamaps over it, disable the lazy ones. `overwrite`: it
        replaced contents (INSERT OVERWRITE, LOAD DATA ... OVERWRITE): rebuild."""
        recs = self.catalog.list_datamaps(base_table=table)
        if not recs:
            return
        try:
            self.schemas([table], refresh=True)   # here, in a worker thread, not on the loop
            self.sync_base_files(table, source, rewritten=overwrite)
        except Exception as e:  # noqa: BLE001 - the load itself succeeded upstream
            log.warning("cannot list %s after a load; disabling its datamaps", table,
                        exc_info=True)
            for rec in recs:
                self._disable(rec, f"base table {table} changed and could not be listed: {e}")
            return
        self.catalog.disable_on_table_change(table, f"base table {table} changed")
        for rec in recs:
            if rec.lazy:
                continue
            try:
                self.refresh(rec.db, rec.name, synced=[table])
            except Exception as e:  # noqa: BLE001 - never serve it stale; the load stands
                log.warning("refresh of %s after a load of %s failed: %s", rec.qualified, table,
                            describe(e)[0], exc_info=not logged(e))
                self._disable(rec, f"refresh after a load of {table} failed: {describe(e)[0]}")

    def after_drop_table(self, table: str) -> list[str]:
        """The base table was dropped through the proxy: drop its datamaps (and their
        tables) and forget its segments. Returns the dropped datamaps."""
        gone = []
        for rec in self.catalog.list_datamaps(base_table=table):
            with self._lock(rec.qualified):
                try:
                    self._drop_everything(rec)
                    gone.append(rec.qualified)
                except Exception:  # noqa: BLE001 - at least keep it from being used
                    log.warning("dropping datamap %s after DROP TABLE %s failed",
                                rec.qualified, table, exc_info=True)
                    self._disable(rec, f"base table {table} was dropped")
        self.catalog.forget_base_table(table)
        self._schema_cache.pop(table, None)
        return gone

    def adopt_time_zone(self, zone: str, align: Callable[[str], object] | None = None,
                        rebuild: bool = True, lock: bool = True) -> list[str]:
        """The zone queries bucket timestamps in is now `zone` (the upstream's default in
        remote mode, the engine's in embedded mode). `align(zone)` makes the pipeline
        session use it too. The catalog records the zone its datamaps were computed under;
        when that differs, the datamaps whose rows depend on it are hidden and disabled
        (the reason says why), and with `rebuild` the non-lazy ones are built again under
        the new zone (lazy ones wait for REBUILD). The switch happens while no job of such
        a datamap runs (their locks are held), so no segment mixes two zones. Returns the
        datamaps invalidated.

        `lock=False` is for the moment the pipeline session opens: a thread holding a
        datamap's lock may be waiting for that very session (taking the lock there would
        deadlock), and no job has computed anything yet. Jobs read the visible segments
        only after their first use of Spark, except compaction, whose publish is refused
        when the segments it merged were hidden meanwhile (Catalog.publish_segment)."""
        from proxy.timezone import same_zone

        def dependent(rec: DatamapRecord) -> bool:
            try:
                return self._time_dependent(rec) is not None
            except Exception:  # noqa: BLE001 - schema unreadable: assume it depends
                return True
        recorded = self.catalog.setting("time_zone")
        if recorded is None or same_zone(recorded, zone):
            if align is not None:
                align(zone)
            if recorded is None:    # the first record (or a catalog from before it was kept)
                self.catalog.set_setting("time_zone", zone)
            return []
        recs = sorted(filter(dependent, self.catalog.list_datamaps()), key=lambda r: r.qualified)
        with ExitStack() as held:
            for rec in recs if lock else ():
                held.enter_context(self._lock(rec.qualified))
            if align is not None:
                align(zone)
            for rec in recs:
                self.catalog.invalidate_datamap(
                    rec.db, rec.name,
                    f"the session time zone changed from {recorded} to {zone} after "
                    f"datamap {rec.qualified} was built: REBUILD DATAMAP rebuilds it")
            self.catalog.set_setting("time_zone", zone)
        log.warning("time zone %s (datamaps were computed under %s): datamaps %s invalidated",
                    zone, recorded, ", ".join(r.qualified for r in recs) or "(none)")
        if rebuild:
            self.rebuild_invalidated([r.qualified for r in recs])
        return [rec.qualified for rec in recs]

    def rebuild_invalidated(self, names: Iterable[str]) -> None:
        """Build the non-lazy datamaps among `names` ("db.name") again; failures are logged
        and leave them DISABLED with their reason."""
        for qualified in names:
            db, _, name = qualified.partition(".")
            rec = self.catalog.get_datamap(db, name)
            if rec is None or rec.lazy:
                continue
            try:
                self.refresh(db, name)
            except Exception as e:  # noqa: BLE001 - see the docstring
                log.warning("rebuilding datamap %s failed: %s", qualified, describe(e)[0],
                            exc_info=not logged(e))

    def _disable(self, rec: DatamapRecord, reason: str) -> None:
        try:
            self.catalog.set_status(rec.db, rec.name, "DISABLED", reason[:500])
        except CatalogError:
            pass  # dropped meanwhile

    def recover(self) -> dict[str, list[str]]:
        """At start: segments left INSERT_IN_PROGRESS by a crash are failed, and partitions
        the catalog does not show are dropped. Returns the dropped ids per datamap."""
        dropped: dict[str, list[str]] = {}
        for rec in self.catalog.list_datamaps():
            for seg in self.catalog.segments(rec.db, rec.name):
                if seg.status == "INSERT_IN_PROGRESS":
                    self.catalog.fail_segment(rec.db, rec.name, seg.id,
                                              "interrupted by a restart", disable=False)
            keep = [s.id for s in self.catalog.visible_segments(rec.db, rec.name)]
            gone = cleanup_orphans(self.spark, rec.definition, keep)
            self.catalog.mark_dropped(rec.db, rec.name, gone)
            dropped[rec.qualified] = gone
        return dropped

    # -- rewriting -----------------------------------------------------------------------
    def candidates(self) -> list[Candidate]:
        """ENABLED, in-sync datamaps with their visible segments and row counts."""
        return self._offer()[0]

    def _offer(self) -> tuple[list[Candidate], dict[str, tuple[tuple[str, ...], str]]]:
        """The candidates, and the datamaps left out with why ("db.name" -> (base tables,
        reason)). The rewriter keys datamaps by "db.name", so same-named datamaps of two
        databases are both offered."""
        out = []
        left_out: dict[str, tuple[tuple[str, ...], str]] = {}
        for rec in self.catalog.list_datamaps():
            if rec.definition is None:
                left_out[rec.qualified] = (rec.base_tables, "datamap has no compiled definition")
                continue
            reason = self.catalog.unavailable_reason(rec.db, rec.name)
            if reason is None and self.time_zone_problem:
                why = self._time_dependent(rec)
                if why:
                    reason = f"not used: {why}, and {self.time_zone_problem}"
            if reason is not None:
                left_out[rec.qualified] = (rec.base_tables, reason)
                continue
            definition = rec.definition
            if definition.qualified != rec.qualified:   # the catalog's name is its identity
                definition = dataclasses.replace(definition, database=rec.db, name=rec.name,
                                                 table=rec.table)
            visible = self.catalog.visible_segments(rec.db, rec.name)
            out.append(Candidate(definition,
                                 rows=sum(s.rows or 0 for s in visible),
                                 one_row_per_group=len(visible) <= 1,
                                 segments=tuple(s.id for s in visible)))
        return out, left_out

    def unavailable(self, tables: Iterable[str]) -> dict[str, str]:
        """EXPLAIN only: datamaps over any of `tables` ("db.table") that the current index
        was not offered (DISABLED, not in sync, time zone unknown), "db.name" -> reason.
        Read from what the last index build saw: nothing is computed on the SELECT path."""
        wanted = set(tables)
        return {name: reason for name, (bases, reason) in self._unavailable.items()
                if wanted.intersection(bases)}

    def _time_dependent(self, rec: DatamapRecord) -> str | None:
        from proxy.timezone import time_dependent
        # The index needs these schemas anyway (index() loads them right after).
        schemas = self.schemas(rec.definition.base_tables)
        return time_dependent(rec.definition.select_sql, schemas)

    def index(self):
        """The rewriter's DatamapIndex for the current catalog version (rebuilt on change)."""
        version = self.catalog.recent_version()   # every SELECT: no SQLite on the hot path
        if self._index is not None and self._index_version == version:
            return self._index
        with self._index_guard:
            if self._index is None or self._index_version != version:
                from rewriter import DatamapIndex
                cands, self._unavailable = self._offer()
                tables = {t for c in cands for t in c.definition.base_tables}
                with self._schema_guard:    # only what is loaded: never Spark on the loop
                    tables |= {t for t in self._extra_tables if t in self._schema_cache}
                self._index = DatamapIndex(cands, self.schemas(sorted(tables)), version)
                self._index_version = version
            return self._index

