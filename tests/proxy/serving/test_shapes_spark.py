"""Serving tier: query shapes beyond one plain GROUP BY -- subtotals (ROLLUP, CUBE, GROUPING
SETS with grouping() / grouping_id(), proxy/serving/subtotals.py), window functions
(windows.py) and unions (unions.py; their cases: tests/support/window_union_cases.py) -- run by Spark
and by the local engine from the SAME SQL text, compared on names, Spark types and rows.

Edge values: NULL keys beside subtotal NULLs (grouping() tells them apart), -0.0 and 0.0
as one double key, a filter that leaves no input (Spark gives no grand total row), an
all-NULL column, ties. Rows are compared as multisets unless the query orders them
totally (then in order). Segment 2 must never be read.
"""
from __future__ import annotations

import pytest
import sqlglot

from proxy.serving.engine import EngineFailure
from proxy.serving.translate import NotServable, translate
from tests.support.serving import (  # noqa: F401 - fixtures
    engine, exact_bag, scale_problems, segmented_table, zero_sign_problems,
)
from tests.support.spark_tier import fmt_rows, df_schema
from tests.support.window_union_cases import UNION_CASES, WINDOW_CASES

pytestmark = pytest.mark.spark

TABLE = "servshapes.t"
COLUMNS = {"k": "string", "s": "string", "i": "int", "d": "decimal(10,2)", "x": "double",
           "z": "int", "w": "decimal(38,10)"}
_N = None
# k, s, i, d, x, z (always NULL), w (averages need Spark's scale 39), segment
ROWS = [
    ("a", "p", 1, "1.50", "0.0", _N, "0.0000000001", "0"),
    ("a", "q", 2, "-2.25", "-0.0", _N, "0", "0"),
    ("a", _N, 3, _N, "1.5", _N, "0", "0"),
    (_N, "p", 4, "10.00", _N, _N, "-0.0000000001", "0"),
    (_N, _N, _N, "0.01", "-0.0", _N, "0.0000000002", "1"),
    ("b", "p", 5, "3.00", "1.5", _N, "12345678901234567890.1234567891", "1"),
    ("b", "p", -7, "-3.00", "NaN", _N, "-0.0000000007", "1"),
    ("c", "q", 2147483647, "99999999.99", "Infinity", _N, "0.0000000005", "1"),
    ("b", "q", 5, "3.00", "0.0", _N, _N, "1"),     # ties with ("b", "p", 5, "3.00")
    ("c", _N, _N, _N, _N, _N, "0.0000000001", "1"),
    # never visible
    ("hidden", "h", 999, "999.00", "999.0", 1, "1", "2"),
]
READ = f"(SELECT {', '.join(COLUMNS)} FROM {TABLE} WHERE dm_segment_id IN ('0', '1')) AS m"
ROWS_, ORDERED, REFUSED = "rows", "ordered", "refused"

