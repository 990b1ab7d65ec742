"""The build job of index datamaps: per-file row counts, minmax statistics and bloom
filters of a table's files, for every index of the table in one read.

The files are read once; when there are bloom columns, the indexed columns are cached
(MEMORY_AND_DISK) for two aggregations:
  - per file: row count, and min / max / NULL count of every minmax column;
  - per (file, bloom column, 64-bit word): `bit_or` of the probe bits (rewriter/bloom
    hash_sql / probe_sql: Spark's xxhash64, plain expressions, no Python on rows), a
    narrow hash aggregation; then each 32768-bit bucket's words packed into one binary
    (bloom.bucket_sql), so the driver receives a few rows per file, not one per word.
One aggregation over (row, probe) rows carrying the minmax buffers too was 4x slower
(a wide hash-map entry per word), and bitmap_construct_agg is sort-aggregated.
Splittable files are read in as many tasks as Spark splits them into (the partial
aggregates merge by file); gzip and bzip2 files are one task each.

The file's identity (size, mtime in ns) is taken BEFORE it is read: a file rewritten while
the job runs then fails the query side's identity check and is never pruned on entries
computed from its older contents.

Which rows: `spark.table(t)` filtered by file (pipeline.files.in_files), where t is the
table, or for an external-format table (a view with TBLPROPERTIES
'datamap.external.source'), its source table. `staged` files (ADD SEGMENT's links before
they are published, in a directory Spark's listing skips) are read by path with the
source table's format, options and schema, and their entries keyed by their final paths.
"""
from __future__ import annotations

import datetime
import decimal
import json
import math
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence
from urllib.parse import unquote

from pipeline.errors import PipelineError
from pipeline.files import (
    decoded_path, hive_scan, in_files, normalize_path, quote_table, table_meta,
)
from rewriter.prune import bloom

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

EXTERNAL_SOURCE_KEY = "datamap.external.source"
_CHAR_TYPE_KEY = "__CHAR_VARCHAR_TYPE_STRING"
MAX_STRING_STAT = 256        # longer min/max strings are not kept (unknown: never prunes)
_NUMERIC = ("tinyint", "smallint", "int", "bigint", "float", "double")
_AS_TEXT = ("date", "timestamp", "timestamp_ntz")


def minmax_supports(spark_type: str) -> bool:
    """Types whose min/max order Spark and the query side agree on."""
    t = spark_type.strip().lower()
    return t in _NUMERIC + _AS_TEXT + ("string", "boolean") or t.startswith("decimal(")


@dataclass(frozen=True)
class BloomSpec:
    column: str
    m: int
    k: int


@dataclass
class FileIndex:
    """One file's entry: `stats` column -> (low, high, nulls) in JSON-able form (dates,
    timestamps and decimals as Spark's string of them), `blooms` column -> filter bits."""
    path: str
    size: int | None
    mtime_ns: int | None
    rows: int = 0
    stats: dict[str, tuple[Any, Any, int]] = field(default_factory=dict)
    blooms: dict[str, bytes] = field(default_factory=dict)


def file_identity(spark: "SparkSession", path: str) -> tuple[int | None, int | None]:
    """(size, mtime ns) of the file `path` names, following symbolic links; (None, None)
    when it cannot be stat'ed. Local files through os.stat, as the query side checks."""
    p = normalize_path(path)
    if p.startswith("file:/"):
        try:
            st = os.stat(unquote(p[len("file:"):]))
            return st.st_size, st.st_mtime_ns
        except OSError:
            return None, None
    try:
        jvm = spark.sparkContext._jvm
        hp = jvm.org.apache.hadoop.fs.Path(jvm.java.net.URI(p))
        st = hp.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()).getFileStatus(hp)
        return int(st.getLen()), int(st.getModificationTime()) * 1_000_000
    except Exception:  # noqa: BLE001 - unknown identity: the query side never prunes it
        return None, None


def scanned_table(spark: "SparkSession", table: str) -> str:
    """The table whose rows carry file names: an external view's source table, else
    `table` itself."""
    meta = table_meta(spark, table)
    if meta is not None and meta.tableType().name() == "VIEW":
        props = dict(spark._jvm.scala.jdk.javaapi.CollectionConverters.asJava(meta.properties()))
        source = props.get(EXTERNAL_SOURCE_KEY)
        if source:
            return str(source)
    return table


