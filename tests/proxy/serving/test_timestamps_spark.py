"""Timestamps served in fixed-offset session time zones, against Spark (named zones:
test_zones_spark.py).

One table of instants near day, month and year boundaries (with fractions of a second and
a NULL), written as Parquet by Spark; for each zone Spark's session time zone is set and
every query runs in Spark and through translate(zone=...) + the local engine from the same
SQL text. Spark's values are compared as Spark prints them in that zone (CAST to STRING)
against the served values as the proxy prints them (proxy.thrift.rowsets)."""
from __future__ import annotations


import pytest
import sqlglot

from proxy.serving.translate import NotServable, translate
from proxy.thrift.rowsets import _as_string
from tests.support.serving import engine, segmented_table  # noqa: F401 - a fixture

pytestmark = pytest.mark.spark

TABLE = "servts.t"
COLUMNS = {"k": "int", "ts": "timestamp", "dt": "date"}
ROWS = [   # k, ts (UTC), dt, segment
    (1, "2024-01-01 00:30:00", "2024-01-01", "0"),
    (2, "2023-12-31 23:59:59.5", "2023-12-31", "0"),
    (3, "2024-02-29 18:45:00.123456", "2024-03-01", "0"),
    (4, None, "2024-01-01", "1"),
    (5, "2024-06-30 20:00:00.1", None, "1"),
    (6, "1999-12-31 22:00:00", "2000-01-01", "1"),
    (7, "2024-03-31 02:30:00", "2024-03-31", "2"),      # invisible segment
]
READ = f"(SELECT k, ts, dt FROM {TABLE} WHERE dm_segment_id IN ('0', '1')) AS m"
QUERIES = [
    "SELECT date_trunc('DAY', m.ts) AS d, count(*) AS c FROM {m} GROUP BY date_trunc('DAY', m.ts)",
    "SELECT hour(m.ts) AS h, minute(m.ts) AS mi, max(m.ts) AS mx, min(m.ts) AS mn FROM {m} "
    "GROUP BY hour(m.ts), minute(m.ts)",
    "SELECT m.k AS k, m.ts AS t FROM {m} WHERE m.ts >= '2024-01-01 05:00:00'",
    "SELECT m.k AS k, year(m.ts) AS y, month(m.ts) AS mo, day(m.ts) AS d, quarter(m.ts) AS q, "
    "CAST(m.ts AS DATE) AS dd, second(m.ts) AS s FROM {m}",
    "SELECT m.k AS k FROM {m} WHERE m.ts < CAST('2024-01-02' AS DATE)",
    "SELECT date_trunc('WEEK', m.ts) AS w, date_trunc('QUARTER', m.dt) AS q, "
    "date_trunc('YEAR', m.ts) AS y, date_trunc('MONTH', m.ts) AS mo, count(*) AS c FROM {m} "
    "GROUP BY date_trunc('WEEK', m.ts), date_trunc('QUARTER', m.dt), date_trunc('YEAR', m.ts), "
    "date_trunc('MONTH', m.ts)",
    "SELECT m.k AS k, m.dt <= m.ts AS le, CAST(m.dt AS TIMESTAMP) AS mid FROM {m}",
    "SELECT m.k AS k FROM {m} WHERE m.ts BETWEEN '2023-12-31' AND '2024-03-01 00:00:00' "
    "ORDER BY m.ts DESC",
]
ZONES = ["UTC", "+05:30", "-08:00", "Etc/GMT-14"]


@pytest.fixture(scope="module")
def served_table():
    def frame(spark):
        df = spark.createDataFrame([tuple(r) for r in ROWS], "k INT, ts STRING, dt STRING, "
                                   "dm_segment_id STRING")
        return df.selectExpr("k", "CAST(ts AS TIMESTAMP) AS ts", "CAST(dt AS DATE) AS dt",
                             "dm_segment_id")
    from pyspark.sql import SparkSession
    spark = SparkSession.getActiveSession()
    before = spark.conf.get("spark.sql.session.timeZone") if spark else None
    with segmented_table(_in_utc(frame), "servts") as out:
        try:
            yield out
        finally:
            if before is not None:
                out[0].conf.set("spark.sql.session.timeZone", before)


def _in_utc(frame):
    """The instants of ROWS are written as UTC wall-clock times."""
    def build(spark):
        spark.conf.set("spark.sql.session.timeZone", "UTC")
        return frame(spark)
    return build


def _text(v):
    return None if v is None else _as_string(v)


@pytest.mark.parametrize("zone", ZONES)
@pytest.mark.parametrize("template", QUERIES)
def test_timestamps_like_spark(template, zone, served_table, engine):
    spark, files = served_table
    sql = template.format(m=READ)
    plan = translate(sqlglot.parse_one(sql, read="spark"), {TABLE: COLUMNS},
                     lambda table, ids: [f for i in ids for f in files[i]], zone)
    spark.conf.set("spark.sql.session.timeZone", zone)
    try:
        sdf = spark.sql(sql)
        types = [(f.name, f.dataType.simpleString()) for f in sdf.schema.fields]
        as_text = sdf.selectExpr(*[f"CAST(`{n}` AS STRING)" for n, _ in types])
        want = [tuple(r) for r in as_text.collect()]
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")
    got = [tuple(_text(v) for v in r) for r in engine.run_blocking(plan)]
    assert list(plan.columns) == types
    ordered = "ORDER BY" in sql
    key = (lambda rows: rows) if ordered else (lambda rows: sorted(rows, key=repr))
    assert key(got) == key(want), f"zone {zone}\n{plan.sql}"


def test_a_named_zone_whose_rules_are_not_checked_is_not_served():
    with pytest.raises(NotServable, match="neither a fixed UTC offset nor a named zone"):
        translate(sqlglot.parse_one(QUERIES[0].format(m=READ), read="spark"),
                  {TABLE: COLUMNS}, lambda t, i: ["x"], "America/Sao_Paulo")
