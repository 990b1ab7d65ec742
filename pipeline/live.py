"""`<db>.<name>_table` as readers see it: a view of the datamap's live segments.

The segments' partitions live in the storage table `<name>_table_segments`
(pipeline/table.py). There a segment being written is registered before it is published,
and a superseded one stays for a grace period, because a query rewritten just before the
publish still names it. BI tools list `<name>_table` and users read it (straight from the
Spark Thrift Server too), so it must hold exactly the live rows: it is a view

    SELECT <columns>, dm_segment_id FROM <storage> WHERE dm_segment_id IN (<live ids>)

replaced after every publish. Replacing a view is one metastore write, so a direct reader
sees the segments before or after a publish, never a mix (adding and dropping partitions
of one table takes two writes, with a moment that counts a compaction's rows twice or
not at all). The view records its ids in the table property `datamap.segments`: the
partitions it names are never dropped, whatever a failed replace left behind.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Sequence

from pipeline.files import normalize_path, quote_table, table_meta
from pipeline.properties import parquet_options
from pipeline.segments import _q, _segment_literal, table_exists
from rewriter.api import SEGMENT_COLUMN, DatamapDefinition

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SEGMENTS_PROPERTY = "datamap.segments"


def show_live(spark: "SparkSession", definition: DatamapDefinition, segment_ids: Sequence[str],
              properties: Mapping[str, str] | None = None) -> None:
    """Make `definition.table` show exactly segments `segment_ids` (one metastore write).
    The storage's Parquet options ride along as view properties, so SHOW CREATE TABLE on
    `<name>_table` still tells what its files are written with."""
    ids = [str(i) for i in segment_ids]
    literals = [_segment_literal(i) for i in ids]
    where = f"{_q(SEGMENT_COLUMN)} IN ({', '.join(literals)})" if ids else "false"
    props = {k.lower(): v for k, v in (properties or {}).items()}
    tblprops = {SEGMENTS_PROPERTY: ",".join(ids), "datamap.storage": definition.storage,
                **parquet_options(props)}
    listed = ", ".join(f"'{k}' = '{v}'" for k, v in tblprops.items())
    cols = ", ".join(_q(c.name) for c in definition.columns)
    spark.sql(f"CREATE OR REPLACE VIEW {quote_table(definition.table)} "
              f"TBLPROPERTIES ({listed}) AS SELECT {cols}, {_q(SEGMENT_COLUMN)} "
              f"FROM {quote_table(definition.storage)} WHERE {where}")


def shown_segments(spark: "SparkSession",
                   definition: DatamapDefinition) -> tuple[str, ...] | None:
    """The segment ids the view shows now; None when there is no such view (or it cannot
    be read): then any segment may be named by it."""
    try:
        meta = table_meta(spark, definition.table)
        if meta is None or meta.tableType().name() != "VIEW":
            return None
        raw = meta.properties().get(SEGMENTS_PROPERTY)
        if raw.isEmpty():
            return None
        return tuple(i for i in raw.get().split(",") if i)
    except Exception:  # noqa: BLE001 - unknown: the caller keeps every partition
        return None


def drop_live(spark: "SparkSession", definition: DatamapDefinition) -> None:
    """Drop the view (a table of that name from before the view, too)."""
    if not table_exists(spark, definition.table):
        return
    meta = table_meta(spark, definition.table)
    kind = "VIEW" if meta is not None and meta.tableType().name() == "VIEW" else "TABLE"
    spark.sql(f"DROP {kind} IF EXISTS {quote_table(definition.table)}")


def adopt_table(spark: "SparkSession", definition: DatamapDefinition) -> tuple[str, str] | None:
    """A datamap table written before the view existed (its partitions under
    `<name>_table` itself) becomes the storage table by a rename, which moves a managed
    table's directory. Returns its files' (old, new) location prefix, or None when there
    was nothing to adopt."""
    meta = table_meta(spark, definition.table)
    if (meta is None or meta.tableType().name() == "VIEW"
            or table_exists(spark, definition.storage)):
        return None
    before = normalize_path(meta.location().toString())
    spark.sql(f"ALTER TABLE {quote_table(definition.table)} RENAME TO "
              f"{quote_table(definition.storage)}")
    return before, normalize_path(table_meta(spark, definition.storage).location().toString())