CASES = [
    ("ROLLUP: grouping() and grouping_id() in Spark's bit order, NULL keys beside subtotals",
     "SELECT m.k AS k, m.s AS s, grouping(m.k) AS gk, grouping(m.s) AS gs, "
     "grouping_id() AS gid, grouping_id(m.k, m.s) AS gid2, sum(m.i) AS si, sum(m.d) AS sd, "
     "count(*) AS n, count(m.z) AS nz, max(m.z) AS mz FROM {m} GROUP BY ROLLUP (m.k, m.s)", ROWS_),
    ("CUBE, HAVING over aggregates, ORDER BY grouping() and keys",
     "SELECT m.k AS k, m.s AS s, grouping_id() AS g, count(*) AS n FROM {m} "
     "GROUP BY CUBE (m.k, m.s) HAVING count(*) > 1 OR max(m.i) < 3 "
     "ORDER BY g DESC, grouping(m.k), k, s NULLS LAST", ORDERED),
    ("a key in HAVING beside ORDER BY grouping() (Spark fails to resolve it)",
     "SELECT m.k AS k, count(*) AS n FROM {m} GROUP BY ROLLUP (m.k, m.s) "
     "HAVING m.k IS NULL ORDER BY grouping(m.k)", REFUSED),
    ("grouping() in HAVING (Spark fails to resolve it)", "SELECT m.k AS k FROM {m} "
     "GROUP BY ROLLUP (m.k) HAVING grouping(m.k) = 0", REFUSED),
    ("grouping_id() of some grouping expressions (Spark rejects it)", "SELECT m.k AS k, "
     "grouping_id(m.s) AS g FROM {m} GROUP BY ROLLUP (m.k, m.s)", REFUSED),
    ("mixed list: a key, ROLLUP and GROUPING SETS multiply out",
     "SELECT m.k AS k, m.s AS s, m.z AS z, grouping_id() AS g, grouping(m.z) AS g2, "
     "sum(m.d) AS sd FROM {m} GROUP BY m.k, ROLLUP (m.s), GROUPING SETS ((m.z), ())", ROWS_),
    ("WITH ROLLUP / GROUPING SETS of the legacy form: the listed order of keys",
     "SELECT m.s AS s, m.k AS k, grouping_id() AS g, count(*) AS n FROM {m} "
     "GROUP BY m.s, m.k GROUPING SETS ((m.k), (m.s), ())", ROWS_),
    ("WITH CUBE", "SELECT m.s AS s, m.k AS k, grouping_id() AS g, min(m.i) AS mi FROM {m} "
     "GROUP BY m.s, m.k WITH CUBE", ROWS_),
    ("no input rows: no grand total row",
     "SELECT m.k AS k, grouping_id() AS g, count(*) AS n, sum(m.i) AS s FROM {m} "
     "WHERE m.i > 2147483647 GROUP BY ROLLUP (m.k)", ROWS_),
    ("no input rows, GROUPING SETS with () first",
     "SELECT m.k AS k, count(*) AS n FROM {m} WHERE m.k = 'none' "
     "GROUP BY GROUPING SETS ((), (m.k))", ROWS_),
    ("an expression over a subtotal key reads the subtotal NULL",
     "SELECT coalesce(m.k, 'All') AS k, concat(m.k, '-', m.s) AS ks, upper(m.k) AS u, "
     "sum(length(m.k)) AS l FROM {m} GROUP BY ROLLUP (m.k, m.s)", ROWS_),
    ("a double key: -0.0 and 0.0 one group read as 0.0, NaN one group",
     "SELECT m.x AS x, grouping(m.x) AS g, count(*) AS n FROM {m} GROUP BY ROLLUP (m.x)", ROWS_),
    ("grouping() of a plain GROUP BY (Spark rejects it)",
     "SELECT m.k AS k, grouping(m.k) AS g, count(*) AS n FROM {m} GROUP BY m.k", REFUSED),
    ("top subtotals with LIMIT (no ties at the cut)",
     "SELECT m.k AS k, grouping(m.k) AS g, count(*) AS n FROM {m} GROUP BY ROLLUP (m.k) "
     "ORDER BY n DESC, k LIMIT 2", ORDERED),
    ("avg of a wide decimal: the quotient at scale 39, then decimal(38,14)",
     "SELECT m.k AS k, avg(m.w) AS aw, avg(DISTINCT m.w) AS adw FROM {m} GROUP BY m.k", ROWS_),
    ("a grouping set listed twice", "SELECT m.k AS k, count(*) AS n FROM {m} "
     "GROUP BY GROUPING SETS ((m.k), (m.k))", REFUSED),
] + WINDOW_CASES + UNION_CASES


@pytest.fixture(scope="module")
def served_table():
    from pyspark.sql.types import StringType, StructField, StructType

    def frame(spark):
        names = list(COLUMNS) + ["dm_segment_id"]
        st = StructType([StructField(c, StringType(), True) for c in names])
        df = spark.createDataFrame([tuple(r) for r in ROWS], st)
        return df.selectExpr(*[f"CAST(`{c}` AS {t}) AS `{c}`" for c, t in COLUMNS.items()],
                             "dm_segment_id")
    with segmented_table(frame, "servshapes") as out:
        yield out


@pytest.mark.parametrize("title,template,expect", CASES, ids=[c[0] for c in CASES])
def test_served_like_spark(title, template, expect, served_table, engine):
    spark, files = served_table
    sql = template.format(m=READ)
    try:
        plan = translate(sqlglot.parse_one(sql, read="spark"), {TABLE: COLUMNS},
                         lambda table, ids: [f for sid in ids for f in files[sid]])
    except NotServable as e:
        assert expect == REFUSED, f"not servable: {e}"
        return
    assert expect != REFUSED, f"served, but the case says refused: {plan.sql}"
    sdf = spark.sql(sql)
    sschema = df_schema(sdf)
    srows = [tuple(r) for r in sdf.collect()]
    try:
        rows = engine.run_blocking(plan)
    except EngineFailure as e:
        pytest.fail(f"the engine failed ({e}) where Spark answered {fmt_rows(srows)}\n"
                    f"  duckdb: {plan.sql}")
    assert list(plan.columns) == [tuple(c) for c in sschema], \
        f"schema: Spark {sschema} vs served {list(plan.columns)}"
    problems = scale_problems(plan.columns, rows) + zero_sign_problems(plan.columns, srows, rows)
    assert not problems, "\n".join(problems)
    want, got = (exact_bag(srows), exact_bag(rows)) if expect == ROWS_ else (
        [tuple(map(repr, r)) for r in srows], [tuple(map(repr, r)) for r in rows])
    assert want == got, (f"rows differ:\n  spark {want}\n  local {got}\n  duckdb: {plan.sql}")
