"""Serving tier: string, conditional and numeric functions and distinct aggregates
(proxy/serving/values.py) over edge values, run by Spark and by the local engine from the
SAME SQL text, compared on names, Spark types and rows, value for value (the text of every
decimal, the sign of every zero, NaN as NaN).

The table servvalues.t is written by Spark as Parquet partitioned by dm_segment_id and read
the way the rewriter's output reads a datamap (segments 0 and 1; segment 2 must never be
read). Many expressions share one query, so the cases cost a few Spark jobs.

Each case says what must happen:
  rows      Spark answers, and the engine answers the same names, types and rows;
  error     Spark (ANSI on) raises, and the engine raises too (the query goes to Spark);
  fallback  the engine raises on some value where it would differ from Spark (a string
            outside what case mapping serves, a NaN floor): the query goes to Spark, whose
            answer (or error) the client gets;
  refused   translate() says NotServable: the query never reaches the engine.
"""
from __future__ import annotations

import math

import pytest
import sqlglot

from proxy.serving.translate import NotServable, translate
from tests.support.serving import (  # noqa: F401 - fixtures
    both_outcomes, engine, exact_bag, scale_problems, segmented_table, typed_frame,
)
from tests.support.spark_tier import fmt_rows

pytestmark = pytest.mark.spark

TABLE = "servvalues.t"
COLUMNS = {"k": "int", "s": "string", "t": "string", "i": "int", "ti": "tinyint",
           "b": "bigint", "d10": "decimal(10,2)", "d38": "decimal(38,10)",
           "n38": "decimal(38,0)", "dz": "decimal(38,38)", "dbl": "double", "dt": "date",
           "flag": "boolean", "p": "int"}
_N = None
_NINES = "9" * 38
# k, s, t, i, ti, b, d10, d38, n38, dz, dbl, dt, flag, p, segment
ROWS = [
    (1, "abc", "b", 0, 0, 0, "0.00", "0", "0", "0", "-0.0", "2026-01-01", "true", 1, "0"),
    (2, _N, _N, _N, _N, _N, _N, _N, _N, _N, _N, _N, _N, _N, "0"),
    (3, "", "", 2147483647, 127, 9223372036854775807, "99999999.99",
     "9999999999999999999999999999.9999999999", _NINES, "0." + _NINES, "1e308", "2024-02-29",
     "false", 0, "0"),
    (4, "Zebra zoo", "z", -2147483648, -128, -9223372036854775808, "-99999999.99",
     "-9999999999999999999999999999.9999999999", "-" + _NINES, "-0." + _NINES, "-Infinity",
     "1970-01-01", "true", -1, "0"),
    (5, "ß", "ß", -1, -1, -1, "1.25", "0.0000000005", "5", "0.5", "NaN", "2026-03-31", _N, -3,
     "1"),
    (6, "日本語", "日", 7, 7, 3, "-1.25", "2.5000000000", "-5", "-0.5", "0.0", "2026-12-31",
     "false", 2, "1"),
    (7, "😀é", "😀", 125, 125, 5, "2.50", "-2.5", "15", "0." + "0" * 37 + "1", "2.5",
     "2000-02-29", "true", -10, "1"),
    (8, "  a b  ", " ", 100, 1, 100, "-2.55", "2.675", "25", "0.125", "-2.5", "2026-06-30",
     "true", 5, "1"),
    (9, "x%_\\y", "\\", 2, 2, 2, "0.05", "-0.0000000015", "-15", "-0.125", "Infinity",
     "2026-09-15", "false", 100, "1"),
    (10, "İstanbul", "ı", 3, 3, 5, "0.01", "12345.6789012345", "-25", "0.45", "1e-5",
     "2026-10-01", "true", 3, "1"),
    (11, "A_b%c", "xy", -7, 4, -7, "-7.00", "7", "1", "-0.45", "0.1", "2026-04-01", "true", 4,
     "1"),
    (12, "e\u0301\t", "e", 5, 5, 5, "5.55", "-7.5", "-1", "0.05", "-0.0", "2026-05-05", "false",
     -2, "1"),
    # never visible: a read of segment 2 changes every count and sum
    (99, "hidden", "h", 999, 9, 999, "999.00", "999", "999", "0.9", "999.0", "1999-09-09",
     "true", 1, "2"),
]
READ = f"(SELECT {', '.join(COLUMNS)} FROM {TABLE} WHERE dm_segment_id IN ('0', '1')) AS m"
ROWS_, ERROR, FALLBACK, REFUSED = "rows", "error", "fallback", "refused"
CASE_SAFE_ROWS = "m.k NOT IN (5, 7, 10, 12)"        # no 'ß', 'İ', 'é', combining marks
NO_EXTREMES = "m.k NOT IN (3, 4)"

