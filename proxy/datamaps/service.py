"""DatamapService: the datamap parts built on one catalog and one SparkSession provider,
behind the interface the router handlers and proxy/app.py use.

    schemas.SchemaCache              base tables' schemas, cached; background loader
    commands.DatamapCommands         the DDL runners (CREATE/DROP/SHOW/REBUILD/COMPACT/SYNC;
                                     the query rewrite switch is the catalog's set_rewrite)
    maintenance.Maintenance          refresh, build, after-load hooks, recovery
    compaction.Compaction            COMPACT and auto-compaction; SegmentGarbage drops
                                     the partitions of hidden segments
    live_view.LiveViews              `<name>_table`: the view of the live segments
    zone_policy.ZoneReader, TimeZonePolicy  the zone the datamaps were computed under:
                                     why one depends on it; acting on a change
    rewrite_index.RewriteIndexProvider  candidates and the rewriter's DatamapIndex
    stacking, finer                  datamaps on datamaps: the dependency graph, and
                                     full builds that read a finer datamap

Every method blocks (SQLite, py4j) except request_schemas, index (when current) and
unavailable; asyncio callers use `asyncio.to_thread`.
"""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Callable, Iterable

from pipeline import table_layout
from proxy.datamaps.catalog.store import Catalog
from proxy.datamaps.ddl import parser as ddl
from proxy.datamaps.ddl.commands import DatamapCommands, referenced_tables
from proxy.datamaps.ddl.index_providers import CreateIndexDatamap
from proxy.datamaps.ddl.words import EMPTY
from proxy.datamaps.freshness.guard import FreshnessGuard
from proxy.datamaps.freshness.sync import BackgroundSyncs, propagate
from proxy.datamaps.indexes.commands import DEFAULT_MAX_BLOOM_BYTES, IndexService
from proxy.datamaps.locks import KeyedLocks
from proxy.datamaps.rewrite.candidates import RewriteIndexProvider
from proxy.datamaps.schemas import SchemaCache, Schemas
from proxy.datamaps.upkeep.compaction import Compaction, SegmentGarbage
from proxy.datamaps.upkeep.finer import finer_source
from proxy.datamaps.upkeep.live_view import LiveViews
from proxy.datamaps.upkeep.maintenance import BaseSync, Maintenance, RefreshOutcome
from proxy.datamaps.zones.policy import TimeZonePolicy, ZoneReader
from proxy.engine.timezone import same_zone
from proxy.errors import ClientError
from proxy.routing.router import LocalResult
from rewriter.api import Candidate

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["DatamapService", "EMPTY", "READING", "referenced_tables"]

# why no datamap answers before the rewrite index's first read of the catalog (the warm-up
# thread's), when none is known by name yet; then each says rewrite/candidates.py WARMING
READING = "rewrite index warming: reading the datamaps from the catalog"


