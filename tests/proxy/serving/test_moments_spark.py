"""Serving tier, differential: variances and standard deviations rolled up from a datamap's
stored moments (proxy/serving/moments.py) over edge values, served by the local engine
and compared with Spark answering the ORIGINAL query on the base table: names, Spark
types and rows, doubles within the documented 1e-9 (NaN as NaN, NULL as NULL).

The base table holds groups of no value, one value, equal values, -0.0 and 0.0, NaN,
infinities, the extremes of int and decimal(10,2) and of magnitude 1e150, and an ordinary
spread. The datamap is written by Spark as Parquet partitioned by segment: segments '0'
and '1' over the even and odd rows (partial: every query rolls up), segment '2' the whole
build (one row per group: the datamap's own grain reads its columns as they are).
"""
from __future__ import annotations

import pytest

import rewriter as core
from proxy.routing.session_keys import semantic_setting
from proxy.serving.translate import translate
from rewriter.api import Candidate
from tests.support.serving import engine, segmented_table  # noqa: F401 - engine: a fixture
from tests.support.spark_tier import df_schema, fmt_rows, multiset_diff

pytestmark = pytest.mark.spark

DB = "servmoments"
SCHEMAS = {DB: {"base": {"k": "int", "g": "string", "h": "int", "i": "int",
                         "d": "decimal(10,2)", "x": "double"}}}
_N = "NULL"
# k, g, h, i, d, x
ROWS = [
    (1, "none", 1, _N, _N, _N), (2, "none", 2, _N, _N, _N),
    (3, "one", 1, "5", "1.25", "2.5D"),
    (4, "equal", 1, "7", "0.10", "0.1D"), (5, "equal", 2, "7", "0.10", "0.1D"),
    (6, "equal", 1, "7", "0.10", "0.1D"),
    (7, "zeros", 1, "0", "0.00", "-0.0D"), (8, "zeros", 2, "0", "-0.00", "0.0D"),
    (9, "nan", 1, "1", "1.00", "double('NaN')"), (10, "nan", 2, "2", "2.00", "1.0D"),
    (11, "inf", 1, "1", "1.00", "double('Infinity')"), (12, "inf", 2, "2", "2.00", "1.0D"),
    (13, "infs", 1, "1", "1.00", "double('-Infinity')"),
    (14, "infs", 2, "2", "2.00", "double('Infinity')"),
    (15, "extreme", 1, "2147483647", "99999999.99", "1e150D"),
    (16, "extreme", 2, "-2147483648", "-99999999.99", "-1e150D"),
    (17, "extreme", 1, "0", "0.01", "3.0D"),
    (18, "sparse", 1, "4", _N, _N), (19, "sparse", 2, _N, "3.50", _N),
    *[(k, "spread", k % 3, str(k * 3 - 40), f"{k * 1.37:.2f}", f"{k * 0.1:.1f}D")
      for k in range(20, 34)],
]
DEFINITION = (f"SELECT g, h, var_pop(i) AS vi, stddev(d) AS sd, variance(x) AS vx, "
              f"count(*) AS n FROM {DB}.base GROUP BY g, h")
QUERIES = [
    # a coarser grain: every form of each argument type
    f"SELECT g, var_pop(i) AS a, var_samp(i) AS b, variance(d) AS c, stddev_pop(d) AS e, "
    f"stddev_samp(x) AS f, stddev(x) AS s, std(i) AS j, var_pop(x) AS l FROM {DB}.base GROUP BY g",
    # the grand total (NaN and infinities in x), and a filter leaving no row
    f"SELECT var_samp(x) AS a, stddev_pop(i) AS b, variance(d) AS c FROM {DB}.base",
    f"SELECT var_samp(i) AS a, var_pop(x) AS b, stddev(d) AS c FROM {DB}.base WHERE g = 'no such'",
    # the datamap's own grain (one row per group in segment '2')
    f"SELECT g, h, var_samp(i) AS a, stddev_pop(x) AS b, var_pop(d) AS c FROM {DB}.base GROUP BY g, h",
    # unaliased: Spark's column names
    f"SELECT g, variance(x), stddev(d), var_pop(i), stddev_samp(i) FROM {DB}.base GROUP BY g",
]