CASES = [
    # --- strings
    ("concat: NULL when any part is; numbers, dates, booleans as strings",
     "SELECT m.k AS k, concat(m.s, m.t) AS a, concat(m.s, '-', m.i) AS b, "
     "concat(m.s, m.d10) AS c, concat(m.t, m.dt) AS d, concat(m.s, m.flag) AS e, "
     "concat(m.s) AS f, concat(m.d38, m.n38, m.b) AS g, m.s || m.t || m.k AS h FROM {m}", ROWS_),
    ("concat_ws: NULLs skipped, a NULL separator is NULL",
     "SELECT m.k AS k, concat_ws('/', m.s, m.t, m.i) AS a, concat_ws(m.t, m.s, 'x') AS b, "
     "concat_ws(',', m.s) AS c, concat_ws('', m.t, m.dt, m.flag) AS d FROM {m}", ROWS_),
    ("substr: 1-based, 0, negative and out-of-range positions and lengths",
     "SELECT m.k AS k, substr(m.s, 1, 2) AS a, substr(m.s, 0, 2) AS b, substr(m.s, -2, 2) AS c, "
     "substr(m.s, -10, 3) AS d, substr(m.s, 3) AS e, substr(m.s, -1) AS f, "
     "substr(m.s, 2, -1) AS g, substring(m.s, m.p, 2) AS h, substring(m.s, 2, m.p) AS i2, "
     "substring(m.s, m.p) AS j, substr(m.s, 2147483647, 2147483647) AS l, "
     "substr(m.s, -2147483648, 2147483647) AS n, substring(m.s FROM 2 FOR 3) AS o, "
     "substr(m.s, 0) AS q, substr(m.s, 1, 0) AS r FROM {m}", ROWS_),
    ("length counts characters", "SELECT m.k AS k, length(m.s) AS a, char_length(m.t) AS b, "
     "length('') AS c FROM {m}", ROWS_),
    ("trim removes spaces only, or the characters given",
     "SELECT m.k AS k, trim(m.s) AS a, ltrim(m.s) AS b, rtrim(m.s) AS c, "
     "trim(BOTH 'a' FROM m.s) AS d, trim(LEADING m.t FROM m.s) AS e, "
     "trim(TRAILING 'c' FROM m.s) AS f, trim(BOTH '' FROM m.s) AS g, "
     "trim(BOTH ' a' FROM m.s) AS h, trim(TRAILING '\\t' FROM m.s) AS i2 FROM {m}", ROWS_),
    ("lpad and rpad: cut, empty pad, length 0 and below, unicode pads",
     "SELECT m.k AS k, lpad(m.s, 5, 'xy') AS a, rpad(m.s, 5, 'xy') AS b, lpad(m.s, 2) AS c, "
     "rpad(m.s, 0, 'x') AS d, lpad(m.s, -1, 'x') AS e, lpad(m.s, 4, '') AS f, "
     "rpad(m.s, m.p, m.t) AS g, lpad(m.s, 6, '😀') AS h, rpad(m.s, 3) AS i2 FROM {m}", ROWS_),
    ("replace: empty search, two arguments, unicode",
     "SELECT m.k AS k, replace(m.s, 'a', 'XY') AS a, replace(m.s, m.t, '-') AS b, "
     "replace(m.s, 'b') AS c, replace(m.s, '', 'x') AS d, replace(m.s, 'é', '') AS e FROM {m}",
     ROWS_),
    ("like: _ and %, escapes, unicode, NOT LIKE",
     "SELECT m.k AS k, m.s LIKE 'a%' AS a, m.s LIKE '%b%' AS b, m.s LIKE '_' AS c, "
     "m.s LIKE '__' AS d, m.s LIKE '%\\\\%%' AS e, m.s LIKE '%\\\\_%' AS f, "
     "m.s NOT LIKE 'Z%' AS g, m.s LIKE '' AS h, m.s LIKE '%' AS i2, "
     "m.s LIKE 'x!%%' ESCAPE '!' AS j, m.s LIKE '%\\\\\\\\%' AS l, m.s LIKE '_本%' AS n, "
     "m.s LIKE '%a_b%' AS o FROM {m}", ROWS_),
    ("like in WHERE", "SELECT m.k AS k FROM {m} WHERE m.s LIKE '%a%' OR m.t LIKE '_'", ROWS_),
    ("like with a pattern column", "SELECT m.k AS k FROM {m} WHERE m.s LIKE m.t", REFUSED),
    ("like with an escape Spark rejects", "SELECT m.k AS k FROM {m} WHERE m.s LIKE 'a\\\\b'",
     REFUSED),
    ("ilike", "SELECT m.k AS k FROM {m} WHERE m.s ILIKE 'a%'", REFUSED),
    ("upper and lower of ASCII and CJK", "SELECT m.k AS k, upper(m.s) AS a, lower(m.s) AS b, "
     "upper(m.t) AS c, lower(concat(m.s, 'XY')) AS d FROM {m} WHERE " + CASE_SAFE_ROWS, ROWS_),
    ("upper of 'ß' (ICU: 'SS') goes to Spark", "SELECT m.k AS k, upper(m.s) AS a FROM {m}",
     FALLBACK),
    ("lower of 'İ' goes to Spark", "SELECT m.k AS k, lower(m.s) AS a FROM {m} WHERE m.k = 10",
     FALLBACK),
    ("upper of an integer", "SELECT upper(m.i) AS a FROM {m}", REFUSED),
    ("cast boolean to string", "SELECT m.k AS k, CAST(m.flag AS STRING) AS a FROM {m}", ROWS_),
    ("cast double to string (Java's digits)", "SELECT CAST(m.dbl AS STRING) AS a FROM {m}",
     REFUSED),
    ("concat of a double", "SELECT concat(m.s, m.dbl) AS a FROM {m}", REFUSED),
    ("group by string functions", "SELECT substr(m.s, 1, 1) AS a, length(m.s) AS n, "
     "count(*) AS c FROM {m} GROUP BY substr(m.s, 1, 1), length(m.s)", ROWS_),
    # --- conditionals
    ("if", "SELECT m.k AS k, if(m.flag, m.s, 'no') AS a, if(m.i > 0, m.i, m.b) AS b, "
     "if(m.flag, m.d10, 0) AS c, if(m.flag, NULL, m.dt) AS d, if(m.i > 0, m.dbl, m.i) AS e, "
     "if(m.flag, m.ti, 1000) AS f, if(m.flag, m.b, 0.5) AS g FROM {m}", ROWS_),
    ("nvl, ifnull, nvl2", "SELECT m.k AS k, nvl(m.s, 'none') AS a, ifnull(m.i, m.b) AS b, "
     "nvl(m.d10, 0) AS c, nvl2(m.s, m.i, -1) AS d, nvl2(m.dbl, 'y', 'n') AS e, "
     "coalesce(m.d10, m.d38) AS f, nvl(m.dbl, 0) AS g FROM {m}", ROWS_),
    ("nullif", "SELECT m.k AS k, nullif(m.i, 0) AS a, nullif(m.s, '') AS b, "
     "nullif(m.dbl, 0) AS c, nullif(m.d10, 1.25) AS d, nullif(m.dt, '2026-01-01') AS e, "
     "nullif(m.i, m.b) AS f, nullif(m.dbl, m.dbl) AS g FROM {m}", ROWS_),
    ("greatest and least skip NULLs", "SELECT m.k AS k, greatest(m.i, m.ti, 5) AS a, "
     "least(m.i, m.b) AS b, greatest(m.d10, m.i) AS c, least(m.d10, 0.5) AS d, "
     "greatest(m.s, m.t) AS e, least(m.dt, m.dt) AS f, greatest(m.flag, false) AS i2, "
     "greatest(m.i, NULL) AS j, least(m.dz, 0.5) AS l FROM {m} WHERE m.k <> 3", ROWS_),
    ("greatest of doubles (-0.0 and 0.0)", "SELECT greatest(m.dbl, CAST(0 AS DOUBLE)) AS a "
     "FROM {m}", REFUSED),
    ("greatest over decimals of 38 digits", "SELECT greatest(m.dz, m.n38) AS a FROM {m}",
     REFUSED),
    ("greatest of a decimal and a double", "SELECT greatest(m.d10, m.dbl) AS a FROM {m}",
     REFUSED),
    ("case and coalesce widen integers and decimals", "SELECT m.k AS k, "
     "CASE WHEN m.flag THEN m.d10 ELSE 0 END AS a, CASE WHEN m.flag THEN m.b ELSE 0.5 END AS b, "
     "coalesce(m.d10, 0.00) AS c, coalesce(m.ti, m.d10) AS d, "
     "CASE WHEN m.flag THEN m.i WHEN m.k > 5 THEN m.dbl END AS e FROM {m}", ROWS_),
    ("is not distinct from", "SELECT m.k AS k, m.s <=> 'abc' AS a, m.dbl <=> m.dbl AS b, "
     "m.i IS NOT DISTINCT FROM m.b AS c, m.d10 <=> 1.25 AS d FROM {m}", ROWS_),
    # --- numbers
    ("abs", "SELECT m.k AS k, abs(m.i) AS a, abs(m.ti) AS b, abs(m.b) AS c, abs(m.d10) AS d, "
     "abs(m.d38) AS e, abs(m.dbl) AS f, abs(m.dz) AS g FROM {m} WHERE " + NO_EXTREMES, ROWS_),
    ("abs of the smallest int overflows", "SELECT abs(m.i) AS a FROM {m}", ERROR),
    ("floor and ceil types", "SELECT m.k AS k, floor(m.d10) AS a, ceil(m.d10) AS b, "
     "floor(m.d38) AS c, ceil(m.n38) AS d, floor(m.dz) AS e, ceil(m.dz) AS f, floor(m.i) AS g, "
     "ceil(m.b) AS h, floor(m.ti) AS i2 FROM {m}", ROWS_),
    ("floor and ceil of doubles", "SELECT m.k AS k, floor(m.dbl) AS a, ceil(m.dbl) AS b "
     "FROM {m} WHERE m.k NOT IN (3, 4, 5, 9)", ROWS_),
    ("floor of NaN and infinities goes to Spark", "SELECT floor(m.dbl) AS a FROM {m}",
     FALLBACK),
    ("round and bround of decimals", "SELECT m.k AS k, round(m.d10, 1) AS a, round(m.d10) AS b, "
     "round(m.d10, -1) AS c, bround(m.d10, 1) AS d, bround(m.d38, 2) AS e, round(m.d38, 9) AS f, "
     "round(m.dz, 37) AS g, round(m.dz, 0) AS h, bround(m.dz, 1) AS i2, round(m.d10, 5) AS j, "
     "bround(m.d38, -3) AS l, round(m.dz, 2) AS n, bround(m.dz, 2) AS o FROM {m}", ROWS_),
    ("round and bround of integers", "SELECT m.k AS k, round(m.i, 2) AS a, round(m.i, -1) AS b, "
     "bround(m.i, -1) AS c, round(m.b, -2) AS d, bround(m.ti) AS e, round(m.ti, -1) AS f "
     "FROM {m} WHERE m.k NOT IN (3, 4, 7)", ROWS_),
    ("round of tinyint 125 to tens overflows", "SELECT round(m.ti, -1) AS a FROM {m}", ERROR),
    ("round of 10^38-1 to tens overflows", "SELECT round(m.n38, -1) AS a FROM {m}", ERROR),
    ("round of a double", "SELECT round(m.dbl, 2) AS a FROM {m}", REFUSED),
    ("round to a column's places", "SELECT round(m.d10, m.i) AS a FROM {m}", REFUSED),
    # --- distinct aggregates
    ("count(DISTINCT): one column, several, doubles (-0.0, NaN)", "SELECT m.flag AS f, "
     "count(DISTINCT m.s) AS a, count(DISTINCT m.i) AS b, count(DISTINCT m.dbl) AS c, "
     "count(DISTINCT m.s, m.i) AS d, count(DISTINCT m.flag, m.dt) AS e, "
     "count(DISTINCT m.t, m.d10, m.dt) AS g FROM {m} GROUP BY m.flag", ROWS_),
    ("count(DISTINCT) over all rows and over none", "SELECT count(DISTINCT m.dbl) AS a, "
     "count(DISTINCT m.s, m.t) AS b, count(DISTINCT m.dt) AS c FROM {m}", ROWS_),
    ("count(DISTINCT) over no rows", "SELECT count(DISTINCT m.s) AS a, "
     "count(DISTINCT m.s, m.t) AS b FROM {m} WHERE m.k < 0", ROWS_),
    ("sum, min, max of DISTINCT", "SELECT m.flag AS f, sum(DISTINCT m.ti) AS a, "
     "sum(DISTINCT m.d10) AS b, min(DISTINCT m.s) AS c, max(DISTINCT m.d38) AS d, "
     "max(DISTINCT m.dbl) AS e FROM {m} WHERE " + NO_EXTREMES + " GROUP BY m.flag", ROWS_),
    ("distinct count with its NULL bucket (Power BI), HAVING on it", "SELECT m.flag AS f, "
     "count(DISTINCT m.s) + max(CASE WHEN m.s IS NULL THEN 1 ELSE 0 END) AS a, "
     "count(DISTINCT m.t) + CASE WHEN count(m.t) < count(*) THEN 1 ELSE 0 END AS b "
     "FROM {m} GROUP BY m.flag HAVING count(DISTINCT m.s) > 1", ROWS_),
    ("count(DISTINCT) of several columns with a double (-0.0, NaN)", "SELECT m.flag AS f, "
     "count(DISTINCT m.flag, m.dbl) AS a, count(DISTINCT m.dbl, m.ti) AS b FROM {m} "
     "GROUP BY m.flag", ROWS_),
    ("% of integers: the dividend's sign, the wider type, MIN_VALUE % -1",
     "SELECT m.k AS k, m.i % 3 AS a, m.p % -7 AS b, m.b % -1 AS c, m.ti % 5 AS d, "
     "m.i % -1 AS e, -(m.p - 1) % 3 AS f, m.b % m.i AS g FROM {m} WHERE m.i <> 0", ROWS_),
    ("* and alias.* over a derived table (Power BI's OTBL): its columns as named, in order",
     "SELECT * FROM (SELECT m.flag AS Flag, count(*) AS `N`, sum(m.d10) AS a0 FROM {m} "
     "GROUP BY m.flag) AS o WHERE NOT a0 IS NULL", ROWS_),
    ("alias.* beside another output", "SELECT o.*, o.k + 1 AS more FROM (SELECT m.k AS k, "
     "m.i AS n FROM {m}) AS o", ROWS_),
    ("pmod of integers: positive for a positive divisor, Spark's formula for a negative one",
     "SELECT m.k AS k, pmod(m.i, 3) AS a, pmod(m.p, -7) AS b, pmod(m.ti, 5) AS c, "
     "pmod(m.b, m.i) AS d FROM {m} WHERE m.i <> 0 AND " + NO_EXTREMES, ROWS_),
    ("pmod by zero", "SELECT pmod(m.i, m.ti) AS a FROM {m}", ERROR),
    ("CASE x WHEN: equality with Spark's coercion, a NULL x matches no branch",
     "SELECT m.k AS k, CASE m.s WHEN 'abc' THEN 1 WHEN '' THEN 2 ELSE 0 END AS a, "
     "CASE m.ti WHEN 0 THEN 'zero' WHEN 127 THEN 'max' END AS b, "
     "CASE m.d10 WHEN 1.25 THEN m.i END AS c FROM {m}", ROWS_),
    ("% by zero", "SELECT m.i % m.ti AS a FROM {m}", ERROR),
    ("aggregate FILTER: only the rows where the condition is TRUE (NULL and false left out)",
     "SELECT m.flag AS f, sum(m.d10) FILTER (WHERE m.i > 0) AS a, count(*) FILTER (WHERE "
     "m.dbl > 0) AS b, count(DISTINCT m.ti) FILTER (WHERE m.s IS NOT NULL) AS c, "
     "min(m.dt) FILTER (WHERE m.flag) AS d, max(m.s) FILTER (WHERE m.k > 100) AS e, "
     "count(m.b) FILTER (WHERE m.p < 0) AS g, sum(DISTINCT m.i) FILTER (WHERE m.i <> 0) AS h "
     "FROM {m} GROUP BY m.flag", ROWS_),
    ("a double compared with decimal literals: the literal as Spark's double (NaN is the "
     "largest, -0.0 = 0.0, infinities)",
     "SELECT m.k AS k, m.dbl > 0.1 AS a, m.dbl = -0.0 AS b, 2.5 <= m.dbl AS c, "
     "m.dbl < -2.50 AS d, m.dbl <> 0.000000000000001 AS e, m.dbl >= 99999999999999.9 AS f, "
     "CASE WHEN m.dbl BETWEEN -2.5 AND 2.5 THEN 1 END AS g FROM {m}", ROWS_),
    ("a double compared with a decimal column", "SELECT m.k AS k FROM {m} WHERE m.dbl > m.d10",
     REFUSED),
    ("% of a decimal", "SELECT m.d10 % 3 AS a FROM {m}", REFUSED),
    ("sum(DISTINCT) of a double", "SELECT sum(DISTINCT m.dbl) AS a FROM {m}", REFUSED),
    ("avg of integers, doubles (NaN, infinities) and decimals (38 digits), grouped; "
     "avg(DISTINCT) of integers and decimals",
     "SELECT m.flag AS f, avg(m.i) AS a, avg(m.ti) AS b, avg(m.b) AS c, avg(m.dbl) AS d, "
     "avg(m.d10) AS e, avg(m.dz) AS g, avg(DISTINCT m.p) AS h, avg(DISTINCT m.d10) AS i2 "
     "FROM {m} GROUP BY m.flag", ROWS_),
    ("avg of decimal(38,0) whose result overflows decimal(38,4) raises in both",
     "SELECT avg(m.n38) AS a FROM {m} WHERE m.k = 3", ERROR),
    ("avg over no rows is NULL", "SELECT avg(m.i) AS a, avg(m.d38) AS b, avg(DISTINCT m.b) "
     "AS c FROM {m} WHERE m.k > 100", ROWS_),
    ("avg of decimals rounding HALF_UP at scale s+4 (a quotient past the sum's scale)",
     "SELECT avg(m.d10) AS a, avg(m.d38) AS b, avg(m.dz) AS c FROM {m} WHERE m.k IN (5, 6, 7)",
     ROWS_),
    ("avg(DISTINCT) of a double", "SELECT avg(DISTINCT m.dbl) AS a FROM {m}", REFUSED),
]


