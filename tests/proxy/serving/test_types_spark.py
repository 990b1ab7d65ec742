"""Serving tier, type by type: every function and operator of the allow-list
(proxy.serving.translate.ALLOWED) over edge values, run by Spark and by the local engine
from the SAME SQL text, compared on names, Spark types and rows.

The table servtypes.t really exists in Spark, partitioned by dm_segment_id and written as
Parquet by Spark; each query reads it the way the rewriter's output does,
`(SELECT ... FROM servtypes.t WHERE dm_segment_id IN ('0', '1')) AS m`, so Spark runs the
statement as is and translate() turns it into DuckDB SQL over the files of segments 0 and
1 (segment 2 holds rows that must never be read).

Each case says what must happen:
  rows     Spark answers, and the engine answers the same names, types and rows;
  error    Spark (ANSI on, Spark 4's default) raises -- a zero divisor, an overflow -- and
           the engine raises EngineFailure, so the query goes to Spark, which raises as it
           always did (with ANSI off Spark answers NULL there: still Spark's answer);
  refused  translate() says NotServable: the query never reaches the engine.
"""
from __future__ import annotations


import pytest
import sqlglot

from proxy.serving.engine import EngineFailure
from proxy.serving.translate import NotServable, translate
from tests.support.serving import (  # noqa: F401 - engine: a fixture
    both_outcomes, engine, scale_problems, segmented_table, typed_frame, zero_sign_problems,
)
from tests.support.spark_tier import diff_rows, fmt_rows

pytestmark = pytest.mark.spark

TABLE = "servtypes.t"
COLUMNS = {"k": "int", "ti": "tinyint", "si": "smallint", "i": "int", "b": "bigint",
           "d38": "decimal(38,10)", "d10": "decimal(10,2)", "dbl": "double", "dt": "date",
           "s": "string", "flag": "boolean", "n1": "decimal(38,0)", "n2": "decimal(38,0)"}
_N = None
# n1 / n2 (decimal(38,6)) sits just under a rounding boundary: Spark rounds the exact
# quotient once; rounding first at scale 38 crosses the boundary
_NEAR = {1: ("1000000000000000000000000000000", "2000000000000000000000000000000000001"),
         5: ("89999954999999999999999999999999999999", "89999999999999999999999999999999999999"),
         6: ("-89999954999999999999999999999999999999", "89999999999999999999999999999999999999"),
         7: ("7", "3"), 8: ("-2", "3")}
# k, ti, si, i, b, d38, d10, dbl, dt, s, flag, segment (n1, n2 from _NEAR)
ROWS = [
    (1, 0, 0, 0, 0, "0", "0.00", "-0.0", "2026-01-01", "", "true", "0"),
    (2, _N, _N, _N, _N, _N, _N, _N, _N, _N, _N, "0"),
    (3, 127, 32767, 2147483647, 9223372036854775807,
     "999999999999999999999999999.9999999999", "99999999.99", "1e308", "2024-02-29", "zebra",
     "false", "0"),
    (4, -128, -32768, -2147483648, -9223372036854775808,
     "-1234567890123456789.0123456789", "-0.05", "-1.5", "1970-01-01", "Zebra", "true", "0"),
    (5, -1, -1, -1, -1, "0.0000000005", "1.25", "0.0", "2026-03-31", "é", _N, "1"),
    (6, 7, 7, 7, 3, "1.0000000001", "-1.25", "0.1", "2026-12-31", "ä", "false", "1"),
    (7, 7, 3, 7, 3, "2.5", "2.50", "NaN", "2026-04-01", "a", "true", "1"),
    (8, 1, 100, 100, 100, "-0.0000000015", "0.01", "2.5", "2000-02-29", "日本", "true", "1"),
    (9, 2, 2, 2, 2, "12345.6789012345", "-99999999.99", "-1e-300", "2026-06-30", " a", "false",
     "1"),
    (10, 3, 3, 3, 5, "-2.5", "0.05", "3.0", "2026-09-15", "😀", "true", "1"),
    (11, 4, 4, -7, -7, "7", "-7.00", "-2.5", "2026-10-01", "A", "true", "1"),
    # never visible: a read of segment 2 changes every count and sum
    (99, 9, 9, 999, 999, "999", "999.00", "999.0", "1999-09-09", "hidden", "true", "2"),
]
READ = (f"(SELECT {', '.join(COLUMNS)} FROM {TABLE} WHERE dm_segment_id IN ('0', '1')) AS m")

