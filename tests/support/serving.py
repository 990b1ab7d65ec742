"""Shared set-up of the serving tier's differential tests: the local engine, a Spark
session (the running one, or one of their own), and a table written by Spark as Parquet
partitioned by segment, whose files the engine reads."""
from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from proxy.serving.engine import LocalEngine


@pytest.fixture(scope="module")
def engine():
    """The serving tier's engine, one per test module."""
    e = LocalEngine(threads=1, workers=1)
    try:
        yield e
    finally:
        e.close()


@contextmanager
def segmented_table(df, database: str, segments=("0", "1", "2")
                    ) -> Iterator[tuple[object, dict[str, list[str]]]]:
    """Write `df` (its last column dm_segment_id) as <database>.t, Parquet partitioned by
    segment, with the active Spark session or one of its own; yields (spark, {segment id:
    files}) and drops the database (and a session it started) afterwards."""
    os.environ.setdefault("PYSPARK_PYTHON", "python3")
    from pyspark.sql import SparkSession
    tmp = Path(tempfile.mkdtemp(prefix=f"{database}-"))
    spark = SparkSession.getActiveSession()
    created = spark is None
    if created:
        spark = (SparkSession.builder.master("local[2]").appName(database)
                 .config("spark.sql.catalogImplementation", "in-memory")
                 .config("spark.sql.shuffle.partitions", "2")
                 .config("spark.default.parallelism", "2")
                 .config("spark.ui.enabled", "false")
                 .config("spark.sql.warehouse.dir", str(tmp / "warehouse"))
                 .config("spark.local.dir", str(tmp / "local"))
                 .config("spark.driver.memory", "1g").getOrCreate())
    try:
        spark.sql(f"CREATE DATABASE {database} LOCATION '{tmp / database}'")
        df(spark).coalesce(1).write.partitionBy("dm_segment_id").format("parquet") \
            .saveAsTable(f"{database}.t")
        root = tmp / database / "t"
        files = {sid: sorted(str(p) for p in (root / f"dm_segment_id={sid}").glob("part-*.parquet"))
                 for sid in segments}
        assert all(files.values()), files
        yield spark, files
    finally:
        spark.sql(f"DROP DATABASE IF EXISTS {database} CASCADE")
        if created:
            spark.stop()
        shutil.rmtree(tmp, ignore_errors=True)
