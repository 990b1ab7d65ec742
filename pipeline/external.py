"""Spark side of external-format tables (docs/external.md): the hidden CSV source table
and the view users query.

    <db>.<t>           VIEW: SELECT <fields, DDL order> FROM <source>, with TBLPROPERTIES
                       'datamap.external.source' and 'datamap.external.format'
    <db>.<source>      CSV data-source table over the segment link directories (schema:
                       the file layout; EXTERNAL, so DROP TABLE leaves its directory alone)

Writes to a view fail in Spark itself, which keeps everything that does not come through
the proxy from writing to the table.
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Iterable, Mapping, Sequence

from pipeline.files import decoded_path, quote_table, reader_options, table_meta

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

SOURCE_KEY = "datamap.external.source"
FORMAT_KEY = "datamap.external.format"


def _literal(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def create_source(spark: "SparkSession", source: str, layout: Sequence[tuple[str, str]],
                  options: Mapping[str, str], location: str) -> None:
    columns = ", ".join(f"{_ident(n)} {t}" for n, t in layout)
    opts = ", ".join(f"{_literal(k)} = {_literal(v)}" for k, v in sorted(options.items()))
    spark.sql(f"CREATE TABLE {quote_table(source)} ({columns}) USING csv "
              f"OPTIONS ({opts}) LOCATION {_literal(location)}")


def replace_view(spark: "SparkSession", view: str, source: str,
                 fields: Sequence[tuple[str, str]]) -> None:
    cols = ", ".join(_ident(n) for n, _ in fields)
    spark.sql(f"CREATE OR REPLACE VIEW {quote_table(view)} "
              f"TBLPROPERTIES ({_literal(SOURCE_KEY)} = {_literal(source)}, "
              f"{_literal(FORMAT_KEY)} = 'csv') AS SELECT {cols} FROM {quote_table(source)}")


def create(spark: "SparkSession", view: str, source: str, layout, fields, options,
           location: str) -> None:
    """Source table, then view; a failed view drops the source table again."""
    create_source(spark, source, layout, options, location)
    try:
        replace_view(spark, view, source, fields)
    except Exception:
        spark.sql(f"DROP TABLE IF EXISTS {quote_table(source)}")
        raise


def recreate_source(spark: "SparkSession", view: str, source: str, layout, fields, options,
                    location: str) -> None:
    """A new schema or CSV options for the same files: source table and view again."""
    spark.sql(f"DROP TABLE IF EXISTS {quote_table(source)}")
    create_source(spark, source, layout, options, location)
    replace_view(spark, view, source, fields)


def drop(spark: "SparkSession", view: str, source: str) -> None:
    spark.sql(f"DROP VIEW IF EXISTS {quote_table(view)}")
    spark.sql(f"DROP TABLE IF EXISTS {quote_table(source)}")


def rename(spark: "SparkSession", old: str, new: str) -> None:
    spark.sql(f"ALTER VIEW {quote_table(old)} RENAME TO {quote_table(new)}")


def exists(spark: "SparkSession", table: str) -> bool:
    return bool(spark.catalog.tableExists(table))


def refresh(spark: "SparkSession", source: str) -> None:
    """Spark keeps a table's file list per session: list the links again."""
    spark.catalog.refreshTable(source)


def read_links(spark: "SparkSession", source: str, paths: Iterable[str]) -> "DataFrame":
    """Rows of these link files (any spelling, staged ones too: a hidden directory is
    only skipped when listed, not when named) read as the source table reads its files:
    its schema and CSV options. For whatever builds per-file state of a segment before it
    is visible (ADD SEGMENT's on_segment_files hook)."""
    from pyspark.sql.types import StructType
    meta = table_meta(spark, source)
    if meta is None:
        raise ValueError(f"no source table {source}")
    schema = StructType.fromJson(json.loads(meta.schema().json()))
    return (spark.read.format("csv").schema(schema).options(**reader_options(spark, meta))
            .load([decoded_path(p) for p in paths]))
