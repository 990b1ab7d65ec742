"""The datamap DDL: one blocking runner per statement of proxy/datamaps/ddl/parser.py.

Names resolve against the statement's database (or its ON TABLE's); client-facing
failures are `proxy.errors.ClientError` with the contract's SQLSTATE.
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Callable

from pipeline import create_table, table_exists, with_spark_types
from pipeline.table import PipelineError
from proxy.datamaps.catalog.records import CatalogError, DatamapRecord
from proxy.datamaps.catalog.store import Catalog
from proxy.datamaps.ddl import parser as ddl
from proxy.datamaps.ddl.creating import Running, creating
from proxy.datamaps.ddl.show import show_datamaps, show_segments
from proxy.datamaps.ddl.words import EMPTY
from proxy.datamaps.failures import job_failed
from proxy.datamaps.freshness.sync import propagate, sync_datamaps
from proxy.datamaps.locks import KeyedLocks
from proxy.datamaps.schemas import SchemaCache
from proxy.datamaps.upkeep.compaction import Compaction
from proxy.datamaps.upkeep.job_progress import stage
from proxy.datamaps.upkeep.maintenance import Maintenance, RefreshOutcome, client_error
from proxy.datamaps.upkeep.stacking import check_create, check_drop
from proxy.errors import ClientError
from proxy.routing.router import LocalResult
from rewriter import compile_datamap
from rewriter.api import DatamapDefinitionError
from rewriter.distinct import SketchDefinitionError, sketch_definition

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


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


class DatamapCommands:
    def __init__(self, catalog: Catalog, spark: Callable[[], "SparkSession"],
                 schemas: SchemaCache, locks: KeyedLocks, maintenance: Maintenance,
                 compaction: Compaction):
        self.catalog = catalog
        self._spark = spark
        self._schemas = schemas
        self._locks = locks
        self._maintenance = maintenance
        self._compaction = compaction

    def require(self, name: ddl.Name, on_table: ddl.Name | None,
                current_db: str) -> DatamapRecord:
        """The datamap a statement names, or 42S02."""
        db = name.db or (on_table.db if on_table else None) or current_db
        dm = name.name
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

    def create(self, stmt: ddl.CreateDatamap, current_db: str) -> LocalResult:
        tables = referenced_tables(stmt.select_sql, current_db,
                                   f"datamap {stmt.name.qualified(current_db)}")
        # SHOW DATAMAP shows it from now on (the database is its first table's until the
        # SELECT is compiled); not a datamap that exists already (IF NOT EXISTS, 42710)
        db = stmt.name.db or (tables[0].partition(".")[0] if tables else current_db)
        if self.catalog.get_datamap(db, stmt.name.name) is not None:
            return self._create(stmt, current_db, tables, None)
        with creating(self.catalog, db, stmt.name.name, stmt.provider, stmt.props,
                      tables) as running:
            return self._create(stmt, current_db, tables, running)

    def _create(self, stmt: ddl.CreateDatamap, current_db: str, tables: list[str],
                running: Running | None) -> LocalResult:
        schemas = self._schemas.schemas(tables)
        try:
            # DMPROPERTIES('distinct_sketch'='hll'): approx_count_distinct stored as sketches
            select_sql = sketch_definition(stmt.select_sql, stmt.props)
        except SketchDefinitionError as e:
            raise ClientError(f"Datamap {stmt.name.qualified(current_db)}: {e}", "42000") from None
        try:
            definition = compile_datamap(stmt.name.name, select_sql, schemas, current_db)
        except DatamapDefinitionError as e:
            raise client_error(e) from None
        db = stmt.name.db or definition.database
        definition = dataclasses.replace(definition, database=db,
                                         table=f"{db}.{stmt.name.name}_table")
        if running is not None:
            running.moved(db)
        check_create(self.catalog.list_datamaps(), f"{db}.{stmt.name.name}", definition.table,
                     definition.base_tables)
        if stmt.on_table is not None:
            on = stmt.on_table.qualified(current_db)
            if on not in definition.base_tables:
                raise ClientError(f"ON TABLE {on} of datamap {db}.{stmt.name.name} is not a "
                                  f"table of its SELECT ({', '.join(definition.base_tables)})",
                                  "42000")
        try:
            definition = with_spark_types(self._spark(), definition)
        except PipelineError as e:
            raise client_error(e) from None
        except Exception as e:  # noqa: BLE001 - Spark cannot analyze the build SELECT
            raise job_failed(e, f"Creating datamap {db}.{stmt.name.name}", stmt.original_sql) from e
        with self._locks(f"{db}.{stmt.name.name}"):
            if self.catalog.get_datamap(db, stmt.name.name) is not None:
                if stmt.if_not_exists:
                    return EMPTY
                raise ClientError(f"Datamap {db}.{stmt.name.name} already exists", "42710")
            for table in (definition.table, definition.storage):
                if table_exists(self._spark(), table):
                    raise ClientError(f"Cannot create datamap {db}.{stmt.name.name}: table "
                                      f"{table} already exists", "42710")
            try:
                rec = self.catalog.create_datamap(
                    db, stmt.name.name, provider=stmt.provider, select_sql=select_sql,
                    original_sql=stmt.original_sql, base_tables=definition.base_tables,
                    lazy=stmt.lazy, properties=stmt.props, definition=definition)
            except CatalogError as e:
                if e.sqlstate == "42710" and stmt.if_not_exists:
                    return EMPTY
                raise client_error(e) from None
            try:
                create_table(self._spark(), definition, rec.properties)
                if stmt.lazy:    # `<name>_table` exists (empty) before the first REBUILD
                    self._maintenance.show_live(rec)
                else:
                    self._maintenance.refresh_locked(rec)
            except Exception as e:
                self._maintenance.drop_everything(rec)
                if isinstance(e, ClientError):
                    raise
                raise job_failed(e, f"Creating datamap {db}.{stmt.name.name}",
                                 stmt.original_sql) from e
        return EMPTY

    def drop(self, stmt: ddl.DropDatamap, current_db: str) -> LocalResult:
        try:
            rec = self.require(stmt.name, stmt.on_table, current_db)
        except ClientError:
            if stmt.if_exists:
                return EMPTY
            raise
        with self._locks(rec.qualified):
            check_drop(self.catalog.list_datamaps(), rec)
            self._maintenance.drop_everything(rec)
        return EMPTY

    def show(self, stmt: ddl.ShowDatamaps, current_db: str) -> LocalResult:
        if stmt.on_table is None:
            return show_datamaps(self.catalog, self.catalog.list_datamaps())
        table = stmt.on_table.qualified(current_db)
        return show_datamaps(self.catalog, self.catalog.list_datamaps(base_table=table),
                             on_table=table)

    def show_segments(self, stmt: ddl.ShowSegments, current_db: str) -> LocalResult:
        table = stmt.table.qualified(current_db)
        result = show_segments(self.catalog, table)
        if result is None:
            raise ClientError(f"Table {table} has no segments: it is neither a datamap table "
                              "nor a base table of a datamap", "42S02")
        return result

    def rebuild(self, stmt: ddl.RebuildDatamap, current_db: str) -> LocalResult:
        rec = self.require(stmt.name, stmt.on_table, current_db)
        outcome = self._maintenance.refresh(rec.db, rec.name)
        if outcome is RefreshOutcome.UNCHANGED:
            stage(f"datamap {rec.qualified} is in sync with its base tables: nothing to build")
        elif outcome is RefreshOutcome.ENABLED:
            stage(f"datamap {rec.qualified} was in sync with its base tables: enabled")
        propagate(self._maintenance, [rec])    # the datamaps stacked on it follow
        return EMPTY

    def sync(self, stmt: ddl.SyncDatamaps, current_db: str) -> LocalResult:
        """SYNC DATAMAPS [ON TABLE t]: proxy/datamaps/freshness/sync.py."""
        table = stmt.on_table.qualified(current_db) if stmt.on_table else None
        return sync_datamaps(self._maintenance, table)

    def sync_all(self) -> LocalResult:
        """The periodic sync of `serve` ([datamaps] sync_interval_s): every base table."""
        return sync_datamaps(self._maintenance, None)

    def compact(self, stmt: ddl.CompactDatamap, current_db: str) -> LocalResult:
        rec = self.require(stmt.name, None, current_db)
        self._compaction.compact(rec, stmt.mode, stmt.segment_ids)
        propagate(self._maintenance, [rec])    # its files changed: the ones above rebuild
        return EMPTY