ROWS_, ERROR, REFUSED = "rows", "error", "refused"
OVERFLOW_FREE = "m.k NOT IN (3, 4)"      # rows without max/min values

CASES = [
    # --- aggregates
    ("sum of every numeric type", "SELECT sum(m.ti) AS a, sum(m.si) AS b, sum(m.i) AS c, "
     "sum(m.d38) AS d, sum(m.d10) AS e, sum(m.dbl) AS f FROM {m}", ROWS_),
    ("sum of bigint overflows", "SELECT sum(m.b) AS a FROM {m} WHERE m.k <> 4", ERROR),
    ("sum of bigint", "SELECT sum(m.b) AS a FROM {m} WHERE " + OVERFLOW_FREE, ROWS_),
    ("sum of double without NaN", "SELECT sum(m.dbl) AS a FROM {m} WHERE m.k NOT IN (3, 7)",
     ROWS_),
    ("count", "SELECT count(*) AS a, count(m.i) AS b, count(m.s) AS c, count(m.dt) AS d, "
     "count(m.dbl) AS e, count(m.flag) AS f FROM {m}", ROWS_),
    ("min max", "SELECT min(m.ti) AS a, max(m.si) AS b, min(m.i) AS c, max(m.b) AS d, "
     "min(m.d38) AS e, max(m.d38) AS f, min(m.d10) AS g, max(m.dt) AS h, min(m.dt) AS i2, "
     "min(m.s) AS j, max(m.s) AS l, min(m.flag) AS n, max(m.flag) AS o FROM {m}", ROWS_),
    ("sum min max of -0.0", "SELECT sum(m.dbl) AS a, min(m.dbl) AS b, max(m.dbl) AS c, "
     "m.k AS d FROM {m} WHERE m.k = 1 GROUP BY m.k", ROWS_),
    ("sum min max of -0.0 and 0.0", "SELECT sum(m.dbl) AS a, min(m.dbl) AS b, max(m.dbl) AS c "
     "FROM {m} WHERE m.k IN (1, 5)", ROWS_),
    ("min max double with NaN", "SELECT min(m.dbl) AS a, max(m.dbl) AS b FROM {m}", ROWS_),
    ("group by string", "SELECT m.s AS s, count(*) AS n, sum(m.d10) AS t FROM {m} "
     "GROUP BY m.s", ROWS_),
    ("group by double (-0.0, 0.0, NaN)", "SELECT m.dbl AS x, count(*) AS n FROM {m} "
     "GROUP BY m.dbl", ROWS_),
    ("group by a double ordinal", "SELECT m.dbl AS x, count(*) AS n FROM {m} GROUP BY 1",
     ROWS_),
    ("group by a double: aggregates of the key, HAVING, ORDER BY", "SELECT m.dbl AS x, "
     "min(m.dbl) AS a, max(m.dbl) AS b, count(*) AS n FROM {m} WHERE m.k IN (1, 5, 6, 7) "
     "GROUP BY m.dbl HAVING m.dbl > -1 OR m.dbl IS NULL ORDER BY x", ROWS_),
    ("an expression over a double key", "SELECT -m.dbl AS x FROM {m} GROUP BY m.dbl",
     REFUSED),
    ("group by boolean and date", "SELECT m.flag AS f, year(m.dt) AS y, count(*) AS n "
     "FROM {m} GROUP BY m.flag, year(m.dt)", ROWS_),
    ("having", "SELECT m.flag AS f, sum(m.i) AS t FROM {m} GROUP BY m.flag "
     "HAVING count(*) > 2", ROWS_),
    ("distinct", "SELECT DISTINCT m.flag AS f, m.ti AS t FROM {m}", ROWS_),
    ("distinct double", "SELECT DISTINCT m.dbl AS x, m.flag AS f FROM {m}", ROWS_),
    ("distinct double with group by", "SELECT DISTINCT m.dbl AS x FROM {m} GROUP BY m.dbl",
     REFUSED),
    # --- + - *
    ("integral arithmetic", "SELECT m.ti + m.ti AS a, m.si - m.ti AS b, m.i * m.si AS c, "
     "m.b + m.i AS d, m.i + 1 AS e, m.b * 2 AS f, -m.i AS g, m.ti * 1 AS h "
     "FROM {m} WHERE " + OVERFLOW_FREE, ROWS_),
    ("tinyint + tinyint overflows", "SELECT m.ti + m.ti AS a FROM {m}", ERROR),
    ("int + int overflows", "SELECT m.i + m.i AS a FROM {m}", ERROR),
    ("bigint * int overflows", "SELECT m.b * 2 AS a FROM {m}", ERROR),
    ("minus min int overflows", "SELECT -m.i AS a FROM {m}", ERROR),
    ("decimal arithmetic", "SELECT m.d10 + m.d10 AS a, m.d10 - m.i AS b, m.d10 * m.d10 AS c, "
     "m.d10 * 3 AS d, m.d10 + 1.5 AS e, -m.d10 AS f, m.d10 * m.ti AS g, m.b - m.d10 AS h, "
     "-CAST(m.d38 AS DECIMAL(34,10)) AS j FROM {m} WHERE " + OVERFLOW_FREE, ROWS_),
    ("decimal arithmetic at the edges", "SELECT m.d10 + m.d10 AS a, m.d10 * m.d10 AS c, "
     "m.d10 * m.d10 * m.d10 AS e FROM {m}", ROWS_),
    ("minus of a decimal wider than 34 digits", "SELECT -m.d38 AS a FROM {m}", REFUSED),
    ("decimal(38,10) + int over 38 digits", "SELECT m.d38 + 1 AS a FROM {m}", REFUSED),
    ("decimal + decimal over 38 digits", "SELECT m.d10 + m.d38 AS a FROM {m}", REFUSED),
    ("decimal * decimal over 38 digits", "SELECT m.d38 * m.d10 AS a FROM {m}", REFUSED),
    ("double arithmetic", "SELECT m.dbl + m.dbl AS a, m.dbl * m.i AS b, m.dbl - 1 AS c, "
     "-m.dbl AS d FROM {m}", ROWS_),
    ("double + decimal", "SELECT m.dbl + m.d10 AS a FROM {m}", REFUSED),
    # --- /
    ("integral division is double", "SELECT m.i / m.b AS a, m.ti / 4 AS b, m.k / m.k AS c "
     "FROM {m} WHERE m.b <> 0", ROWS_),
    ("integral division by zero", "SELECT m.i / m.i AS a FROM {m}", ERROR),
    ("NULL divided by zero is NULL", "SELECT m.i / 0 AS a FROM {m} WHERE m.i IS NULL", ROWS_),
    ("double division", "SELECT m.dbl / m.k AS a, m.k / m.dbl AS b FROM {m} "
     "WHERE m.dbl <> 0", ROWS_),
    ("double division by zero", "SELECT m.k / m.dbl AS a FROM {m}", ERROR),
    ("decimal division", "SELECT m.d10 / m.d10 AS a, m.d10 / 3 AS b, m.i / 2.5 AS c, "
     "m.d10 / m.k AS d, m.d38 / 7 AS e, m.k / m.d10 AS f FROM {m} WHERE m.d10 <> 0", ROWS_),
    ("decimal division by a negative literal", "SELECT m.d10 / -3 AS a, m.d10 * -3 AS b "
     "FROM {m}", ROWS_),
    ("decimal division by zero", "SELECT m.d10 / m.d10 AS a FROM {m}", ERROR),
    ("decimal division that overflows", "SELECT m.d38 / CAST(0.0000000001 AS DECIMAL(38,10)) "
     "AS a FROM {m}", ERROR),
    ("decimal division at decimal(38,6)", "SELECT m.d38 / m.d38 AS a FROM {m} "
     "WHERE m.d38 <> 0", ROWS_),
    ("decimal division HALF_UP", "SELECT m.d10 / 8 AS a, m.d38 / 3 AS b, "
     "m.d38 / m.d10 AS c FROM {m} WHERE m.d10 <> 0 AND m.k <> 3", ROWS_),
    ("decimal division rounds at scale 38, then HALF_UP to the result scale",
     "SELECT CAST(1000000000000000000000000000000.0 AS DECIMAL(38,0)) / "
     "CAST(2000000000000000000000000000000000001.0 AS DECIMAL(38,0)) AS a, "
     "CAST(-1000000000000000000000000000000.0 AS DECIMAL(38,0)) / "
     "CAST(2000000000000000000000000000000000001.0 AS DECIMAL(38,0)) AS b, m.k AS k "
     "FROM {m}", ROWS_),
    ("decimal division rounds the exact quotient once", "SELECT m.k AS k, m.n1 / m.n2 AS q "
     "FROM {m}", ROWS_),
    ("avg-style decimal(10,2)", "SELECT m.flag AS f, CAST(CAST(sum(m.d10) AS DECIMAL(20,2)) / "
     "CAST(count(m.d10) AS DECIMAL(20,0)) AS DECIMAL(14,6)) AS a FROM {m} GROUP BY m.flag "
     "HAVING count(m.d10) > 0", ROWS_),
    ("avg-style decimal(38,10)", "SELECT m.flag AS f, CAST(sum(m.d38) AS DECIMAL(38,10)) / "
     "CAST(count(*) AS DECIMAL(20,0)) AS a FROM {m} GROUP BY m.flag", ROWS_),
    ("avg-style over a group of NULLs is NULL / 0, NULL", "SELECT m.k AS k, "
     "CAST(CAST(sum(m.d10) AS DECIMAL(20,2)) / CAST(count(m.d10) AS DECIMAL(20,0)) "
     "AS DECIMAL(14,6)) AS a FROM {m} GROUP BY m.k", ROWS_),
    ("decimal / a zero count", "SELECT m.k AS k, CAST(sum(m.k) AS DECIMAL(20,2)) / "
     "CAST(count(m.d10) AS DECIMAL(20,0)) AS a FROM {m} GROUP BY m.k", ERROR),
    ("avg-style integral", "SELECT m.flag AS f, sum(m.i) / count(m.i) AS a FROM {m} "
     "GROUP BY m.flag HAVING count(m.i) > 0", ROWS_),
    # --- CAST
    ("cast decimal to integral truncates", "SELECT CAST(m.d10 AS INT) AS a, "
     "CAST(m.d10 AS BIGINT) AS b, CAST(m.d38 AS BIGINT) AS c, CAST(m.d10 AS SMALLINT) AS d "
     "FROM {m} WHERE m.k NOT IN (3, 4, 9)", ROWS_),
    ("cast decimal to int overflows", "SELECT CAST(m.d38 AS INT) AS a FROM {m}", ERROR),
    ("cast int to tinyint overflows", "SELECT CAST(m.i AS TINYINT) AS a FROM {m}", ERROR),
    ("cast integral widening and narrowing", "SELECT CAST(m.ti AS BIGINT) AS a, "
     "CAST(m.b AS INT) AS b, CAST(m.i AS SMALLINT) AS c, CAST(m.i AS DECIMAL(12,2)) AS d, "
     "CAST(m.ti AS DECIMAL(3,0)) AS e FROM {m} WHERE " + OVERFLOW_FREE, ROWS_),
    ("cast decimal rounding HALF_UP", "SELECT CAST(m.d10 AS DECIMAL(10,1)) AS a, "
     "CAST(m.d38 AS DECIMAL(38,2)) AS b, CAST(m.d38 AS DECIMAL(20,9)) AS c, "
     "CAST(m.d10 AS DECIMAL) AS d FROM {m} WHERE m.k NOT IN (3, 4)", ROWS_),
    ("cast decimal narrowing overflows", "SELECT CAST(m.d38 AS DECIMAL(20,2)) AS a FROM {m}",
     ERROR),
    ("cast to double", "SELECT CAST(m.i AS DOUBLE) AS a, CAST(m.b AS DOUBLE) AS b FROM {m}",
     ROWS_),
    ("cast to string", "SELECT CAST(m.i AS STRING) AS a, CAST(m.b AS STRING) AS b, "
     "CAST(m.d10 AS STRING) AS c, CAST(m.d38 AS STRING) AS d, CAST(m.dt AS STRING) AS e, "
     "CAST(m.s AS STRING) AS f, CAST(m.ti AS STRING) AS g FROM {m}", ROWS_),
    ("cast double to int", "SELECT CAST(m.dbl AS INT) AS a FROM {m}", REFUSED),
    # --- CASE, COALESCE
    ("case", "SELECT CASE WHEN m.i > 0 THEN m.s WHEN m.i < 0 THEN 'neg' END AS a, "
     "CASE WHEN m.flag THEN m.d10 ELSE -m.d10 END AS b, "
     "CASE WHEN m.s IS NULL THEN NULL ELSE m.k END AS c FROM {m}", ROWS_),
    ("case of int and bigint widens", "SELECT CASE WHEN m.flag THEN m.i ELSE m.b END AS a, "
     "coalesce(m.ti, m.b) AS c FROM {m}", ROWS_),
    ("case of mixed types", "SELECT CASE WHEN m.flag THEN m.i ELSE m.s END AS a FROM {m}",
     REFUSED),
    ("coalesce", "SELECT coalesce(m.s, 'none') AS a, coalesce(m.d10, -m.d10) AS b, "
     "coalesce(m.dt, m.dt) AS c, coalesce(m.i, m.k) AS d FROM {m}", ROWS_),
    # --- dates
    ("date parts", "SELECT year(m.dt) AS y, quarter(m.dt) AS q, month(m.dt) AS mo, "
     "day(m.dt) AS d, dayofmonth(m.dt) AS dm FROM {m}", ROWS_),
    ("date parts grouped", "SELECT year(m.dt) AS y, month(m.dt) AS mo, count(*) AS n "
     "FROM {m} GROUP BY year(m.dt), month(m.dt)", ROWS_),
    # --- predicates
    ("in", "SELECT m.k AS k FROM {m} WHERE m.i IN (0, 7, -1) OR m.s IN ('', 'a') "
     "OR m.d10 IN (1.25, -0.05) OR m.dt IN ('2024-02-29')", ROWS_),
    ("not in with NULLs", "SELECT m.k AS k FROM {m} WHERE NOT m.i IN (0, 7)", ROWS_),
    ("between", "SELECT m.k AS k FROM {m} WHERE m.i BETWEEN -1 AND 7 "
     "OR m.dt BETWEEN '2026-01-01' AND '2026-03-31' OR m.s BETWEEN 'a' AND 'z' "
     "OR m.d38 BETWEEN -3 AND 0.5", ROWS_),
    ("comparisons", "SELECT m.k AS k, m.d10 > 1 AS a, m.dbl < 0 AS b, m.i = m.b AS c, "
     "m.i <> 7 AS d, m.s >= 'Z' AS e, m.dt <= '2000-02-29' AS f, m.b > m.d38 AS g, "
     "m.i > m.dbl AS h, m.flag = true AS i2, m.dbl = m.dbl AS j, m.ti < m.si AS l FROM {m}",
     ROWS_),
    ("comparisons across widths", "SELECT m.k AS k, m.ti = 1000 AS a, m.d10 > 3000000000 AS b, "
     "m.d10 = 1.251 AS c, m.d10 < 1.251 AS d, m.i BETWEEN 1.5 AND 3000000000 AS e, "
     "m.d10 IN (123456789012.5, 1.25) AS f, m.si > -40000 AS g, m.b = 9223372036854775807 AS h, "
     "m.d38 > m.b AS i2, m.d38 < 99999999999999999999999999.5 AS j FROM {m}", ROWS_),
    ("comparison of decimals over 38 digits", "SELECT m.k AS k FROM {m} "
     "WHERE m.d38 > 99999999999999999999999999999.5", REFUSED),
    ("in over 38 digits", "SELECT m.k AS k FROM {m} "
     "WHERE m.d10 IN (1234567890123456789012345.0, 0.0000000000000000000000000001)", REFUSED),
    ("boolean logic with NULLs", "SELECT m.k AS k, (m.i > 0 AND m.flag) AS a, "
     "(m.i > 0 OR m.flag) AS b, NOT m.flag AS c, m.s IS NULL AS d, m.s IS NOT NULL AS e "
     "FROM {m}", ROWS_),
    # --- ORDER BY, LIMIT
    ("order by int asc: NULLs first", "SELECT m.k AS k, m.i AS i FROM {m} ORDER BY m.i, m.k",
     ROWS_),
    ("order by int desc: NULLs last", "SELECT m.k AS k, m.i AS i FROM {m} "
     "ORDER BY i DESC, k", ROWS_),
    ("order by explicit NULLS", "SELECT m.k AS k, m.d10 AS d FROM {m} "
     "ORDER BY d DESC NULLS FIRST, k ASC NULLS LAST", ROWS_),
    ("order by string (unicode, case, empty)", "SELECT m.s AS s, m.k AS k FROM {m} "
     "ORDER BY s, k", ROWS_),
    ("order by string desc", "SELECT m.s AS s FROM {m} ORDER BY 1 DESC", ROWS_),
    ("order by double (NaN, -0.0)", "SELECT m.dbl AS x, m.k AS k FROM {m} ORDER BY x, k",
     ROWS_),
    ("order by date and decimal", "SELECT m.dt AS dt, m.d38 AS d FROM {m} "
     "ORDER BY dt DESC, d", ROWS_),
    ("order by an aggregate, limit", "SELECT m.flag AS f, sum(m.d10) AS t FROM {m} "
     "GROUP BY m.flag ORDER BY t DESC LIMIT 2", ROWS_),
    ("limit", "SELECT m.k AS k FROM {m} ORDER BY k LIMIT 3", ROWS_),
    ("limit 0", "SELECT m.k AS k FROM {m} LIMIT 0", ROWS_),
    ("order by boolean, NaN first when descending", "SELECT m.flag AS f, m.dbl AS x, m.k AS k "
     "FROM {m} ORDER BY f DESC, x DESC, k", ROWS_),
    ("distinct with order by", "SELECT DISTINCT m.flag AS f FROM {m} ORDER BY f", ROWS_),
    ("limit over int", "SELECT m.k AS k FROM {m} ORDER BY k LIMIT 3000000000", REFUSED),
    # --- no rows, ordinals, doubles beyond range
    ("aggregates over no rows", "SELECT count(*) AS n, count(m.i) AS c, sum(m.i) AS s, "
     "sum(m.d10) AS d, min(m.s) AS mi, max(m.dt) AS ma FROM {m} WHERE m.k < 0", ROWS_),
    ("group by over no rows", "SELECT m.s AS s, count(*) AS n FROM {m} WHERE m.k < 0 "
     "GROUP BY m.s", ROWS_),
    ("group by and order by ordinals", "SELECT m.flag AS f, year(m.dt) AS y, count(*) AS n "
     "FROM {m} GROUP BY 1, 2 ORDER BY 1, 2", ROWS_),
    ("double arithmetic beyond its range is infinite", "SELECT m.dbl * 10 AS a, "
     "m.dbl + m.dbl AS b, m.dbl * m.dbl AS c, -m.dbl * 10 AS d, m.dbl / m.k AS e FROM {m}",
     ROWS_),
    ("sum of doubles beyond their range", "SELECT sum(m.dbl) + sum(m.dbl) AS a, "
     "sum(m.dbl * 10) AS b FROM {m} WHERE m.k <> 7", ROWS_),
    # --- literals and shapes
    ("literals", "SELECT 2147483647 AS a, 2147483648 AS b, 1.50 AS c, 0.05 AS d, "
     "'x' AS e, true AS f, m.k AS k FROM {m}", ROWS_),
    ("negative literals", "SELECT -2147483648 AS a, -1.5 AS b, -7 AS c, "
     "-2147483649 AS d, - 3 AS e, -(3) AS f, m.k AS k FROM {m}", ROWS_),
    ("negative literals in arithmetic", "SELECT m.i + -2147483648 AS a, m.d10 * -(3) AS b, "
     "m.d10 - -1 AS c FROM {m} WHERE m.i > 0", ROWS_),
    ("coalesce over mixed decimal types", "SELECT coalesce(m.d10, 0.00) AS a, "
     "coalesce(m.d38, m.d10) AS b, coalesce(m.ti, m.d10) AS c FROM {m}", ROWS_),
    ("coalesce over decimals beyond 38 digits", "SELECT coalesce(m.d38, 0.000000000001) AS a "
     "FROM {m}", REFUSED),
    ("derived table", "SELECT x.a AS a, count(*) AS n FROM (SELECT m.i + 1 AS a FROM {m} "
     "WHERE m.k NOT IN (3)) AS x WHERE x.a > 0 GROUP BY x.a", ROWS_),
]


