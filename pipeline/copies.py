"""Datamap files copied out of the warehouse byte for byte, through the session's Hadoop
FileSystem, which holds the cluster's configuration and credentials (HDFS, s3a://, abfs://,
gs://, viewfs://, file:). No Spark job runs: one metadata call per status, one stream per
copy. The serving tier's mirror (proxy/serving/mirror.py) keeps the copies for DuckDB.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.files import normalize_path

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _source(spark: "SparkSession", uri: str):
    """(FileSystem, Path) of a catalog file URI (the encoded spelling Spark lists)."""
    jvm = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(jvm.java.net.URI(normalize_path(uri)))
    return path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), path


def file_status(spark: "SparkSession", uri: str) -> tuple[int, int]:
    """(length in bytes, modification time in epoch milliseconds) of one file."""
    fs, path = _source(spark, uri)
    st = fs.getFileStatus(path)
    return int(st.getLen()), int(st.getModificationTime())


def copy_to_local(spark: "SparkSession", uri: str, local: str) -> None:
    """Copy one file to the local path `local` (replaced if present), byte for byte:
    FileSystem.copyToLocalFile onto the raw local file system (no .crc file beside it)."""
    fs, path = _source(spark, uri)
    jvm = spark.sparkContext._jvm
    target = jvm.org.apache.hadoop.fs.Path(jvm.java.io.File(local).toURI())
    fs.copyToLocalFile(False, path, target, True)


def error_text(e: BaseException) -> str:
    """A copy's failure in one line: the Java exception's class and message when the JVM
    raised it (`java.io.IOException: No space left on device`)."""
    java = getattr(e, "java_exception", None)
    if java is not None:
        try:
            return str(java.toString()).splitlines()[0][:300]
        except Exception:  # noqa: BLE001 - the JVM went away: the Python side then
            pass
    return f"{type(e).__name__}: {e}".splitlines()[0][:300]
