"""The datamap's storage table `<db>.<name>_table_segments`: create, write one segment
partition, drop (pipeline/segments.py finds, reads and drops the partitions written;
pipeline/live.py keeps `<db>.<name>_table`, the view of the live segments readers see).

Layout: the definition's stored columns in order, then SEGMENT_COLUMN (string), Parquet,
partitioned by SEGMENT_COLUMN. Every write goes to a fresh partition named by a segment id
the caller reserved in the catalog, so readers (who only read visible segment ids) never
see a half-written segment; the caller publishes it with one catalog commit.
"""
from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping, Sequence

from pipeline.errors import PipelineError
from pipeline.files import LOOK_UP, normalize_path, quote_table, table_meta
from pipeline.live import drop_live
from pipeline.properties import parquet_options
from pipeline.segments import (
    _partition_dir, _partition_files, _q, _segment_literal, drop_segments, segment_stats,
    table_exists,
)
from rewriter.api import SEGMENT_COLUMN, DatamapDefinition

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


log = logging.getLogger("pipeline")


@dataclass(frozen=True)
class SegmentWrite:
    """What one job wrote: the caller records it and publishes it in the catalog."""
    segment_id: str
    rows: int
    files: tuple[str, ...]
    seconds: float


# Spark types a Parquet datamap column cannot hold (NULL literals, intervals, ...).
_UNSTORABLE = ("void", "interval", "calendarinterval", "variant", "object")


def with_spark_types(spark: "SparkSession", definition: DatamapDefinition) -> DatamapDefinition:
    """The definition with each stored column typed as Spark's analyzer types its build
    expression (analysis only, no job). The rewriter's own type inference covers what its
    rollups need; the stored column must hold exactly what Spark computes, whatever the
    function (hour(), DIV, pmod, date_format, ...). A type Parquet cannot store is refused
    naming the expression."""
    fields = spark.sql(definition.build_sql({})).schema.fields
    if [f.name for f in fields] != [c.name for c in definition.columns]:
        raise PipelineError(f"datamap {definition.name}: Spark's columns "
                            f"{[f.name for f in fields]} differ from the stored ones", "HY000")
    columns = []
    for col, f in zip(definition.columns, fields):
        spark_type = f.dataType.simpleString()
        if spark_type.split("(")[0].split(" ")[0] in _UNSTORABLE:
            raise PipelineError(f"datamap {definition.name}: {col.expr_sql} has type {spark_type}, "
                                "which a datamap column cannot store", "0A000")
        if col.type and col.type != spark_type:
            log.debug("datamap %s: column %s typed %s by the rewriter, %s by Spark",
                      definition.name, col.name, col.type, spark_type)
        columns.append(dataclasses.replace(col, type=spark_type))
    return dataclasses.replace(definition, columns=tuple(columns))


def create_table(spark: "SparkSession", definition: DatamapDefinition,
                 properties: Mapping[str, str] | None = None) -> None:
    """CREATE TABLE IF NOT EXISTS for the storage table. TABLE_BLOCKSIZE becomes the
    Parquet row-group size and COLUMN_COMPRESSOR the codec of every file written to it."""
    props = {k.lower(): v for k, v in (properties or {}).items()}
    cols = ", ".join(f"{_q(c.name)} {c.type}" for c in definition.columns)
    options = ", ".join(f"'{k}' = '{v}'" for k, v in parquet_options(props).items())
    options = f" OPTIONS ({options})" if options else ""
    spark.sql(f"CREATE TABLE IF NOT EXISTS {quote_table(definition.storage)} ({cols}, "
              f"{_q(SEGMENT_COLUMN)} STRING) USING parquet{options} "
              f"PARTITIONED BY ({_q(SEGMENT_COLUMN)})")


def drop_table(spark: "SparkSession", definition: DatamapDefinition) -> None:
    """Drop the view of the live segments first: nobody reads the storage through it."""
    drop_live(spark, definition)
    spark.sql(f"DROP TABLE IF EXISTS {quote_table(definition.storage)}")


def sort_columns(definition: DatamapDefinition,
                 properties: Mapping[str, str] | None) -> list[str]:
    """SORT_COLUMNS as stored column names; unknown names are an error naming them."""
    props = {k.lower(): v for k, v in (properties or {}).items()}
    raw = [c.strip().lower() for c in props.get("sort_columns", "").split(",") if c.strip()]
    known = {c.name.lower(): c.name for c in definition.columns}
    missing = [c for c in raw if c not in known]
    if missing:
        raise PipelineError(f"SORT_COLUMNS of datamap {definition.database}.{definition.name} "
                            f"name unknown columns: {', '.join(missing)} (columns: "
                            f"{', '.join(known.values())})", "42000")
    return [known[c] for c in raw]