@pytest.fixture(scope="module")
def served_table():
    """(spark, {segment id: parquet files}) with servtypes.t written by Spark."""
    rows = [r[:-1] + _NEAR.get(r[0], (_N, _N)) + r[-1:] for r in ROWS]
    with segmented_table(typed_frame(COLUMNS, rows), "servtypes") as out:
        yield out


def test_ansi_is_on(served_table):
    """The ERROR cases assume Spark 4's default; the serving tier assumes it too."""
    spark, _ = served_table
    assert spark.conf.get("spark.sql.ansi.enabled").lower() == "true"


@pytest.mark.parametrize("title,template,expect", CASES, ids=[c[0] for c in CASES])
def test_served_like_spark(title, template, expect, served_table, engine):
    spark, files = served_table
    sql = template.format(m=READ)
    tree = sqlglot.parse_one(sql, read="spark")
    read_ids: list = []

    def files_of(table, ids):
        assert table == TABLE
        read_ids.extend(ids)
        return [f for sid in ids for f in files[sid]]
    try:
        plan = translate(tree, {TABLE: COLUMNS}, files_of)
    except NotServable as e:
        assert expect == REFUSED, f"not servable: {e}"
        return
    assert expect != REFUSED, f"served, but the case says refused: {plan.sql}"
    assert set(read_ids) == {"0", "1"}

    o = both_outcomes(spark, engine, sql, plan)
    sschema, srows, spark_error = o.spark_schema, o.spark_rows, o.spark_error
    rows, engine_error = o.rows, o.engine_error

    if expect == ERROR:
        assert spark_error is not None, f"the case expects Spark to raise; it answered {srows}"
        # a runtime arithmetic error, not a query Spark rejects
        assert spark_error.startswith(("ArithmeticException", "NumberFormatException")), spark_error
        assert engine_error is not None, (
            f"Spark raised ({spark_error}) but the engine answered {rows}: a served answer "
            f"where the client must get an error\n  duckdb: {plan.sql}")
        return
    assert spark_error is None, f"Spark raised: {spark_error}"
    assert engine_error is None, (f"the engine failed ({engine_error}) where Spark answered "
                                  f"{fmt_rows(srows)}\n  duckdb: {plan.sql}")
    problems = []
    if list(plan.columns) != [tuple(c) for c in sschema]:
        problems.append(f"schema: Spark {sschema} vs served {list(plan.columns)}")
    problems += scale_problems(plan.columns, rows)
    problems += diff_rows(tree, [n for n, _ in sschema], srows, rows)
    if not problems:
        problems += zero_sign_problems(plan.columns, srows, rows)
    assert not problems, "\n".join(problems) + (f"\n  spark:  {fmt_rows(srows, 20)}"
                                                f"\n  served: {fmt_rows(rows, 20)}"
                                                f"\n  duckdb: {plan.sql}")