class DatamapService:
    """`spark_provider()` returns the SparkSession pipeline jobs run on (created lazily by
    the engine). `schemas_provider(tables)` returns their Schemas; by default read from
    Spark and cached until a datamap over the table is refreshed or rebuilt."""

    def __init__(self, catalog: Catalog, spark_provider: Callable[[], "SparkSession"],
                 schemas_provider: Callable[[Iterable[str]], dict] | None = None, *,
                 leases=None, auto_compaction: bool = False,
                 max_bloom_bytes: int = DEFAULT_MAX_BLOOM_BYTES,
                 on_indexed: Callable[[str], None] | None = None):
        """leases: the serve run's proxy.ha.leader.LeaseKeeper (replicas: each datamap's jobs
        hold a lease), None in one process. auto_compaction: [datamaps] auto_compaction;
        max_bloom_bytes: [indexes] max_bloom_bytes; on_indexed(table): an index datamap on
        `table` was built (serve's pruner loads the table's shape then)."""
        self.catalog = catalog
        self.spark_provider = spark_provider
        spark = self._spark    # the parts see a provider swapped in later (tests)

        locks = self.locks = KeyedLocks(leases)   # one per datamap / base table: jobs, audits
        self.schema_cache = SchemaCache(spark, schemas_provider)
        self.garbage = SegmentGarbage(catalog, spark, LiveViews(catalog, spark))
        self.compaction = Compaction(catalog, spark, locks, self.garbage,
                                     auto_default=auto_compaction)
        self.zone_reader = ZoneReader(self.schema_cache)
        self.rewrite_index = RewriteIndexProvider(catalog, self.schema_cache, self.zone_reader)
        self.guard = FreshnessGuard(self._table_layout, self.request_sync)
        self.maintenance = Maintenance(
            catalog, spark, self.schema_cache, locks, self.garbage, self.compaction,
            guard=self.guard, after_change=lambda recs: propagate(self.maintenance, recs),
            build_source=functools.partial(finer_source, catalog, self.rewrite_index.candidates,
                                           self.schema_cache.schemas))
        self.zones = TimeZonePolicy(catalog, self.zone_reader, locks, self.maintenance)
        # why no datamap answers while the engine runs with result-affecting settings away
        # from Spark's defaults (proxy/datamaps/zones/pipeline.py sets it; None: they answer)
        self.engine_settings_problem: str | None = None
        self.commands = DatamapCommands(catalog, spark, self.schema_cache, locks,
                                        self.maintenance, self.compaction)
        self._syncs = BackgroundSyncs(self.maintenance)
        self.indexes = IndexService(catalog, spark, locks, max_bloom_bytes,   # minmax, bloom
                                    on_indexed=on_indexed)

    def _table_layout(self, table: str) -> dict:
        return table_layout(self._spark(), table)

    def request_sync(self, table: str) -> None:
        """Sync `table` and refresh its datamaps in the background (the freshness guard saw
        files no segment covers); returns at once."""
        self._syncs.request(table)

    def _spark(self) -> "SparkSession":
        return self.spark_provider()

    def close(self) -> None:
        self.rewrite_index.close()
        self._syncs.close()
        self.schema_cache.close()

    # Settings proxy/app.py and the tests set on the service.
    @property
    def auto_compaction(self) -> bool:
        return self.compaction.auto_default

    @auto_compaction.setter
    def auto_compaction(self, on: bool) -> None:
        self.compaction.auto_default = on

    @property
    def garbage_grace_s(self) -> float:
        return self.garbage.grace_s

    @garbage_grace_s.setter
    def garbage_grace_s(self, seconds: float) -> None:
        self.garbage.grace_s = seconds

    @property
    def time_zone_problem(self) -> str | None:
        return self.zone_reader.problem

    @time_zone_problem.setter
    def time_zone_problem(self, why: str | None) -> None:
        self.zone_reader.problem = why

    # -- DDL (ddl/commands.py) -----------------------------------------------------------
    # Index datamaps (proxy/datamaps/indexes) share the DROP / SHOW / REBUILD statements and the
    # name space with mv datamaps, so each of those asks the index side first.
    def create(self, stmt: ddl.CreateDatamap | CreateIndexDatamap,
               current_db: str) -> LocalResult:
        if isinstance(stmt, CreateIndexDatamap):
            return self.indexes.create(stmt, current_db)
        taken = self.indexes.store.get(stmt.name.db or current_db, stmt.name.name)
        if taken is not None:
            raise ClientError(f"Datamap {taken.qualified} already exists", "42710")
        return self.commands.create(stmt, current_db)

    def drop(self, stmt: ddl.DropDatamap, current_db: str) -> LocalResult:
        try:
            info = self.indexes.find(stmt.name, stmt.on_table, current_db)
        except ClientError:              # an index datamap on another table
            if stmt.if_exists:
                return EMPTY
            raise
        if info is not None:
            self.indexes.drop(info)
            return EMPTY
        try:
            rec = self.commands.require(stmt.name, stmt.on_table, current_db)
        except ClientError:
            rec = None
        result = self.commands.drop(stmt, current_db)
        if rec is not None:          # its table is gone: so are the indexes on it
            self.indexes.drop_on(rec.table)
        return result

    def show(self, stmt: ddl.ShowDatamaps, current_db: str) -> LocalResult:
        shown = self.commands.show(stmt, current_db)
        if stmt.syntax == "mv":      # SHOW MATERIALIZED VIEWS: mv datamaps only
            return shown
        table = stmt.on_table.qualified(current_db).lower() if stmt.on_table else None
        return LocalResult(shown.columns, list(shown.rows) + self.indexes.rows(table))

    def show_segments(self, stmt: ddl.ShowSegments, current_db: str) -> LocalResult:
        return self.commands.show_segments(stmt, current_db)

    def rebuild(self, stmt: ddl.RebuildDatamap, current_db: str) -> LocalResult:
        info = self.indexes.find(stmt.name, stmt.on_table, current_db)
        if info is not None:
            self.indexes.rebuild(info)
            return EMPTY
        result = self.commands.rebuild(stmt, current_db)
        self.indexes.sync(self.commands.require(stmt.name, stmt.on_table, current_db).table)
        return result

    def compact(self, stmt: ddl.CompactDatamap, current_db: str) -> LocalResult:
        result = self.commands.compact(stmt, current_db)
        self.indexes.sync(self.commands.require(stmt.name, None, current_db).table)
        return result

    def set_rewrite(self, stmt: ddl.AlterRewrite, current_db: str, by: str = "") -> LocalResult:
        """ALTER DATAMAP ... ENABLE | DISABLE QUERY REWRITE; `by` names who, for its history."""
        info = self.indexes.find(stmt.name, None, current_db)
        if info is not None:
            raise ClientError(f"Datamap {info.qualified} is an index datamap: it skips files "
                              "and answers no query itself, so QUERY REWRITE does not apply "
                              "(DROP it to stop its use)", "0A000")
        rec = self.commands.require(stmt.name, None, current_db)
        self.catalog.set_rewrite(rec.db, rec.name, stmt.enabled, f"by {by}" if by else "")
        return EMPTY

    def sync(self, stmt: ddl.SyncDatamaps, current_db: str) -> LocalResult:
        result = self.commands.sync(stmt, current_db)
        self.indexes.sync_tables(stmt.on_table.qualified(current_db).lower()
                                 if stmt.on_table else None)
        return result

    def sync_all(self) -> LocalResult:
        result = self.commands.sync_all()
        self.indexes.sync_tables(None)
        return result

    # -- maintenance (upkeep/maintenance.py) ---------------------------------------------
    def refresh(self, db: str, name: str, synced: Iterable[str] = ()) -> RefreshOutcome:
        return self.maintenance.refresh(db, name, synced)

    def sync_base(self, table: str, source: str = "discovered",
                  rewritten: bool = False) -> BaseSync:
        return self.maintenance.sync_base(table, source, rewritten)

    def sync_base_files(self, table: str, source: str = "discovered",
                        rewritten: bool = False) -> bool:
        return self.maintenance.sync_base_files(table, source, rewritten)

    def after_load(self, table: str, source: str = "proxy-load", overwrite: bool = False,
                   started: float | None = None) -> None:
        self.maintenance.after_load(table, source, overwrite, started)
        self.indexes.after_load(table, overwrite)   # after the mv refreshes: theirs too

    def after_drop_table(self, table: str) -> list[str]:
        gone = self.maintenance.after_drop_table(table)
        gone += self.indexes.drop_on(table)
        for name in list(gone):
            gone += self.indexes.drop_on(f"{name}_table")
        return gone

    def recover(self) -> dict[str, list[str]]:
        return self.maintenance.recover()

    # -- time zone (zones/policy.py) -----------------------------------------------------
    def adopt_time_zone(self, zone: str, align: Callable[[str], object] | None = None,
                        rebuild: bool = True, lock: bool = True) -> list[str]:
        before = self.catalog.setting("time_zone")
        gone = self.zones.adopt(zone, align, rebuild, lock)
        if before is not None and not same_zone(before, zone):
            gone += self.indexes.zone_changed(before, zone)
        return gone

    def adopt_engine_settings(self, settings: str, align: Callable[[], object] | None = None,
                              rebuild: bool = True, lock: bool = True) -> list[str]:
        return self.zones.adopt_settings(settings, align, rebuild, lock)

    def rebuild_invalidated(self, names: Iterable[str]) -> None:
        self.zones.rebuild_invalidated(names)

    # -- rewriting (rewrite/candidates.py, schemas.py) -----------------------------------
    def index(self):
        return self.rewrite_index.index()

    def candidates(self) -> list[Candidate]:
        return self.rewrite_index.candidates()

    def freshness(self, name: str):
        return self.rewrite_index.freshness(name)

    def unavailable(self, tables: Iterable[str]) -> dict[str, str]:
        """Datamaps over `tables` left out of the rewrite index, "db.name" -> why; before
        its first read of the catalog one reason named after no datamap ("" -> READING)."""
        if self.rewrite_index.reading:
            return {"": READING}
        return self.rewrite_index.unavailable(tables)

    def left_out_tables(self) -> frozenset[str] | None:
        """The tables of those datamaps; None before the first read of the catalog (any
        table may have one)."""
        return None if self.rewrite_index.reading else self.rewrite_index.left_out_tables()

    def known_schemas(self) -> dict | None:
        return self.rewrite_index.known_schemas()

    def schemas(self, tables: Iterable[str], refresh: bool = False) -> Schemas:
        return self.schema_cache.schemas(tables, refresh)

    def invalidate_schemas(self, table: str | None = None) -> None:
        self.schema_cache.invalidate(table)

    def request_schemas(self, tables: Iterable[str]) -> None:
        self.schema_cache.request(tables)

    def load_schemas(self, tables: Iterable[str]) -> None:
        self.schema_cache.load(tables)