def write_segment(spark: "SparkSession", definition: DatamapDefinition, df: "DataFrame",
                  segment_id: str, properties: Mapping[str, str] | None = None,
                  started: float | None = None) -> SegmentWrite:
    """Write `df` (the definition's columns, by name) as partition `segment_id`.

    The files go straight into the partition's directory, then one ADD PARTITION makes it
    known to the metastore: an `INSERT INTO … PARTITION` does the same write plus partition
    listings and a table refresh, about half a second of metastore work that made up a
    third of a small refresh. Readers never see the partition before the caller publishes
    the segment id in the catalog."""
    started = time.monotonic() if started is None else started
    _segment_literal(segment_id)     # a bad id fails before anything is written
    meta = table_meta(spark, definition.storage)
    where = _partition_dir(spark, definition.storage, segment_id, meta)
    if where is None:       # no table yet (or no location): create it, look again
        create_table(spark, definition, properties)
        meta = table_meta(spark, definition.storage)
        where = _partition_dir(spark, definition.storage, segment_id, meta)
    df = df.selectExpr(*[f"CAST({_q(c.name)} AS {c.type}) AS {_q(c.name)}"
                         for c in definition.columns])
    order = sort_columns(definition, properties)
    if order:
        df = df.sortWithinPartitions(*order)
    if where is None:
        rows = _insert_segment(spark, definition, df, segment_id)
    else:
        fs, path = where
        if fs.exists(path):
            # Segment ids are never reused, so this is rare (the metastore round trip is
            # skipped otherwise): a partition of this id registered by a job that died is
            # dropped; files nobody registered are never deleted here (they are not
            # ours to judge): the job fails, the next refresh takes a new id, and the
            # start-up cleanup removes such leftovers.
            drop_segments(spark, definition, [segment_id])
            if fs.exists(path):
                raise PipelineError(
                    f"Cannot write segment {segment_id} of datamap {definition.database}."
                    f"{definition.name}: {normalize_path(path.toString())} already exists "
                    "(left by an interrupted job?); the next start removes it", "HY000")
        _write_files(spark, df, path.toString(), properties)
        _add_partition(spark, definition.storage, segment_id, meta)
        rows = None
    t_written = time.monotonic()
    files = _partition_files(spark, definition.storage, segment_id, where)
    if rows is None and files is not None:
        rows = _parquet_rows(spark, files)
    if rows is None or files is None:
        rows, files = segment_stats(spark, definition, segment_id)
    log.debug("segment %s of %s: written after %.2fs, listed in %.2fs", segment_id,
              definition.storage, t_written - started, time.monotonic() - t_written)
    return SegmentWrite(segment_id, rows, files, time.monotonic() - started)


def _write_files(spark: "SparkSession", df: "DataFrame", path: str,
                 properties: Mapping[str, str] | None) -> None:
    """Parquet files of `df` into the directory `path` (which must not exist).

    Tasks commit their files straight into `path` and no `_SUCCESS` marker is written
    (file output committer v2): nobody reads the directory before ADD PARTITION, and a job
    that dies leaves an unregistered directory that the next start removes."""
    props = {k.lower(): v for k, v in (properties or {}).items()}
    writer = (df.write.format("parquet")
              .option("mapreduce.fileoutputcommitter.algorithm.version", "2")
              .option("mapreduce.fileoutputcommitter.marksuccessfuljobs", "false"))
    for key, value in parquet_options(props).items():   # what the table's OPTIONS say
        writer = writer.option(key, value)
    writer.mode("errorifexists").save(path)


def _parquet_rows(spark: "SparkSession", files: Sequence[str]) -> int | None:
    """Rows in Parquet `files` (as _partition_files lists them), from their footers (no
    Spark job; a small refresh's counting job, or a metrics observation, cost more than
    its write). None when a footer cannot be read."""
    try:
        jvm = spark.sparkContext._jvm
        conf = spark.sparkContext._jsc.hadoopConfiguration()
        total = 0
        for f in files:
            source = jvm.org.apache.parquet.hadoop.util.HadoopInputFile.fromPath(
                jvm.org.apache.hadoop.fs.Path(jvm.java.net.URI(f)), conf)   # f is encoded
            reader = jvm.org.apache.parquet.hadoop.ParquetFileReader.open(source)
            try:
                total += int(reader.getRecordCount())
            finally:
                reader.close()
        return total
    except Exception:  # noqa: BLE001 - the caller counts with a job instead
        log.debug("cannot read Parquet footers", exc_info=True)
        return None