ERROR_CASES = [c for c in CASES if c[2] == ERROR]


@pytest.mark.parametrize("title,template,expect", ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_error_cases_without_ansi_are_still_spark_answers(title, template, expect, served_table,
                                                          engine):
    """With ANSI off Spark answers the ERROR cases (NULL for a zero divisor or a decimal
    overflow, wrapped integers); the engine still raises, so Spark's answer is the one the
    client gets in either mode (sessions that change ANSI are not served at all)."""
    spark, files = served_table
    sql = template.format(m=READ)
    plan = translate(sqlglot.parse_one(sql, read="spark"), {TABLE: COLUMNS},
                     lambda table, ids: [f for sid in ids for f in files[sid]])
    with pytest.raises(EngineFailure):
        engine.run_blocking(plan)
    spark.conf.set("spark.sql.ansi.enabled", "false")
    try:
        rows = spark.sql(sql).collect()
    finally:
        spark.conf.unset("spark.sql.ansi.enabled")
    assert rows


# ORDER BY expressions over names that are both an output and an input column: Spark takes
# the output. Every order here is total, so the whole sequence must be equal.
ORDER_CASES = [
    "SELECT m.k AS i, m.i AS k FROM {m} ORDER BY -i",
    "SELECT m.k AS i, m.i AS k FROM {m} ORDER BY i + 0 DESC",
    "SELECT m.k AS i FROM {m} ORDER BY -i",
    "SELECT m.k AS i, count(*) AS n FROM {m} GROUP BY m.k ORDER BY -i",
    "SELECT m.k AS k, sum(m.i) AS i FROM {m} GROUP BY m.k ORDER BY -i, k",
    "SELECT m.k AS k, m.d10 AS i FROM {m} ORDER BY -i, -k",
]


@pytest.mark.parametrize("template", ORDER_CASES)
def test_order_by_expressions_name_outputs_first(template, served_table, engine):
    spark, files = served_table
    sql = template.format(m=READ)
    plan = translate(sqlglot.parse_one(sql, read="spark"), {TABLE: COLUMNS},
                     lambda table, ids: [f for sid in ids for f in files[sid]])
    want = [tuple(r) for r in spark.sql(sql).collect()]
    got = engine.run_blocking(plan)
    assert got == want, f"\n  spark:  {want}\n  served: {got}\n  duckdb: {plan.sql}"
