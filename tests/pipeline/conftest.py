"""One in-process SparkSession for the pipeline tests.

There can be only one SparkSession per process, and tests/rewriter/ creates its own
(in-memory catalog). Reuse whichever exists; otherwise create an in-memory-catalog session
(parquet data-source tables work with it). Our tables live in a database of our own whose
LOCATION is our temp dir, so the session's warehouse does not matter.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def pipeline_spark():
    os.environ.setdefault("PYSPARK_PYTHON", "python3")
    from pyspark.sql import SparkSession
    tmp = Path(tempfile.mkdtemp(prefix="pipeline-spark-"))
    spark = SparkSession.getActiveSession()
    created = spark is None
    if created:
        spark = (SparkSession.builder.master("local[2]")
                 .appName("pipeline-tests")
                 .config("spark.sql.catalogImplementation", "in-memory")
                 .config("spark.sql.shuffle.partitions", "4")
                 .config("spark.default.parallelism", "2")
                 .config("spark.ui.enabled", "false")
                 .config("spark.sql.warehouse.dir", str(tmp / "warehouse"))
                 .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={tmp / 'derby'}")
                 .config("spark.local.dir", str(tmp / "local"))
                 .config("spark.driver.memory", "1g")
                 .getOrCreate())
    spark._pipeline_tmp = tmp  # noqa: SLF001 - where test databases put their files
    try:
        yield spark
    finally:
        if created:
            spark.stop()
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def pipe_db(pipeline_spark):
    """A fresh database for one test module; dropped afterwards."""
    name = f"dmpipe_{uuid.uuid4().hex[:8]}"
    location = pipeline_spark._pipeline_tmp / name
    pipeline_spark.sql(f"CREATE DATABASE {name} LOCATION '{location}'")
    try:
        yield name
    finally:
        pipeline_spark.sql(f"DROP DATABASE IF EXISTS {name} CASCADE")
