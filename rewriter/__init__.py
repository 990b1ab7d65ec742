"""Materialized-view (datamap) rewriting on sqlglot ASTs. Pure library: no I/O, no pyspark.

API (see rewriter/api.py for the data shapes):
    compile_datamap(name, select_sql, schemas, current_db) -> DatamapDefinition
        raises DatamapDefinitionError (with sqlstate) for definitions it refuses.
    build_sql(definition, sources) -> str
        the SELECT that materialises the datamap table (see DatamapDefinition.build_sql).
    DatamapIndex(candidates, schemas, version).rewrite(sql, current_db) -> RewriteResult
        built once per catalog version; indexes datamaps by base-table set; caches results.
    rewrite(sql, candidates, schemas, current_db) -> RewriteResult
        convenience wrapper around a throw-away DatamapIndex.
    translate_timeseries(sql, current_db) -> str
        timeseries(col, 'gran') -> Spark SQL, for queries no datamap answers.

Any exception inside rewrite() is caught by the caller, which forwards the original SQL.
"""
from rewriter.api import (  # noqa: F401
    SEGMENT_COLUMN, Candidate, DatamapDefinition, DatamapDefinitionError, RewriteResult, Schemas,
    StoredColumn,
)
from rewriter.layout import build_sql, compile_datamap  # noqa: F401,E402
from rewriter.index import DatamapIndex, rewrite  # noqa: F401,E402
