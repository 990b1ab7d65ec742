"""Base-table files: list them, and read "only these files of table t".

Segments of Spark tables are sets of data files (architecture.md), so both the proxy's
segment cutting and incremental refresh compare file paths. Spark spells the same file
two ways: `inputFiles()` and `input_file_name()` give `file:///x`, `_metadata.file_path`
gives `file:/x` (both URL-encode the same characters), so every path is normalised to the
`file:/x` form before it is stored or compared, on the Python side and inside Spark.
"""
from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Iterable, Sequence

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
    """True for Hive-format tables (STORED AS ...), whose rows carry no `_metadata`."""
    for row in spark.sql(f"DESCRIBE TABLE EXTENDED {quote_table(table)}").collect():
        if row[0] == "Provider":
            return str(row[1]).strip().lower() == "hive"
    return False


def list_files(spark: "SparkSession", table: str) -> tuple[str, ...]:
    """The table's current data files, normalised and sorted. Refreshes Spark's cached
    listing first, so files written by another application (the Thrift server) count."""
    spark.catalog.refreshTable(table)
    return tuple(sorted({normalize_path(p) for p in spark.table(table).inputFiles()}))


def file_path_column(spark: "SparkSession", table: str) -> "Column":
    from pyspark.sql import functions as F
    raw = F.input_file_name() if is_hive_serde(spark, table) else F.col("_metadata.file_path")
    return _normalized(raw)


def read_files(spark: "SparkSession", table: str, files: Iterable[str]) -> "DataFrame":
    """Rows of `table` that live in `files` (any spelling), with the table's columns only."""
    wanted = sorted({normalize_path(f) for f in files})
    df = spark.table(table)
    columns = df.columns
    if not wanted:
        return df.limit(0)
    return df.where(file_path_column(spark, table).isin(wanted)).select(*columns)


def total_bytes(spark: "SparkSession", files: Iterable[str]) -> int | None:
    """Summed size of `files` from the file system (one metadata call per file, no Spark
    job); None when a file cannot be stat'ed."""
    try:
        jvm = spark.sparkContext._jvm
        conf = spark.sparkContext._jsc.hadoopConfiguration()
        total = 0
        for f in files:
            path = jvm.org.apache.hadoop.fs.Path(f)
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
