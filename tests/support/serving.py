"""Shared set-up of the serving tier's differential tests: the local engine, a Spark
session (the running one, or one of their own), and a table written by Spark as Parquet
partitioned by segment, whose files the engine reads.

The engine's rows (run_blocking, Python values) are what the tests compare with Spark's;
each run also checks that the answer the tier serves (column by column) sends a client the
same bytes as those rows (tests/support/replies.py)."""
from __future__ import annotations

import math
import os
import shutil
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Iterator

import pytest

from proxy.serving.engine import EngineFailure, LocalEngine
from tests.support.replies import check_served
from tests.support.spark_tier import fmt_rows


class CheckedEngine(LocalEngine):
    """The engine whose every run_blocking also checks the served answer of its plan
    (column by column whatever its size: `small` 0)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, small=0, **kwargs)

    def run_blocking(self, plan):
        try:
            rows = super().run_blocking(plan)
        except EngineFailure as e:
            check_served(self, plan, failure=e)
            raise
        check_served(self, plan, rows)
        return rows


@pytest.fixture(scope="module")
def engine():
    """The serving tier's engine, one per test module."""
    e = CheckedEngine(threads=1, workers=1)
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


def typed_frame(columns: dict[str, str], rows):
    """A frame builder for segmented_table: `rows` (each ending in its segment id) written
    as text and cast by Spark to `columns`' types, so the edge values are Spark's own
    reading of the literal text (38 nines, -0.0, NaN, unicode)."""
    def frame(spark):
        from pyspark.sql.types import StringType, StructField, StructType
        names = list(columns) + ["dm_segment_id"]
        st = StructType([StructField(c, StringType(), True) for c in names])
        df = spark.createDataFrame([tuple(None if v is None else str(v) for v in r)
                                    for r in rows], st)
        return df.selectExpr(*[f"CAST(`{c}` AS {t}) AS `{c}`" for c, t in columns.items()],
                             "dm_segment_id")
    return frame


def zero_sign_problems(columns, spark_rows, rows) -> list[str]:
    """-0.0 and 0.0 are equal to spark_tier.values_equal; a client sees them differently."""
    out = []
    for i, (name, typ) in enumerate(columns):
        if typ == "double":
            a = sorted(math.copysign(1, r[i]) for r in spark_rows if r[i] == 0)
            b = sorted(math.copysign(1, r[i]) for r in rows if r[i] == 0)
            if a != b:
                out.append(f"column {name}: signs of zeros differ: Spark {a} vs served {b}")
    return out


def scale_problems(columns, rows) -> list[str]:
    """Decimals must come back with exactly the type's scale (the HS2 encoding sends it)."""
    out = []
    for i, (name, typ) in enumerate(columns):
        if typ.startswith("decimal("):
            scale = int(typ[:-1].split(",")[1])
            bad = [r[i] for r in rows if r[i] is not None and (
                not isinstance(r[i], Decimal) or r[i].as_tuple().exponent != -scale)]
            if bad:
                out.append(f"column {name} {typ}: {bad[0]!r} is not a Decimal of scale {scale}")
    return out


@dataclass
class Outcomes:
    """One query run by Spark and its served plan run by the local engine: each side's
    answer or its error (an error is an outcome the differential tests compare too)."""
    spark_schema: list = field(default_factory=list)   # [(name, Spark type)]
    spark_rows: list = field(default_factory=list)
    spark_error: str | None = None
    rows: list = field(default_factory=list)
    engine_error: str | None = None


def both_outcomes(spark, engine, sql: str, plan) -> Outcomes:
    from proxy.serving.engine import EngineFailure
    out = Outcomes()
    try:
        sdf = spark.sql(sql)
        out.spark_schema = [(f.name, f.dataType.simpleString()) for f in sdf.schema.fields]
        out.spark_rows = [tuple(r) for r in sdf.collect()]
    except Exception as e:  # noqa: BLE001 - Spark's own error is an outcome here
        out.spark_error = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
    try:
        out.rows = engine.run_blocking(plan)
    except EngineFailure as e:
        out.engine_error = str(e)
    return out


def exact_value(v):
    """A value as a client tells it apart: the sign of a zero, NaN; a decimal by its value
    (its scale is the type's: scale_problems)."""
    if isinstance(v, float):
        return "NaN" if math.isnan(v) else repr(v)
    if isinstance(v, Decimal):
        return f"Decimal({v.normalize()})"
    return repr(v)


def exact_bag(rows) -> list[tuple]:
    """Rows as a sorted multiset of exact_value tuples."""
    return sorted(tuple(exact_value(v) for v in r) for r in rows)


def check_outcome(out: Outcomes, plan, expect: str) -> None:
    """A served plan's outcome (both_outcomes) as a differential case expects it: "error",
    both engines fail; "fallback", the local run fails where Spark answers (the query goes
    to Spark); "rows", Spark's rows in any order; "ordered", in Spark's order. Names,
    types, decimal scales and the signs of zeros are always Spark's."""
    if expect == "error":
        assert out.spark_error and out.engine_error, (out.spark_error, out.engine_error)
        return
    assert out.spark_error is None, out.spark_error
    if expect == "fallback":
        assert out.engine_error, f"the engine answered {out.rows}: {plan.sql}"
        return
    assert out.engine_error is None, (f"the engine failed ({out.engine_error}) where Spark "
                                      f"answered {fmt_rows(out.spark_rows)}\n  {plan.sql}")
    assert list(plan.columns) == out.spark_schema, \
        f"schema: Spark {out.spark_schema} vs served {list(plan.columns)}"
    srows, rows = out.spark_rows, out.rows
    problems = scale_problems(plan.columns, rows) + zero_sign_problems(plan.columns, srows, rows)
    assert not problems, "\n".join(problems)
    want, got = (exact_bag(srows), exact_bag(rows)) if expect == "rows" else (
        [tuple(map(repr, r)) for r in srows], [tuple(map(repr, r)) for r in rows])
    assert want == got, f"rows differ:\n  spark {want}\n  local {got}\n  duckdb: {plan.sql}"
