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

from proxy.serving.engine import spark_decimal_div
from proxy.serving.translate import NotServable, decimal_div_type, translate
from tests.support import yamlfile as yaml

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


# --- timestamps (proxy/serving/timestamps.py): fixed offsets and checked named zones ---

TS_READ = "(SELECT country, ts, d, q FROM db.dm_table WHERE dm_segment_id IN ('0')) AS m"


def _translate_ts(sql: str, zone: str | None):
    return translate(sqlglot.parse_one(sql.replace("$m", TS_READ), read="spark"), TABLES,
                     _files, zone)


TS_QUERY = ("SELECT DATE_TRUNC('YEAR', m.ts) AS y, MAX(m.ts) AS mx, YEAR(m.ts) AS yr, "
            "HOUR(m.ts) AS h, SUM(m.q) AS s FROM $m WHERE m.ts >= '2024-01-01' "
            "AND m.ts < CAST('2025-01-01' AS DATE) AND m.d <= m.ts "
            "GROUP BY DATE_TRUNC('YEAR', m.ts), YEAR(m.ts), HOUR(m.ts)")


@pytest.mark.parametrize("zone, offset", [("UTC", None), ("Etc/UTC", None), ("GMT", None),
                                          ("+05:30", 19800), ("Etc/GMT+5", -18000),
                                          ("UTC-08:00", -28800)])
def test_timestamps_in_fixed_offset_zones(zone, offset):
    plan = _translate_ts(TS_QUERY, zone)
    assert list(plan.columns) == [("y", "timestamp"), ("mx", "timestamp"), ("yr", "int"),
                                  ("h", "int"), ("s", "bigint")]
    assert "TIMESTAMP '2024-01-01'" in plan.sql and "date_trunc('year'" in plan.sql
    assert "spark_tz_" not in plan.sql
    if offset is None:
        assert "INTERVAL" not in plan.sql
    else:
        assert f"INTERVAL ({offset}) SECOND" in plan.sql


@pytest.mark.parametrize("zone", ["America/New_York", "Europe/Berlin", "Asia/Kolkata",
                                  "Australia/Lord_Howe"])
def test_timestamps_in_named_zones_go_through_the_zone_macros(zone):
    plan = _translate_ts(TS_QUERY, zone)
    assert [t for _, t in plan.columns] == ["timestamp", "timestamp", "int", "int", "bigint"]
    # literals and dates become instants; outputs local times; the filter compares instants
    assert f"spark_tz_instant('{zone}', TIMESTAMP '2024-01-01')" in plan.sql
    assert f"spark_tz_day('{zone}', " in plan.sql
    assert f"CAST(spark_tz_local('{zone}', MAX(\"m\".\"ts\")) AS TIMESTAMP) AS \"mx\"" in plan.sql


def test_a_fall_back_groups_orders_and_deduplicates_instants_not_printed_times():
    plan = _translate_ts("SELECT DISTINCT DATE_TRUNC('HOUR', m.ts) AS h FROM $m ORDER BY h",
                         "America/New_York")
    assert "DISTINCT" not in plan.sql and "GROUP BY spark_tz_near(" in plan.sql
    assert "ORDER BY spark_tz_near(" in plan.sql
    plan = _translate_ts("SELECT DATE_TRUNC('HOUR', m.ts) AS h, COUNT(*) AS c FROM $m "
                         "GROUP BY 1 ORDER BY 1", "Europe/Berlin")
    assert "GROUP BY spark_tz_near(" in plan.sql and "ORDER BY spark_tz_near(" in plan.sql
    with pytest.raises(NotServable, match="SELECT DISTINCT of a timestamp with GROUP BY"):
        _translate_ts("SELECT DISTINCT MAX(m.ts) AS t FROM $m GROUP BY m.country",
                      "Europe/Berlin")


@pytest.mark.parametrize("zone", ["America/Sao_Paulo", "Africa/Casablanca", "Asia/Tokyo ",
                                  "america/new_york", "EST", "Mars/Olympus", None])
def test_timestamps_elsewhere_go_to_spark_but_only_when_used(zone):
    with pytest.raises(NotServable) as e:
        _translate_ts("SELECT MAX(m.ts) AS mx FROM $m", zone)
    assert ("neither a fixed UTC offset nor a named zone" if zone else
            "time zone is not known") in str(e.value)
    # a query that does not use the timestamp column is served, and does not read it
    plan = _translate_ts("SELECT m.country AS c, SUM(m.q) AS s FROM $m GROUP BY m.country", zone)
    assert '"ts"' not in plan.sql