def column_types(spark: "SparkSession", table: str) -> dict[str, str]:
    """Lower-cased column -> Spark type string of `table` (as the user sees it). A CHAR(n)
    column reads as a padded string, which Spark compares with padding: it is reported
    as `char(n)`, a type neither index takes (an unpadded literal would be misjudged)."""
    out = {}
    for f in spark.table(table).schema.fields:
        declared = str(f.metadata.get(_CHAR_TYPE_KEY, "")).lower()
        out[f.name.lower()] = declared if declared.startswith("char") else \
            f.dataType.simpleString()
    return out


def _staged_frame(spark: "SparkSession", source: str, paths: Sequence[str]) -> "DataFrame":
    from pyspark.sql.types import StructType
    meta = table_meta(spark, source)
    if meta is None or not meta.provider().isDefined():
        raise PipelineError(f"Cannot read staged files of {source}: not a data-source table",
                            "0A000")
    options = {str(k): str(v) for k, v in dict(
        spark._jvm.scala.jdk.javaapi.CollectionConverters.asJava(
            meta.storage().properties())).items() if str(k).lower() != "path"}
    schema = StructType.fromJson(json.loads(meta.schema().json()))
    return (spark.read.format(str(meta.provider().get())).schema(schema).options(**options)
            .load([decoded_path(p) for p in paths]))


def _frame(spark: "SparkSession", table: str, files: Sequence[str],
           staged: Mapping[str, str] | None) -> tuple["DataFrame", Any, dict[str, str]]:
    """(rows, their file column, Spark's spelling of a file -> the entry's key)."""
    from pyspark.sql import functions as F
    source = scanned_table(spark, table)
    if staged:
        df = _staged_frame(spark, source, list(staged.values()))
        keys = {normalize_path(s): normalize_path(f) for f, s in staged.items()}
        raw = F.col("_metadata.file_path")
        return df, F.regexp_replace(raw, r"^file://(localhost)?/", "file:/"), keys
    spark.catalog.refreshTable(source)     # a listing cached before the files came
    hive = hive_scan(spark, source)
    df = spark.table(source).where(in_files(spark, source, files, hive))
    if hive:
        keys = {decoded_path(f): normalize_path(f) for f in files}
        raw = F.input_file_name()
    else:
        keys = {normalize_path(f): normalize_path(f) for f in files}
        raw = F.col("_metadata.file_path")
    return df, F.regexp_replace(raw, r"^file://(localhost)?/", "file:/"), keys


def build(spark: "SparkSession", table: str, files: Iterable[str], minmax: Sequence[str],
          blooms: Sequence[BloomSpec], staged: Mapping[str, str] | None = None
          ) -> dict[str, FileIndex]:
    """Entries for `files` of `table` (normalised paths, as keys). `staged`: final path ->
    the path to read now (then `files` are its keys). Files without rows get rows=0."""
    from pyspark.sql import functions as F
    wanted = sorted({normalize_path(f) for f in (staged.keys() if staged else files)})
    out = {f: FileIndex(f, *file_identity(spark, (staged or {}).get(f, f))) for f in wanted}
    if not wanted:
        return out
    staged = {normalize_path(k): v for k, v in staged.items()} if staged else None
    df, path_col, keys = _frame(spark, table, wanted, staged)
    types = {f.name.lower(): f.dataType.simpleString() for f in df.schema.fields}
    for c in list(minmax) + [b.column for b in blooms]:
        if c not in types:
            raise PipelineError(f"Column {c} is not a column of {table}", "42703")
    df = df.select(path_col.alias("__f"), *[F.col(quote_table(c)).alias(c)
                                           for c in dict.fromkeys(list(minmax)
                                                                  + [b.column for b in blooms])])
    if blooms:
        # the files are read once: the indexed columns are cached for the two aggregations
        from pyspark import StorageLevel
        df = df.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        for row in _stats(df, minmax, types).toLocalIterator():
            key = keys.get(row["__f"])
            if key is None:
                continue            # cannot happen with the file filter; never mis-key
            entry = out[key]
            entry.rows = int(row["__rows"])
            for i, c in enumerate(minmax):
                entry.stats[c] = _stat(types[c], row[f"__lo{i}"], row[f"__hi{i}"],
                                       int(row[f"__n{i}"]))
        buckets: dict[tuple[str, int], dict[int, bytes]] = {}
        if blooms:
            for row in _probes(df, blooms).toLocalIterator():
                key = keys.get(row["__f"])
                if key is not None:
                    buckets.setdefault((key, row["__b"]), {})[int(row["__g"])] = \
                        bytes(row["__packed"])
    finally:
        if blooms:
            df.unpersist()
    for entry in out.values():
        if entry.rows == 0:
            entry.stats = {c: (None, None, 0) for c in minmax}
        for j, spec in enumerate(blooms):
            entry.blooms[spec.column] = bloom.assemble(spec.m, buckets.get((entry.path, j), {}))
    return out


