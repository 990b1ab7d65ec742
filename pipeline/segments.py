"""The segments of a datamap: partitions of its storage table, one per segment id, found,
listed, read, counted and dropped. Paths come from the metastore's record of the table
and are listed with Hadoop's FileSystem (no Spark job) where possible; Spark's own
listing is the fallback.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Sequence

from pipeline.errors import PipelineError
from pipeline.files import LOOK_UP, normalize_path, quote_table, table_meta
from rewriter.api import SEGMENT_COLUMN, DatamapDefinition

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


log = logging.getLogger("pipeline")


def _q(name: str) -> str:
    return f"`{name.replace('`', '``')}`"


def _segment_literal(segment_id: str) -> str:
    if not segment_id.isdigit():
        raise PipelineError(f"Bad datamap segment id {segment_id!r}: expected a whole number")
    return f"'{segment_id}'"


def table_exists(spark: "SparkSession", table: str) -> bool:
    return spark.catalog.tableExists(table)


def _table_dir(spark: "SparkSession", table: str, meta=LOOK_UP):
    """(Hadoop FileSystem, Path) of the table's location, or None when it cannot be found.
    `meta` as in pipeline.files.table_meta."""
    Path = spark.sparkContext._jvm.org.apache.hadoop.fs.Path
    try:
        try:   # the metastore's record: a quarter of what DESCRIBE TABLE EXTENDED costs
            # Path(URI), not Path(str(URI)): the URI is encoded (`a%20b`), and a Path made
            # from that string would name another directory (literally `a%20b`).
            path = Path(table_meta(spark, table, meta).location())
        except Exception:  # noqa: BLE001 - not there, or another catalog: ask Spark
            path = None
            for row in spark.sql(f"DESCRIBE TABLE EXTENDED {quote_table(table)}").collect():
                if str(row[0]).strip() == "Location" and str(row[1]).strip():
                    path = Path(str(row[1]).strip())     # printed decoded, as Path prints
        if path is None:
            return None
        return path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), path
    except Exception:  # noqa: BLE001 - callers fall back to Spark's own listing
        log.debug("cannot locate table %s", table, exc_info=True)
        return None


def _partition_dir(spark: "SparkSession", table: str, segment_id: str, meta=LOOK_UP):
    """(Hadoop FileSystem, Path) of one partition's directory, or None when the table's
    location cannot be found."""
    where = _table_dir(spark, table, meta)
    if where is None:
        return None
    fs, root = where
    return fs, spark.sparkContext._jvm.org.apache.hadoop.fs.Path(
        root, f"{SEGMENT_COLUMN}={segment_id}")


def drop_stray_dirs(spark: "SparkSession", definition: DatamapDefinition,
                    keep: Sequence[str]) -> list[str]:
    """Delete segment directories the metastore does not list and `keep` does not name:
    files of a job that died between writing them and ADD PARTITION. Returns their ids."""
    storage = definition.storage
    where = _table_dir(spark, storage) if table_exists(spark, storage) else None
    if where is None:
        return []
    fs, root = where
    keep_set = {str(k) for k in keep}
    gone = []
    try:
        if not fs.exists(root):
            return []
        for st in fs.listStatus(root):
            name = st.getPath().getName()
            key, _, value = name.partition("=")
            if st.isDirectory() and key == SEGMENT_COLUMN and value not in keep_set:
                fs.delete(st.getPath(), True)
                gone.append(value)
    except Exception:  # noqa: BLE001 - invisible to readers anyway; next start retries
        log.warning("could not remove stray segment directories of %s", definition.storage,
                    exc_info=True)
    return sorted(gone, key=lambda v: (len(v), v))


def _partition_files(spark: "SparkSession", table: str, segment_id: str,
                     where=None) -> tuple[str, ...] | None:
    """Data files of one partition, listed from its directory alone (the table's other
    partitions are not listed: that cost grew with the number of segments). None when the
    location cannot be found; hidden files (_*, .*) are skipped as Spark does."""
    try:
        where = where or _partition_dir(spark, table, segment_id)
        if where is None:
            return None
        fs, path = where
        if not fs.exists(path):
            return ()
        out = []
        for st in fs.listStatus(path):
            name = st.getPath().getName()
            if st.isFile() and not name.startswith(("_", ".")):
                # the encoded spelling, as Spark's inputFiles() and _metadata.file_path
                out.append(normalize_path(st.getPath().toUri().toString()))
        return tuple(sorted(out))
    except Exception:  # noqa: BLE001 - fall back to Spark's own listing
        log.debug("direct partition listing failed for %s", table, exc_info=True)
        return None


def segment_stats(spark: "SparkSession", definition: DatamapDefinition,
                  segment_id: str) -> tuple[int, tuple[str, ...]]:
    """(rows, files) of one written partition, in one small job."""
    spark.catalog.refreshTable(definition.storage)
    stats = spark.sql(
        f"SELECT _metadata.file_path AS f, count(*) AS n FROM {quote_table(definition.storage)} "
        f"WHERE {_q(SEGMENT_COLUMN)} = {_segment_literal(segment_id)} GROUP BY 1").collect()
    return (sum(r["n"] for r in stats),
            tuple(sorted(normalize_path(r["f"]) for r in stats)))


def read_segments(spark: "SparkSession", definition: DatamapDefinition,
                  segment_ids: Sequence[str]) -> "DataFrame":
    from pyspark.sql import functions as F
    ids = [str(i) for i in segment_ids]
    for i in ids:
        _segment_literal(i)
    return (spark.table(definition.storage).where(F.col(SEGMENT_COLUMN).isin(ids))
            .select(*[c.name for c in definition.columns]))


def list_segments(spark: "SparkSession", definition: DatamapDefinition) -> list[str]:
    """Segment ids that exist as partitions of the datamap table."""
    if not table_exists(spark, definition.storage):
        return []
    out = []
    for row in spark.sql(f"SHOW PARTITIONS {quote_table(definition.storage)}").collect():
        key, _, value = row[0].partition("=")
        if key == SEGMENT_COLUMN:
            out.append(value)
    return sorted(out, key=lambda v: (len(v), v))


def drop_segments(spark: "SparkSession", definition: DatamapDefinition,
                  segment_ids: Sequence[str]) -> None:
    """Remove partitions (superseded segments, after the catalog stopped showing them)."""
    if not segment_ids or not table_exists(spark, definition.storage):
        return
    specs = ", ".join(f"PARTITION ({_q(SEGMENT_COLUMN)} = {_segment_literal(str(i))})"
                      for i in segment_ids)
    spark.sql(f"ALTER TABLE {quote_table(definition.storage)} DROP IF EXISTS {specs}")