@pytest.mark.parametrize("sql, reason", [
    ("SELECT m.country AS c FROM $m WHERE m.ts > '2024-13-01'", "not a 'YYYY-MM-DD"),
    ("SELECT m.country AS c FROM $m WHERE m.ts > m.country", "not a 'YYYY-MM-DD"),
    ("SELECT DATE_TRUNC('NANOSECOND', m.ts) AS t FROM $m", "date_trunc unit nanosecond"),
    ("SELECT TRUNC(m.d, 'DD') AS t FROM $m", "trunc unit dd"),
    ("SELECT NEXT_DAY(m.d, 'Mo.') AS t FROM $m", "not a literal day name"),
    ("SELECT DATE_ADD(m.d, m.q) AS t FROM $m", "date_add by a bigint"),
    ("SELECT m.ts - m.ts AS t FROM $m", "- of timestamp and timestamp"),
    ("SELECT m.ts + INTERVAL '1 2' DAY TO HOUR AS t FROM $m", "INTERVAL"),
    ("SELECT EXTRACT(HOUR FROM m.d) AS h FROM $m", "EXTRACT HOUR of date"),
    ("SELECT date_part('EPOCH', m.ts) AS h FROM $m", "EXTRACT field EPOCH"),
    ("SELECT months_between(m.ts, m.d, m.q > 1) AS h FROM $m", "roundOff that is not a literal"),
    ("SELECT CAST(m.ts AS BOOLEAN) AS t FROM $m", "CAST from timestamp to boolean"),
    ("SELECT HOUR(m.d) AS h FROM $m", "HOUR of date"),
])
def test_timestamp_refusals(sql, reason):
    with pytest.raises(NotServable) as e:
        _translate_ts(sql, "UTC")
    assert reason in str(e.value)


def test_the_docs_list_exactly_the_named_zones_served():
    from proxy.serving.timestamps import NAMED_ZONES
    text = (Path(__file__).parents[3] / "docs/serving.md").read_text()
    listed = text.split("Served zones: any fixed UTC offset, and these named zones (spelled as "
                        "here):")[1].split(". Their rules")[0]
    assert {z.strip() for z in listed.replace("\n", " ").split(",")} == set(NAMED_ZONES)


# --- date functions (proxy/serving/dates.py): Spark's result types ---------------------

@pytest.mark.parametrize("expr, typ", [
    ("DAYOFWEEK(m.d)", "int"), ("WEEKDAY(m.ts)", "int"), ("DAYOFYEAR(m.d)", "int"),
    ("WEEKOFYEAR(m.ts)", "int"), ("LAST_DAY(m.d)", "date"), ("TRUNC(m.ts, 'MM')", "date"),
    ("DATE_ADD(m.d, 1)", "date"), ("DATE_SUB(m.d, -1)", "date"), ("ADD_MONTHS(m.d, 2)", "date"),
    ("NEXT_DAY(m.d, 'TU')", "date"), ("MAKE_DATE(2024, 2, 29)", "date"),
    ("MONTHS_BETWEEN(m.ts, m.d)", "double"), ("EXTRACT(SECOND FROM m.ts)", "decimal(8,6)"),
    ("DATE_PART('dow', m.d)", "int"), ("m.ts + INTERVAL '1' DAY", "timestamp"),
    ("m.d + INTERVAL '1' DAY", "date"), ("m.d - INTERVAL 2 MONTHS", "date"),
    ("m.d + INTERVAL '3' HOUR", "timestamp"), ("DATE_TRUNC('MILLISECOND', m.ts)", "timestamp"),
    ("DATE_TRUNC('dd', m.d)", "timestamp"),
])
def test_date_functions_have_sparks_types(expr, typ):
    plan = _translate_ts(f"SELECT {expr} AS x FROM $m", "Europe/Berlin")
    assert plan.columns == (("x", typ),)


def test_an_unlisted_construct_is_named_once_with_why():
    with pytest.raises(NotServable) as e:
        _translate("SELECT initcap(m.country) AS u FROM $m")
    assert str(e.value) == "INITCAP(m.country) is outside what the local engine computes"
    with pytest.raises(NotServable) as e:
        _translate("SELECT m.country AS c FROM $m WHERE m.i = ANY (SELECT 1)")
    assert "is outside what the local engine computes" in str(e.value)