def _stats(df: "DataFrame", minmax: Sequence[str], types: Mapping[str, str]) -> "DataFrame":
    """Per file: rows, and min / max / NULL count of each minmax column."""
    from pyspark.sql import functions as F
    aggs = [F.count(F.lit(1)).alias("__rows")]
    for i, c in enumerate(minmax):
        lo, hi = F.min(c), F.max(c)
        if types[c] in _AS_TEXT or types[c].startswith("decimal("):
            lo, hi = lo.cast("string"), hi.cast("string")   # exact, in the session zone
        aggs += [lo.alias(f"__lo{i}"), hi.alias(f"__hi{i}"),
                 F.count_if(F.col(c).isNull()).alias(f"__n{i}")]
    return df.groupBy("__f").agg(*aggs)


def _probes(df: "DataFrame", blooms: Sequence[BloomSpec]) -> "DataFrame":
    """Per (file, bloom, 32768-bit bucket): the bucket's bits packed (bloom.bucket_sql).

    One row per (row, probe), computed by plain expressions (higher-order lambdas are
    interpreted, several times slower); `bit_or` per 64-bit word is a narrow hash
    aggregation, then each bucket's words are packed into one binary."""
    from pyspark.sql import functions as F
    df = df.select("__f", *[F.expr(bloom.hash_sql(quote_table(b.column))).alias(f"__h{j}")
                            for j, b in enumerate(blooms)])
    total = sum(b.k for b in blooms)
    df = df.select("*", F.explode(F.sequence(F.lit(0), F.lit(total - 1))).alias("__i"))
    which, local, probe, start = ["CASE"], ["CASE"], ["CASE"], 0
    for j, spec in enumerate(blooms):
        cond = f"WHEN __i < {start + spec.k}"
        which.append(f"{cond} THEN {j}")
        local.append(f"{cond} THEN __i - {start}")
        probe.append(f"WHEN __b = {j} THEN {bloom.probe_sql(f'__h{j}', '__l', spec.m)}")
        start += spec.k
    df = df.select("__f", *[f"__h{j}" for j in range(len(blooms))],
                   F.expr(" ".join(which) + " END").alias("__b"),
                   F.expr(" ".join(local) + " END").alias("__l"))
    df = df.select("__f", "__b", F.expr(" ".join(probe) + " END").alias("__p"))
    df = df.where("__p IS NOT NULL")                     # NULL values add no probe
    words = df.groupBy("__f", "__b", F.expr("__p div 64").alias("__w")).agg(
        F.expr(f"bit_or({bloom.word_sql('__p')})").alias("__bits"))
    packed = words.groupBy("__f", "__b", F.expr(f"__w div {bloom.WORDS_PER_BUCKET}")
                           .alias("__g")).agg(
        F.collect_list(F.struct(F.col("__w").alias("w"), F.col("__bits").alias("bits")))
        .alias("__words"))
    return packed.select("__f", "__b", "__g",
                         F.expr(bloom.bucket_sql("__words", "__g")).alias("__packed"))


def _stat(spark_type: str, low: Any, high: Any, nulls: int) -> tuple[Any, Any, int]:
    """JSON-able (low, high, nulls); a bound the query side could misread is None."""
    def ok(v: Any) -> Any:
        if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
            return None
        if isinstance(v, str) and len(v) > MAX_STRING_STAT:
            return None
        if isinstance(v, (datetime.date, decimal.Decimal)):
            return str(v)
        return v
    low, high = ok(low), ok(high)
    if low is None or high is None:
        low = high = None
    return low, high, nulls
