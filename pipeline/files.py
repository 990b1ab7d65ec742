"""Base-table files: list them, and read "only these files of table t".

Segments of Spark tables are sets of data files (architecture.md), so both the proxy's
segment cutting and incremental refresh compare file paths. Spark spells the same file
two ways: `inputFiles()` and `input_file_name()` give `file:///x`, `_metadata.file_path`
gives `file:/x` (both URL-encode the same characters), so every path is normalised to the
`file:/x` form before it is stored or compared, on the Python side and inside Spark.

Two kinds of scan (Spark decides, not the table's DDL):
  - data-source scans: `USING parquet|orc|...` tables, and Hive-serde Parquet/ORC tables
    that Spark converts (`spark.sql.hive.convert_metastore_*`, on by default). Rows carry
    `_metadata.file_path`; `inputFiles()` lists the data files. Both URL-encode (`p=a%20b`).
  - Hive scans (`HiveTableRelation`: TEXTFILE, Avro, any serde Spark does not convert).
    There is no `_metadata`; `input_file_name()` spells the path *decoded* (`p=a b`,
    Hadoop's `Path.toString`), and `inputFiles()` names only the table's directory, so
    the files are listed here from the table's and partitions' locations. Stored paths
    stay in the encoded form; the decoded form is made only to compare with
    `input_file_name()`.

An external-format table (pipeline/external.py) is a view over a hidden CSV table: its
files are that source table's (external_source), so listing, layout and "only these
files" read the source table, and in_files / file_path_column are conditions on the
source table's rows.
"""
from __future__ import annotations

import json
import re
import uuid
from typing import TYPE_CHECKING, Iterable, Sequence
from urllib.parse import unquote

from pipeline.errors import PipelineError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession


def normalize_path(path: str) -> str:
    """`file:///x` and `file://localhost/x` -> `file:/x`; other schemes unchanged."""
    if path.startswith("file:///"):
        return "file:/" + path[len("file:///"):]
    if path.startswith("file://localhost/"):
        return "file:/" + path[len("file://localhost/"):]
    return path


def _normalized(column: "Column") -> "Column":
    from pyspark.sql import functions as F
    return F.regexp_replace(column, r"^file://(localhost)?/", "file:/")


def quote_table(table: str) -> str:
    """`db.t` -> `` `db`.`t` ``."""
    return ".".join(f"`{part.replace('`', '``')}`" for part in table.split("."))


def is_hive_serde(spark: "SparkSession", table: str) -> bool:
    """True for Hive-format tables (STORED AS ...), whatever Spark's scan of them is."""
    for row in spark.sql(f"DESCRIBE TABLE EXTENDED {quote_table(table)}").collect():
        if row[0] == "Provider":
            return str(row[1]).strip().lower() == "hive"
    return False


LOOK_UP = object()    # a `meta` argument not given: look the table up


def table_meta(spark: "SparkSession", table: str, meta=LOOK_UP):
    """The metastore's CatalogTable of "db.table" (a JVM object), or None. `meta`: the
    caller's copy from the same job (a metastore round trip saved)."""
    if meta is not LOOK_UP:
        return meta
    try:
        db, _, name = table.partition(".")
        return spark._jsparkSession.sessionState().catalog().externalCatalog().getTable(db, name)
    except Exception:  # noqa: BLE001 - another catalog, a temp view, no such table
        return None


EXTERNAL_SOURCE_KEY = "datamap.external.source"    # pipeline/external.py SOURCE_KEY


def external_source(spark: "SparkSession", table: str, meta=LOOK_UP) -> str | None:
    """The hidden source table of an external-format table's view, else None."""
    meta = table_meta(spark, table, meta)
    if meta is None or meta.tableType().name() != "VIEW":
        return None
    found = meta.properties().get(EXTERNAL_SOURCE_KEY)
    return str(found.get()) if found.isDefined() else None


def _files_of(spark: "SparkSession", table: str) -> str:
    """The table whose data files `table`'s are (itself, or an external view's source)."""
    return external_source(spark, table) or table


def _provider(meta) -> str:
    provider = meta.provider()
    return str(provider.get()).lower() if provider.isDefined() else ""


