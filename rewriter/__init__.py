"""Materialized-view (datamap) rewriting on sqlglot ASTs. Pure library: no I/O, no pyspark.

API (see rewriter/api.py for the data shapes):
    compile_datamap(name, select_sql, schemas, current_db) -> DatamapDefinition
        raises DatamapDefinitionError(message, sqlstate): 42S02 unknown table/column,
        0A000 LIMIT / window / SELECT * / unsupported aggregate / non-deterministic /
        several timeseries granularities, 42000 parse error, projected column neither
        grouped nor aggregated (docs/sql.md lists every refusal with its reason).
        Layout: grouping expressions -> role "group" (one not projected: a hidden
        column); sum/count/count(*)/min/max -> role "agg" (avg(x) -> sum(x) + count(x);
        variance / stddev -> their moments: rewriter/moments.py); projection-only
        definitions -> role "column". A table read twice (a self-join) is one relation
        per reference (rewriter/self_joins.py).
        A UNION, GROUPING SETS / CUBE / ROLLUP, a subquery inside the block or a grouping
        CTE give a definition with refresh "full" (rewriter/rebuilt.py): its outputs
        stored as role "column", rebuilt at each load, matched by rebuilt_match.py.
        definition.table is "<db>.<name>_table" (in the proxy a view of the live
        segments), definition.storage the table of every segment's partition (what a
        Candidate's `storage` names); the segment column is never in `columns`.
    build_sql(definition, sources) / definition.build_sql(sources) -> str
        the SELECT producing exactly `columns`; sources maps "db.table" -> relation to read
        instead (keeps the table's alias).
    DatamapIndex(candidates, schemas, version).rewrite(sql, current_db) -> RewriteResult
        built once per catalog version; definitions compiled once (cached by text + schema);
        datamaps indexed by base table; LRU cache on (sql, current_db). Datamaps are named
        "db.name" in `used` and `skipped` (two databases may have same-named datamaps);
        `skipped` has a one-line reason for every candidate over a table the query reads
        that was not used.
    rewrite(sql, candidates, schemas, current_db) -> RewriteResult
        convenience wrapper around a throw-away DatamapIndex.
    refresh_mode(definition) -> (mode, reason)
        SHOW DATAMAP's Refresh Mode (`incremental` / `full`: rewriter/rebuilt.py) and why.
    translate_timeseries(sql, schemas=None, current_db="default") -> str
        timeseries(col, 'gran') -> Spark SQL (rewriter.timeseries.translate_sql); rewrite()
        already applies it to whatever no datamap answered.

How a statement is rewritten (modules in order): normalize.py (parse, Spark output names,
qualify, canonical forms) -> facts.py (one SPJG fact set per SELECT block) -> match.py with
rules/ (match_tables, compensate_filters, derive_expression, rollup_aggregate) -> index.py
(candidates per block, cheapest first, emit). Every SELECT block — subqueries, CTEs, UNION
branches, wrapped BI queries — is rewritten on its own; a block the rewriter cannot prove
equivalent is left as written. Any exception inside rewrite() is caught by the caller,
which forwards the original SQL.
"""
from rewriter.api import (  # noqa: F401
    SEGMENT_COLUMN, Candidate, DatamapDefinition, DatamapDefinitionError, RewriteResult, Schemas,
    StoredColumn,
)
from rewriter.index import DatamapIndex, compile_datamap, rewrite  # noqa: F401,E402
from rewriter.rebuilt import refresh_mode  # noqa: F401,E402
from rewriter.timeseries import translate_sql as _translate_sql


def build_sql(definition: DatamapDefinition, sources=None) -> str:
    """definition.build_sql(sources): the SELECT producing exactly its columns."""
    return definition.build_sql(sources)


def translate_timeseries(sql: str, schemas=None, current_db: str = "default") -> str:
    """timeseries(col, 'gran') -> Spark SQL for a statement no datamap answers."""
    return _translate_sql(sql, schemas, current_db)