def _add_partition(spark: "SparkSession", table: str, segment_id: str, meta=LOOK_UP) -> None:
    """Register partition `segment_id` (its directory, the default location, is written).

    Straight to the metastore when possible: `ALTER TABLE … ADD PARTITION` costs twice as
    much (parsing, resolving, table lookups, a refresh of the table). What the command does
    besides matters only for a table that has statistics or is cached: those go through
    the command."""
    db, _, name = table.partition(".")
    try:
        jvm = spark.sparkContext._jvm
        external = spark._jsparkSession.sessionState().catalog().externalCatalog()
        if (table_meta(spark, table, meta).stats().isDefined()
                or not spark._jsparkSession.sharedState().cacheManager().isEmpty()
                and spark.catalog.isCached(quote_table(table))):
            raise LookupError("statistics or a cache to update")
        utils = jvm.org.apache.spark.api.python.PythonUtils
        spec = jvm.java.util.HashMap()
        spec.put(SEGMENT_COLUMN, segment_id)
        # CatalogTablePartition(spec, storage, parameters, createTime: Long,
        # lastAccessTime: Long, stats): constructed by reflection, which widens the int
        # arguments to long (Py4J would pass them as Integer and find no constructor).
        cls = jvm.java.lang.Class.forName(
            "org.apache.spark.sql.catalyst.catalog.CatalogTablePartition")
        ctor = next(c for c in cls.getConstructors() if len(c.getParameterTypes()) == 6)
        args = spark.sparkContext._gateway.new_array(jvm.java.lang.Object, 6)
        args[0] = utils.toScalaMap(spec)
        args[1] = jvm.org.apache.spark.sql.catalyst.catalog.CatalogStorageFormat.empty()
        args[2] = utils.toScalaMap(jvm.java.util.HashMap())
        args[3] = int(time.time() * 1000)
        args[4] = -1
        args[5] = jvm.scala.Option.empty()
        parts = jvm.java.util.ArrayList()
        parts.add(ctor.newInstance(args))
        external.createPartitions(db, name, utils.toSeq(parts), True)
        return
    except Exception:  # noqa: BLE001 - another Spark, catalog or table: the SQL command
        log.debug("registering partition %s of %s through ALTER TABLE", segment_id, table,
                  exc_info=True)
    spark.sql(f"ALTER TABLE {quote_table(table)} ADD IF NOT EXISTS "
              f"PARTITION ({_q(SEGMENT_COLUMN)} = {_segment_literal(segment_id)})")


def _insert_segment(spark: "SparkSession", definition: DatamapDefinition, df: "DataFrame",
                    segment_id: str) -> int | None:
    """The fallback when the partition's directory is unknown: INSERT INTO a static
    partition (INSERT INTO, not OVERWRITE: compaction reads the same table; a static
    partition means no extra sort by it undoes SORT_COLUMNS)."""
    # Unique per job: datamaps of two databases may share a name and a segment id, and
    # temp views live in the one shared SparkSession.
    view = f"dm_write_{uuid.uuid4().hex}"
    df.createOrReplaceTempView(view)
    try:
        cols = ", ".join(_q(c.name) for c in definition.columns)
        drop_segments(spark, definition, [segment_id])   # a retried job starts clean
        result = spark.sql(f"INSERT INTO TABLE {quote_table(definition.storage)} "
                           f"PARTITION ({_q(SEGMENT_COLUMN)} = {_segment_literal(segment_id)}) "
                           f"SELECT {cols} FROM {view}")
    finally:
        spark.catalog.dropTempView(view)
    return _written_rows(result)


def _written_rows(result: "DataFrame") -> int | None:
    """Rows the INSERT wrote, from the write command's metrics (saves a counting job)."""
    try:
        plan = result._jdf.queryExecution().executedPlan()
        for _ in range(6):
            kind = plan.getClass().getSimpleName()
            if kind == "CommandResultExec":
                plan = plan.commandPhysicalPlan()
            elif kind == "AdaptiveSparkPlanExec":   # the write had a shuffle below it
                plan = plan.executedPlan()
            elif kind == "ResultQueryStageExec":    # AQE's last stage: the write itself
                plan = plan.plan()
            else:
                break
        if plan.getClass().getSimpleName() != "DataWritingCommandExec":
            return None
        metrics = plan.metrics()
        if metrics.contains("numOutputRows"):
            return int(metrics.apply("numOutputRows").value())
    except Exception:  # noqa: BLE001 - a different plan shape: count instead
        return None
    return None
