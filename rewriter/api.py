"""Public API of the rewriter: the contract between rewriter/, pipeline/ and proxy/.

Everything here is plain data. `compile_datamap` and `DatamapIndex` live in
rewriter/__init__.py (implemented by the rewriter modules); this file only fixes the
shapes that the catalog stores, the pipeline builds from, and the proxy passes in (and
`DatamapDefinition.build_sql`, whose SQL work is rewriter/build.py's).

Names: databases, tables and columns are lower-case; a table is always "db.table".
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Mapping

from rewriter.build import swap_sources

# db -> table -> column -> Spark type string ("int", "decimal(10,2)", "timestamp", ...).
# Column order is the table's column order.
Schemas = Mapping[str, Mapping[str, Mapping[str, str]]]

# What one stored column of a datamap table holds.
#   group     a grouping expression (one value per group)
#   agg       a partial aggregate that re-aggregates: sum, count, count_star, min, max
#   column    a plain projected expression of a projection-only (SPJ) datamap
ColumnRole = Literal["group", "agg", "column"]
AggKind = Literal["sum", "count", "count_star", "min", "max", "hll"]
# "hll": a mergeable HLL sketch, hll_sketch_agg(x, lgConfigK) (type binary); segments and
# compaction merge it with hll_union_agg (rewriter/distinct.py).

# Every datamap's storage table is partitioned by this string column (last column, not in
# `columns`): one partition per datamap segment. A refresh writes a new partition that no
# rewritten query reads until the catalog lists it as visible, so publishing is one catalog
# commit, and readers see the datamap before or after a refresh, never half of it.
SEGMENT_COLUMN = "dm_segment_id"

# The storage table holds every segment's partition, superseded ones included for a grace
# period; `<name>_table` itself is a view of the live segments only (pipeline/live.py), so
# a plain SELECT on it never counts a superseded, failed or half-written segment.
STORAGE_SUFFIX = "_segments"


def storage_table(table: str) -> str:
    """The storage table behind datamap table `table` ("db.<name>_table")."""
    return table + STORAGE_SUFFIX


@dataclass(frozen=True)
class StoredColumn:
    name: str            # column name in the datamap table
    role: ColumnRole
    expr_sql: str        # Spark SQL over the base tables: grouping/projected expression, or the
                         # aggregate call as stored ("sum(db.t.x)", "count(*)")
    type: str            # Spark type string of the stored column
    agg: AggKind | None = None


@dataclass(frozen=True)
class DatamapDefinition:
    """A compiled datamap. Cheap to rebuild from (name, select_sql, schemas, current_db)."""
    name: str
    database: str
    table: str                       # "db.<name>_table"
    select_sql: str                  # the definition's SELECT as the user wrote it
    base_tables: tuple[str, ...]     # "db.table", in FROM order
    columns: tuple[StoredColumn, ...]
    is_aggregate: bool               # SPJG (True) or SPJ projection-only (False)
    join_kinds: tuple[str, ...] = () # one per join, in order: "inner" | "left" | ...
    version: int = 1                 # compiled-form version; bump when the layout logic changes
    # Filled by compile_datamap (added fields): the definition fully qualified (db.table AS
    # alias, qualified columns; what the matcher recompiles from without current_db), and
    # the SELECT that materialises `columns` over the base tables (what build_sql reads).
    qualified_sql: str = ""
    build_select: str = ""
    # How a load is caught up with (added fields): "incremental" (a segment of the new rows'
    # partials appended), or "full" (rebuilt from the whole base tables: a construct no
    # increment exists for, rewriter/rebuilt.py), and why, in a phrase SHOW DATAMAP prints.
    refresh: str = "incremental"
    refresh_reason: str = ""

    @property
    def storage(self) -> str:
        """"db.<name>_table_segments": where the segments' partitions live."""
        return storage_table(self.table)

    @property
    def qualified(self) -> str:
        """"db.name": the datamap's identity (a name is unique per database only)."""
        return f"{self.database}.{self.name}"

    def build_sql(self, sources: Mapping[str, str] | None = None) -> str:
        """SELECT that produces exactly `columns` (same names, order, types) from the base
        tables. `sources` maps "db.table" to the relation to read instead (a table or temp
        view name), which is how incremental and delta-join builds read only new files."""
        if not self.build_select:
            raise DatamapDefinitionError(f"datamap {self.name}: definition was not compiled", "HY000")
        return swap_sources(self.build_select, sources or {})


@dataclass(frozen=True)
class Candidate:
    """A datamap the caller offers to the rewriter: ENABLED and in sync."""
    definition: DatamapDefinition
    rows: int | None = None          # row count of the datamap table: the cost
    one_row_per_group: bool = True   # False once incremental appends left partial aggregates
    # Segment ids visible to readers. None = read the whole table (tests, single-segment
    # tables built outside the catalog). Otherwise the rewriter reads the datamap table as
    # `(SELECT <columns> FROM <table> WHERE dm_segment_id IN ('0','3')) <alias>`: the ids
    # fixed at rewrite time, so a publish that hides them later (their partitions stay for
    # a grace period) cannot empty a query already rewritten.
    segments: tuple[str, ...] | None = None
    # The table read, when not `definition.table`: the proxy names the storage table
    # (definition.storage), which holds every segment; `<name>_table` is a view of the
    # live ones only.
    storage: str | None = None
    # Compensation for base files no segment covers yet: "db.table" -> a relation (Spark
    # SQL: a table name or a parenthesised SELECT) holding only those new rows. The rewriter
    # then reads the datamap as its segments (the whole table when segments is None) UNION
    # ALL the definition's build SELECT over the relation (the other base tables read
    # whole) and always re-aggregates (one_row_per_group is ignored). Exact only when the
    # definition is linear in that table (rewriter/compensation.py): one entry, a table the
    # datamap reads once and not on the NULL-extended side of an outer join; any other
    # delta makes the datamap refuse the query ("union compensation refused: ...").
    delta: tuple[tuple[str, str], ...] = ()


@dataclass
class RewriteResult:
    sql: str                          # what to send upstream (the original text when unchanged)
    rewritten: bool                   # True when sql differs from the input (datamap or timeseries)
    # Datamaps are named "db.name" (DatamapDefinition.qualified): two databases may each
    # have a datamap of the same name.
    used: list[str] = field(default_factory=list)          # datamaps used
    skipped: dict[str, str] = field(default_factory=dict)  # candidate -> one-line reason
    # Tables the statement reads (next to tables with datamaps) whose schemas the index was
    # not given: the caller may load them and build a new index; nothing was rewritten.
    missing_schemas: list[str] = field(default_factory=list)
    # The rewritten statement as a sqlglot tree (Spark dialect) when the rewriter has it:
    # the serving tier emits its engine's SQL from it without parsing `sql` again. Shared
    # by every caller of a cached result: read it, never change it.
    tree: object | None = field(default=None, repr=False, compare=False)
    # Aggregates answered with an estimate from a stored sketch (rewriter/distinct.py), one
    # line each; only when the caller allowed approximate answers. Empty: the answer is
    # what Spark computes on the base tables.
    approximate: list[str] = field(default_factory=list)


class DatamapDefinitionError(Exception):
    """A datamap definition the rewriter cannot accept. `sqlstate` per contract.md."""

    def __init__(self, message: str, sqlstate: str = "0A000"):
        super().__init__(message)
        self.sqlstate = sqlstate
