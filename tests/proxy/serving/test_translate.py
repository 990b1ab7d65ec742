"""Fast tier of the serving tier's translator (no Spark, no files read): the decisions
of tests/fixtures/proxy/serving_translate.yaml -- the Spark result types of queries it
serves and the reasons of those it sends to Spark -- and spark_decimal_div, the engine's
decimal division, at its edges. The values are checked against Spark in
test_types_spark.py and tests/rewriter/test_serving_equivalence.py."""
from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
import sqlglot
import yaml

from proxy.serving.engine import spark_decimal_div
from proxy.serving.translate import NotServable, decimal_div_type, translate

FIXTURES = yaml.safe_load((Path(__file__).parents[2] / "fixtures/proxy/serving_translate.yaml")
                          .read_text())
TABLES = {"db.dm_table": {"country": "string", "q": "bigint", "p": "decimal(20,2)",
                          "c": "bigint", "d": "date", "x": "double", "i": "int",
                          "big": "decimal(38,10)", "ti": "tinyint", "sm": "decimal(10,2)",
                          "ts": "timestamp"}}
READ = ("(SELECT country, q, p, c, d, x, i, big, ti, sm FROM db.dm_table "
        "WHERE dm_segment_id IN ('0', '1')) AS m")


def _files(table, ids):
    return [f"/f/{table}/{i}.parquet" for i in ids]


def _translate(sql: str, files_of=_files):
    return translate(sqlglot.parse_one(sql.replace("$m", READ), read="spark"), TABLES, files_of)


@pytest.mark.parametrize("case", FIXTURES["serve"], ids=[c["title"] for c in FIXTURES["serve"]])
def test_serves(case):
    plan = _translate(case["sql"])
    assert [list(c) for c in plan.columns] == case["columns"]
    for text in case.get("contains", ()):
        assert text in plan.sql
    assert plan.reads == (("db.dm_table", ("0", "1")),)


@pytest.mark.parametrize("case", FIXTURES["refuse"], ids=[c["title"] for c in FIXTURES["refuse"]])
def test_refuses(case):
    with pytest.raises(NotServable) as e:
        _translate(case["sql"])
    assert case["reason"] in str(e.value)


def test_segments_without_files_are_a_typed_empty_relation():
    plan = _translate("SELECT SUM(m.p) AS s FROM $m", lambda table, ids: [])
    assert "CAST(NULL AS DECIMAL(20,2)) AS \"p\"" in plan.sql and "WHERE FALSE" in plan.sql
    assert "read_parquet" not in plan.sql


def test_files_of_refusing_a_segment_refuses_the_query():
    def files_of(table, ids):
        raise NotServable("segment 1 of db.dm_table is no longer visible")
    with pytest.raises(NotServable, match="no longer visible"):
        _translate("SELECT m.country AS c FROM $m", files_of)


def test_a_column_of_unknown_type_is_named_so():
    tables = {"db.dm_table": {"b": ""}}
    tree = sqlglot.parse_one("SELECT m.b AS b FROM (SELECT b FROM db.dm_table "
                             "WHERE dm_segment_id IN ('0')) AS m", read="spark")
    with pytest.raises(NotServable, match="unknown type"):
        translate(tree, tables, _files)


# --- decimal division: Spark's result type and value ------------------------------------

@pytest.mark.parametrize("operands,result", [
    ((20, 2, 20, 0), (38, 20)),      # avg-style sum / count, adjusted to 38 digits
    ((10, 2, 1, 0), (14, 6)),        # by an integer literal
    ((38, 10, 38, 10), (38, 6)),     # the scale never drops under 6
    ((5, 0, 5, 0), (11, 6)),
])
def test_decimal_div_type(operands, result):
    assert decimal_div_type(*operands) == result


@pytest.mark.parametrize("a,b,p,s,want", [
    ("1", "8", 10, 2, "0.13"),               # HALF_UP (HALF_EVEN would give 0.12)
    ("-1", "8", 10, 2, "-0.13"),             # away from zero
    ("2", "3", 10, 6, "0.666667"),
    ("-2", "3", 10, 6, "-0.666667"),
    ("1.25", "-0.5", 10, 2, "-2.50"),        # the result keeps its scale
    ("0", "-7", 10, 3, "0.000"),            # (DuckDB has no -0 decimal either)
    ("99.99", "1", 4, 2, "99.99"),           # exactly p digits
    ("123456789012345678.12", "1", 38, 20, "123456789012345678.12000000000000000000"),
    # rounded once, from the exact quotient (Spark 4): 0.00000049999...975 and
    # 0.99999949999...9 stay under the boundary; rounding first at scale 38 crossed it
    ("1000000000000000000000000000000", "2000000000000000000000000000000000001", 38, 6,
     "0.000000"),
    ("89999954999999999999999999999999999999", "89999999999999999999999999999999999999",
     38, 6, "0.999999"),
])
def test_spark_decimal_div(a, b, p, s, want):
    got = spark_decimal_div(a, b, p, s)
    assert Decimal(got) == Decimal(want) and Decimal(got).as_tuple().exponent == -s