def _values() -> str:
    return ", ".join(f"({k}, '{g}', {h}, {i}, "
                     f"{'NULL' if d == _N else f'CAST({d} AS DECIMAL(10,2))'}, "
                     f"{'NULL' if x == _N else x})" for k, g, h, i, d, x in ROWS)


@pytest.fixture(scope="module")
def served(engine):  # noqa: F811 - the engine fixture
    definition = core.compile_datamap("v", DEFINITION, SCHEMAS, DB)

    def build(spark):
        spark.sql(f"CREATE TABLE {DB}.base (k INT, g STRING, h INT, i INT, d DECIMAL(10,2), "
                  f"x DOUBLE) USING parquet")
        spark.sql(f"INSERT INTO {DB}.base VALUES {_values()}")
        parts = [f"SELECT b.*, '{sid}' AS dm_segment_id FROM ({definition.build_sql(src)}) b"
                 for sid, src in (("0", {f"{DB}.base": f"(SELECT * FROM {DB}.base WHERE k % 2 = 0)"}),
                                  ("1", {f"{DB}.base": f"(SELECT * FROM {DB}.base WHERE k % 2 = 1)"}),
                                  ("2", {}))]
        return spark.sql(" UNION ALL ".join(parts))

    with segmented_table(build, DB) as (spark, files):
        # the datamap's rows live in <db>.t: read its segments' files under the datamap's name
        yield spark, definition, files


def _serve(definition, files, segments, one_row_per_group, sql):
    cand = Candidate(definition=definition, one_row_per_group=one_row_per_group,
                     segments=segments)
    result = core.rewrite(sql, [cand], SCHEMAS, DB)
    assert result.used == [definition.qualified], result.skipped
    tables = {definition.table: {c.name: c.type for c in definition.columns}}
    return translate(result.tree, tables,
                     lambda table, ids: [f for sid in ids for f in files[sid]], "UTC"), result.sql


@pytest.mark.parametrize("layout", ["segments", "one row per group"])
def test_served_moments_equal_spark(served, engine, layout):  # noqa: F811
    spark, definition, files = served
    segments, exact = (("0", "1"), False) if layout == "segments" else (("2",), True)
    bad = []
    for sql in QUERIES:
        plan, rewritten = _serve(definition, files, segments, exact, sql)
        df = spark.sql(sql)
        want = [tuple(r) for r in df.collect()]
        got = engine.run_blocking(plan)
        only_spark, only_served = multiset_diff(want, got)
        if list(plan.columns) != df_schema(df) or only_spark or only_served:
            bad.append(f"{sql}\n  rewritten: {rewritten}\n  duckdb: {plan.sql}\n"
                       f"  Spark {df_schema(df)} {fmt_rows(only_spark)}\n"
                       f"  served {list(plan.columns)} {fmt_rows(only_served)}")
    assert not bad, "\n".join(bad)


def test_the_edges_are_spark_s(served):
    """What the cases above rest on: Spark's NULL for one value of a sample form (NaN with
    spark.sql.legacy.statisticalAggregate, a setting that keeps a session off datamaps),
    0.0 for equal values, NaN for a NaN or an infinity."""
    spark = served[0]
    q = (f"SELECT g, var_samp(x) AS s, var_pop(x) AS p FROM {DB}.base "
         f"WHERE g IN ('one', 'equal', 'nan', 'inf') GROUP BY g")
    rows = {r[0]: (r[1], r[2]) for r in spark.sql(q).collect()}
    assert rows["one"] == (None, 0.0) and rows["equal"] == (0.0, 0.0)
    assert all(v != v for g in ("nan", "inf") for v in rows[g])
    key = "spark.sql.legacy.statisticalAggregate"
    spark.conf.set(key, "true")
    try:
        one = spark.sql(q).collect()
        assert [r[1] for r in one if r[0] == "one"][0] != [r[1] for r in one if r[0] == "one"][0]
    finally:
        spark.conf.unset(key)
    assert semantic_setting(key)