def hive_scan(spark: "SparkSession", table: str, meta=LOOK_UP) -> bool:
    """True when Spark reads `table` through a Hive serde scan (no `_metadata`, decoded
    `input_file_name()`, `inputFiles()` = directories), False for a data-source scan.
    `meta` as in table_meta."""
    meta = table_meta(spark, table, meta)
    if meta is not None and meta.tableType().name() != "VIEW" and _provider(meta) not in ("", "hive"):
        return False      # a data-source table (USING ...): no need to analyse a plan
    plan = spark.table(table)._jdf.queryExecution().analyzed().toString()
    return "HiveTableRelation [" in plan


def decoded_path(path: str) -> str:
    """Encoded (URI) spelling -> the decoded one `input_file_name()` gives on Hive scans:
    `file:/w/p=a%20b/f` -> `file:/w/p=a b/f` (`+` stays, as in Hadoop's Path.toString)."""
    return unquote(normalize_path(path))


def list_files(spark: "SparkSession", table: str) -> tuple[str, ...]:
    """The table's current data files, normalised and sorted. Refreshes Spark's cached
    listing first, so files written by another application (the Thrift server) count."""
    table = _files_of(spark, table)
    spark.catalog.refreshTable(table)
    if hive_scan(spark, table):
        paths: Iterable[str] = _hive_table_files(spark, table)
    else:
        paths = spark.table(table).inputFiles()
    return tuple(sorted({normalize_path(p) for p in paths}))


def _hive_table_files(spark: "SparkSession", table: str) -> list[str]:
    """Data files under the table's location, or its partitions' locations (which may lie
    anywhere), listed the way Spark lists a data-source table: recursively, without hidden
    (`_x`, `.x`) files, which Hive's input formats skip too. Encoded spelling."""
    jvm = spark._jvm
    external = spark._jsparkSession.sessionState().catalog().externalCatalog()
    db, _, name = table.partition(".")
    meta = external.getTable(db, name)
    if meta.tableType().name() == "VIEW":   # no location of its own: Spark's best effort
        return list(spark.table(table).inputFiles())
    if meta.partitionColumnNames().isEmpty():
        locations = [meta.location()]
    else:
        parts = external.listPartitions(db, name, jvm.scala.Option.empty())
        locations = [p.location() for p in jvm.scala.jdk.javaapi.CollectionConverters.asJava(parts)]
    conf = spark._jsc.hadoopConfiguration()
    dirs = []
    for uri in locations:
        path = jvm.org.apache.hadoop.fs.Path(uri)
        if path.getFileSystem(conf).exists(path):   # a partition whose directory is gone
            dirs.append(path.toString())
    if not dirs:
        return []
    return list(spark.read.format("text").option("recursiveFileLookup", "true")
                .load(dirs).inputFiles())


def table_layout(spark: "SparkSession", table: str) -> dict:
    """Where `table`'s files live, for a reader that lists them without Spark (the proxy's
    freshness guard): {"hive": Hive scan?, "partitioned": bool, "roots": [table location,
    then every partition's location], "cached": CACHE TABLE'd?}, locations in the encoded
    URI spelling (`file:/w/p=a%20b`). A view has no roots (its files cannot be known).
    An external table's view: its source table's, with "external": the source's name."""
    source = external_source(spark, table)
    table = source or table
    meta = table_meta(spark, table)
    if meta is None or meta.tableType().name() == "VIEW":
        return {"hive": False, "partitioned": False, "roots": [], "cached": False}
    roots = [normalize_path(meta.location().toString())]
    partitioned = not meta.partitionColumnNames().isEmpty()
    if partitioned:
        jvm = spark._jvm
        external = spark._jsparkSession.sessionState().catalog().externalCatalog()
        db, _, name = table.partition(".")
        parts = external.listPartitions(db, name, jvm.scala.Option.empty())
        for p in jvm.scala.jdk.javaapi.CollectionConverters.asJava(parts):
            roots.append(normalize_path(p.location().toString()))
    try:
        cached = bool(spark.catalog.isCached(table))
    except Exception:  # noqa: BLE001 - e.g. dropped meanwhile
        cached = False
    return {"hive": hive_scan(spark, table, meta), "partitioned": partitioned,
            "roots": list(dict.fromkeys(roots)), "cached": cached, "external": source,
            **_reading(spark, meta)}