@pytest.mark.parametrize("a,b", [(None, "2"), ("2", None), (None, None), (None, "0")])
def test_spark_decimal_div_null_before_zero(a, b):
    assert spark_decimal_div(a, b, 10, 2) is None


@pytest.mark.parametrize("a", ["1", "0", "-3.5"])
def test_spark_decimal_div_by_zero_raises(a):
    with pytest.raises(ZeroDivisionError):
        spark_decimal_div(a, "0", 10, 2)
    with pytest.raises(ZeroDivisionError):
        spark_decimal_div(a, "0.00", 10, 2)


@pytest.mark.parametrize("a,b,p,s", [("100", "1", 4, 2), ("-100", "1", 4, 2),
                                     ("12345678901234567890.12", "1", 38, 20),
                                     ("1", "0.001", 5, 2), ("99.995", "1", 4, 2)])
def test_spark_decimal_div_overflow_raises(a, b, p, s):
    with pytest.raises(OverflowError):
        spark_decimal_div(a, b, p, s)


# --- timestamps (proxy/serving/timestamps.py): served in fixed-offset zones only ---------

TS_READ = "(SELECT country, ts, d, q FROM db.dm_table WHERE dm_segment_id IN ('0')) AS m"


def _translate_ts(sql: str, zone: str | None):
    return translate(sqlglot.parse_one(sql.replace("$m", TS_READ), read="spark"), TABLES,
                     _files, zone)


@pytest.mark.parametrize("zone, offset", [("UTC", None), ("Etc/UTC", None), ("GMT", None),
                                          ("+05:30", 19800), ("Etc/GMT+5", -18000),
                                          ("UTC-08:00", -28800)])
def test_timestamps_in_fixed_offset_zones(zone, offset):
    plan = _translate_ts("SELECT DATE_TRUNC('YEAR', m.ts) AS y, MAX(m.ts) AS mx, YEAR(m.ts) AS yr, "
                         "HOUR(m.ts) AS h, SUM(m.q) AS s FROM $m WHERE m.ts >= '2024-01-01' "
                         "AND m.ts < CAST('2025-01-01' AS DATE) AND m.d <= m.ts "
                         "GROUP BY DATE_TRUNC('YEAR', m.ts), YEAR(m.ts), HOUR(m.ts)", zone)
    assert list(plan.columns) == [("y", "timestamp"), ("mx", "timestamp"), ("yr", "int"),
                                  ("h", "int"), ("s", "bigint")]
    assert "TIMESTAMP '2024-01-01'" in plan.sql and "date_trunc('year'" in plan.sql
    if offset is None:
        assert "INTERVAL" not in plan.sql
    else:
        assert f"INTERVAL ({offset}) SECOND" in plan.sql


@pytest.mark.parametrize("zone", ["America/New_York", "Europe/Berlin", "Asia/Tokyo", None])
def test_timestamps_elsewhere_go_to_spark_but_only_when_used(zone):
    with pytest.raises(NotServable) as e:
        _translate_ts("SELECT MAX(m.ts) AS mx FROM $m", zone)
    assert ("not a fixed UTC offset" if zone else "time zone is not known") in str(e.value)
    # a query that does not use the timestamp column is served, and does not read it
    plan = _translate_ts("SELECT m.country AS c, SUM(m.q) AS s FROM $m GROUP BY m.country", zone)
    assert '"ts"' not in plan.sql


@pytest.mark.parametrize("sql, reason", [
    ("SELECT m.country AS c FROM $m WHERE m.ts > '2024-13-01'", "not a 'YYYY-MM-DD"),
    ("SELECT m.country AS c FROM $m WHERE m.ts > m.country", "not a 'YYYY-MM-DD"),
    ("SELECT DATE_TRUNC('MILLISECOND', m.ts) AS t FROM $m", "date_trunc unit millisecond"),
    ("SELECT CAST(m.ts AS BOOLEAN) AS t FROM $m", "CAST from timestamp to boolean"),
    ("SELECT HOUR(m.d) AS h FROM $m", "HOUR of date"),
])
def test_timestamp_refusals(sql, reason):
    with pytest.raises(NotServable) as e:
        _translate_ts(sql, "UTC")
    assert reason in str(e.value)
