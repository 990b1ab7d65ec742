"""Spark tier for the rewriter: one in-process SparkSession per test session holding the
generated data of tests/support/rewriter_data.py for every table in
tests/fixtures/rewriter/schema.yaml.

The session time zone is fixed to Asia/Kathmandu (+05:45, no DST): a zone whose offset is
not a whole hour makes UTC-vs-local bucketing mistakes visible.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.support.rewriter_data import SESSION_TZ, generate_rows, load_schemas

# --- Spark ---------------------------------------------------------------------------------

def make_spark(tmp: Path):
    os.environ.setdefault("PYSPARK_PYTHON", "python3")
    from pyspark.sql import SparkSession
    return (SparkSession.builder.master("local[2]")
            .appName("rewriter-spark-tier")
            .config("spark.sql.catalogImplementation", "in-memory")
            .config("spark.sql.shuffle.partitions", "4")
            .config("spark.default.parallelism", "2")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.session.timeZone", SESSION_TZ)
            .config("spark.sql.warehouse.dir", str(tmp / "warehouse"))
            .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={tmp / 'derby'}")
            .config("spark.local.dir", str(tmp / "local"))
            .config("spark.driver.memory", "1g")
            .config("spark.sql.adaptive.enabled", "false")
            .getOrCreate())


def load_tables(spark, schemas: dict, rows: dict[str, list[dict]]) -> None:
    """Create every table as a cached parquet table with the exact declared column types."""
    from pyspark.sql.types import StringType, StructField, StructType
    for db in schemas:
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {db}")
    for name, data in rows.items():
        db, t = name.split(".")
        cols = schemas[db][t]
        st = StructType([StructField(c, StringType(), True) for c in cols])
        df = spark.createDataFrame([tuple(r[c] for c in cols) for r in data], st)
        typed = df.selectExpr(*[f"CAST(`{c}` AS {ty}) AS `{c}`" for c, ty in cols.items()])
        typed.coalesce(1).write.format("parquet").mode("overwrite").saveAsTable(name)
        spark.sql(f"CACHE TABLE {name}")


@pytest.fixture(scope="session")
def schemas() -> dict:
    return load_schemas()


@pytest.fixture(scope="session")
def spark(schemas):
    tmp = Path(tempfile.mkdtemp(prefix="rewriter-spark-"))
    session = make_spark(tmp)
    try:
        load_tables(session, schemas, generate_rows(schemas))
        yield session
    finally:
        session.stop()
        shutil.rmtree(tmp, ignore_errors=True)