def _reading(spark: "SparkSession", meta) -> dict:
    """How the table's files are read, for a reader other than Spark (the serving tier):
    "format" (the provider: parquet, csv, hive, ...), "columns" [(name, type)] in the
    table's order (partition columns last), "partition_columns", and "options" (the
    storage properties: a CSV table's header, sep, ...)."""
    conv = spark._jvm.scala.jdk.javaapi.CollectionConverters
    fields = meta.schema().fields()
    props = conv.asJava(meta.storage().properties())
    return {"format": _provider(meta),
            "columns": [[f.name(), f.dataType().simpleString()] for f in fields],
            "partition_columns": [str(c) for c in conv.asJava(meta.partitionColumnNames())],
            "options": {str(k): str(props.get(k)) for k in props.keySet()}}


def unreadable_by_file(spark: "SparkSession", table: str, hive: bool | None = None) -> str | None:
    """Why "only these files of `table`" cannot be read, or None. A cached Hive scan has
    no input file: input_file_name() is '' for every row, so a filter on it reads nothing.
    `hive`: hive_scan(spark, table) when the caller already knows it (it costs an analysis)."""
    hive = hive_scan(spark, table) if hive is None else hive
    if hive and spark.catalog.isCached(table):
        return f"{table} is a cached Hive-format table, whose rows carry no file name"
    return None


def in_files(spark: "SparkSession", table: str, files: Iterable[str],
             hive: bool | None = None) -> "Column":
    """A condition on rows of `spark.table(table)`: the row lives in one of `files` (any
    spelling of the encoded form, as list_files returns). `hive` as in unreadable_by_file.
    (An external table's view: on rows of its source table.)"""
    from pyspark.sql import functions as F
    table = _files_of(spark, table)
    if hive_scan(spark, table) if hive is None else hive:
        why = unreadable_by_file(spark, table, True)
        if why:   # callers check first (incremental_append rebuilds instead); never read ''
            raise PipelineError(f"Cannot read only the new files of table {table}: {why}",
                                "0A000")
        return _normalized(F.input_file_name()).isin(sorted({decoded_path(f) for f in files}))
    return _normalized(F.col("_metadata.file_path")).isin(
        sorted({normalize_path(f) for f in files}))


def file_path_column(spark: "SparkSession", table: str) -> "Column":
    """The row's file path, normalised; encoded for data-source scans, decoded for Hive
    scans (compare through in_files, which knows which)."""
    from pyspark.sql import functions as F
    table = _files_of(spark, table)
    raw = F.input_file_name() if hive_scan(spark, table) else F.col("_metadata.file_path")
    return _normalized(raw)


def read_files(spark: "SparkSession", table: str, files: Iterable[str],
               hive: bool | None = None, meta=LOOK_UP) -> "DataFrame":
    """Rows of `table` that live in `files` (any spelling), with the table's columns only
    (partition columns included: they come from the table, not from the files). `hive` as
    in unreadable_by_file.

    A plain Parquet/ORC data-source table is read from `files` alone, as Spark reads the
    table (its format, options and schema) but without listing and filtering all of its
    files: that cost grew with the table, not the delta. Other tables are read whole with
    a file-name filter."""
    wanted = sorted({normalize_path(f) for f in files})
    source = external_source(spark, table, meta)
    if source is not None:       # the view's columns, from the source table's rows
        columns = spark.table(table).columns
        rows = spark.table(source)
        if not wanted:
            return rows.select(*columns).limit(0)
        return rows.where(in_files(spark, source, wanted, False)).select(*columns)
    if wanted and hive is None:
        hive = hive_scan(spark, table, meta)     # once: in_files below needs it too
    if wanted and not hive:
        direct = _read_directly(spark, table, wanted, meta)
        if direct is not None:
            return direct
    df = spark.table(table)
    columns = df.columns
    if not wanted:
        return df.limit(0)
    return df.where(in_files(spark, table, wanted, hive)).select(*columns)


def read_other_files(spark: "SparkSession", table: str, files: Iterable[str],
                     hive: bool | None = None) -> "DataFrame":
    """Rows of `table` that live in none of `files`, with the table's columns only (an
    external table's view: read from its source table, whose rows carry the file name)."""
    wanted = list(files)
    source = external_source(spark, table)
    if source is not None:
        columns = spark.table(table).columns
        return spark.table(source).where(~in_files(spark, source, wanted, False)).select(*columns)
    base = spark.table(table)
    return base.where(~in_files(spark, table, wanted, hive)).select(*base.columns)