@pytest.fixture(scope="module")
def served_table():
    """(spark, {segment id: parquet files}) with servvalues.t written by Spark."""
    with segmented_table(typed_frame(COLUMNS, ROWS), "servvalues") as out:
        yield out


def test_rows_are_as_written(served_table):
    """The edge values reach the files: 38 nines, scale 38, NaN, -0.0, unicode."""
    spark, _ = served_table
    got = {r[0]: r for r in spark.sql(f"SELECT k, n38, dz, dbl, s FROM {TABLE}").collect()}
    assert str(got[3][1]) == "9" * 38 and str(got[3][2]) == "0." + "9" * 38
    assert math.isnan(got[5][3]) and math.copysign(1, got[1][3]) == -1 and got[7][4] == "😀é"


@pytest.mark.parametrize("title,template,expect", CASES, ids=[c[0] for c in CASES])
def test_served_like_spark(title, template, expect, served_table, engine):
    spark, files = served_table
    sql = template.format(m=READ)
    tree = sqlglot.parse_one(sql, read="spark")
    try:
        plan = translate(tree, {TABLE: COLUMNS},
                         lambda table, ids: [f for sid in ids for f in files[sid]])
    except NotServable as e:
        assert expect == REFUSED, f"not servable: {e}"
        return
    assert expect != REFUSED, f"served, but the case says refused: {plan.sql}"
    o = both_outcomes(spark, engine, sql, plan)
    sschema, srows, spark_error = o.spark_schema, o.spark_rows, o.spark_error
    rows, engine_error = o.rows, o.engine_error
    if expect in (ERROR, FALLBACK):
        if expect == ERROR:
            assert spark_error is not None, f"the case expects Spark to raise; it answered {srows}"
        assert engine_error is not None, (
            f"the engine answered {rows} where it must raise (Spark: "
            f"{spark_error or fmt_rows(srows)})\n  duckdb: {plan.sql}")
        return
    assert spark_error is None, f"Spark raised: {spark_error}"
    assert engine_error is None, (f"the engine failed ({engine_error}) where Spark answered "
                                  f"{fmt_rows(srows)}\n  duckdb: {plan.sql}")
    assert list(plan.columns) == [tuple(c) for c in sschema], \
        f"schema: Spark {sschema} vs served {list(plan.columns)}"
    problems = scale_problems(plan.columns, rows)
    assert not problems, "\n".join(problems)
    want, got = exact_bag(srows), exact_bag(rows)
    if want != got:
        diff = [f"  spark {a}\n  local {b}" for a, b in zip(want, got) if a != b][:4]
        pytest.fail(f"rows differ ({len(want)} vs {len(got)}):\n" + "\n".join(diff)
                    + f"\n  duckdb: {plan.sql}")