_DIRECT_FORMATS = frozenset({"parquet", "orc"})
_GLOB_CHARS = frozenset("*?[]{}\\")
_CHAR_TYPE_KEY = "__CHAR_VARCHAR_TYPE_STRING"
_CHAR_TYPES = re.compile(r'"(var)?char\(\d+\)"')


def _read_directly(spark: "SparkSession", table: str, files: Sequence[str],
                   meta=LOOK_UP) -> "DataFrame | None":
    """`files` of a non-partitioned Parquet/ORC data-source table as a DataFrame with the
    table's columns, or None when the table is anything else (partition values live in
    paths or the metastore; CHAR/VARCHAR columns are padded by the table read; other
    formats' options are riskier to mirror) or a path would be taken for a glob."""
    from pyspark.sql.types import StructType
    meta = table_meta(spark, table, meta)
    fmt = _provider(meta) if meta is not None else ""
    if (fmt not in _DIRECT_FORMATS
            or meta.tableType().name() == "VIEW" or not meta.partitionColumnNames().isEmpty()):
        return None
    paths = [decoded_path(f) for f in files]   # load() takes Hadoop paths, not URIs
    if any(ch in _GLOB_CHARS for p in paths for ch in p):
        return None
    raw = json.loads(meta.schema().json())
    if _CHAR_TYPES.search(json.dumps([f["type"] for f in raw["fields"]])) or any(
            _CHAR_TYPE_KEY in f.get("metadata", {}) for f in raw["fields"]):
        return None
    schema = StructType.fromJson(raw)
    options = reader_options(spark, meta)
    # A user-given schema: exactly the table's columns, in order, whatever the files hold.
    return spark.read.format(fmt).schema(schema).options(**options).load(paths)


def reader_options(spark: "SparkSession", meta) -> dict[str, str]:
    """A data-source table's reader options (its OPTIONS, without the path)."""
    return {str(k): str(v) for k, v in dict(
        spark._jvm.scala.jdk.javaapi.CollectionConverters.asJava(
            meta.storage().properties())).items() if str(k).lower() != "path"}


def total_bytes(spark: "SparkSession", files: Iterable[str]) -> int | None:
    """Summed size of `files` from the file system (one metadata call per file, no Spark
    job); None when a file cannot be stat'ed."""
    try:
        jvm = spark.sparkContext._jvm
        conf = spark.sparkContext._jsc.hadoopConfiguration()
        total = 0
        for f in files:
            path = jvm.org.apache.hadoop.fs.Path(jvm.java.net.URI(normalize_path(f)))  # encoded
            total += path.getFileSystem(conf).getFileStatus(path).getLen()
        return total
    except Exception:  # noqa: BLE001 - unknown size: the caller plans for a big input
        return None


def small_input_bytes(spark: "SparkSession") -> int:
    """What one task reads anyway: Spark's spark.sql.files.maxPartitionBytes (128 MB)."""
    raw = str(spark.conf.get("spark.sql.files.maxPartitionBytes", "134217728")).strip().lower()
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    raw = raw[:-1] if raw.endswith("b") else raw
    try:
        return int(raw[:-1]) * units[raw[-1]] if raw[-1:] in units else int(raw)
    except ValueError:
        return 128 << 20


def register_files_view(spark: "SparkSession", table: str, files: Sequence[str],
                        tag: str = "src") -> str:
    """A temp view over `read_files(table, files)`; returns its name (drop it when done)."""
    name = f"dm_{tag}_{table.replace('.', '_')}_{uuid.uuid4().hex[:12]}"
    read_files(spark, table, files).createOrReplaceTempView(name)
    return name


def table_schemas(spark: "SparkSession", tables: Iterable[str]) -> dict:
    """Schemas (rewriter/api.py shape: db -> table -> column -> Spark type string) of
    `tables` ("db.table"), as compile_datamap needs them."""
    out: dict[str, dict[str, dict[str, str]]] = {}
    for table in tables:
        db, _, name = table.lower().partition(".")
        fields = spark.table(table).schema.fields
        out.setdefault(db, {})[name] = {f.name.lower(): f.dataType.simpleString()
                                        for f in fields}
    return out
