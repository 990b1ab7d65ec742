"""Every grouping/projection expression a dashboard buckets by, as a datamap definition on
real Spark: each either builds and answers exactly what Spark answers (names,
types, rows), or is refused at CREATE with a reason naming the expression.

Each expression E is tried alone (`GROUP BY E`) and with another grouping column
(`GROUP BY c, E`, which must also answer the coarser `GROUP BY E`), plus a projection
datamap holding E. The query must be answered from the datamap (a hit), not forwarded."""
from __future__ import annotations

import uuid

import pytest

from proxy.datamaps.catalog.store import Catalog
from proxy.datamaps.handler import DatamapDdlHandler, DatamapSelectHandler
from proxy.datamaps.service import DatamapService
from proxy.errors import ClientError
from proxy.routing.router import Rewrite, StatementContext
from rewriter import translate_timeseries
from rewriter.timeseries import GRANULARITIES

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

TIME = ["hour(ts)", "minute(ts)", "second(ts)", "dayofmonth(ts)", "day(ts)", "dayofweek(ts)",
        "weekday(ts)", "dayofyear(ts)", "weekofyear(ts)", "quarter(ts)", "month(ts)", "year(ts)",
        "date_format(ts, 'yyyy-MM')", "date_format(ts, 'yyyy-MM-dd HH:00')",
        "trunc(ts, 'MM')", "trunc(d, 'YEAR')", "trunc(d, 'QUARTER')", "trunc(d, 'WEEK')",
        *[f"date_trunc('{u}', ts)" for u in ("YEAR", "QUARTER", "MONTH", "WEEK", "DAY", "HOUR",
                                              "MINUTE", "SECOND")],
        "to_date(ts)", "CAST(ts AS DATE)", "CAST(d AS TIMESTAMP)", "last_day(d)",
        "date_add(d, 1)", "unix_timestamp(ts) DIV 3600", "from_unixtime(unix_timestamp(ts), 'yyyy')"]
ARITH = ["n DIV 5", "n % 5", "pmod(n, 5)", "n + 1", "n * 2", "n - m", "n / 2", "-n", "abs(n)",
         "n & 3", "n | 8", "n ^ 5", "~n", "shiftleft(n, 2)", "shiftright(n, 1)",
         "CAST(n AS BIGINT)", "CAST(n AS STRING)", "CAST(x AS INT)", "CAST(x AS DOUBLE)",
         "floor(x)", "ceil(x)", "round(x, 1)", "x * 2", "m DIV 100", "pmod(m, 7)"]
TIMESERIES = [f"timeseries(ts, '{g}')" for g in GRANULARITIES]

ROWS = [
    ("2024-01-01 10:05:07", "a", 1, 10, "1.25"), ("2024-01-01 10:59:59", "b", -2, 20, "2.50"),
    ("2024-01-02 11:07:00", "a", 3, -30, "-3.75"), ("2024-02-29 23:31:45", None, 4, 40, "0.05"),
    ("2024-03-31 00:00:00", "b", 5, None, None), ("2024-12-31 18:14:59", "a", None, 60, "9.99"),
    ("2025-01-06 07:45:30", "c", 7, 70, "7.00"), (None, "c", 8, 80, "8.88"),
]


def _value_rows() -> str:
    def lit(v, kind: str) -> str:
        return "NULL" if v is None else f"{kind} '{v}'"

    def num(v) -> str:
        return "NULL" if v is None else str(v)
    return ", ".join(
        f"({lit(ts, 'TIMESTAMP')}, {lit(ts and ts[:10], 'DATE')}, {lit(c, '')}, {num(n)}, "
        f"{num(m)}, {'NULL' if x is None else f'CAST({x} AS DECIMAL(8,2))'}, 1)"
        for ts, c, n, m, x in ROWS)


async def _no_upstream(sql):
    raise AssertionError(f"DDL must not go upstream: {sql}")


@pytest.fixture(scope="module")
def matrix(pipeline_spark, pipe_db, tmp_path_factory):
    spark = pipeline_spark
    t = f"{pipe_db}.events_{uuid.uuid4().hex[:6]}"
    spark.sql(f"CREATE TABLE {t} (ts TIMESTAMP, d DATE, c STRING, n INT, m BIGINT, "
              f"x DECIMAL(8,2), q INT) USING parquet")
    spark.sql(f"INSERT INTO {t} VALUES {_value_rows()}")
    catalog = Catalog.in_state_dir(tmp_path_factory.mktemp("matrix-state"))
    svc = DatamapService(catalog, lambda: spark)
    svc.garbage_grace_s = 0
    box = {"spark": spark, "t": t, "svc": svc, "ddl": DatamapDdlHandler(svc),
           "select": DatamapSelectHandler(svc), "ctx": StatementContext("s", "me", pipe_db, {}, 10)}
    yield box
    catalog.close()


def _answer(spark, sql):
    df = spark.sql(sql)
    return ([(f.name, f.dataType.simpleString()) for f in df.schema.fields],
            sorted((tuple(r) for r in df.collect()), key=repr))


async def _check(m, definition: str, queries: list[str], name: str):
    """CREATE the datamap; every query must be a hit answering exactly Spark's answer."""
    ctx = m["ctx"]
    try:
        await m["ddl"](ctx, f"CREATE DATAMAP {name} USING 'mv' AS {definition}").runner(_no_upstream)
    except ClientError as e:
        # a refusal is allowed only when it says what it refuses
        assert str(e).strip() and e.sqlstate and e.sqlstate != "HY000", (definition, str(e))
        return f"refused: {e}"
    try:
        for q in queries:
            d = m["select"](ctx, q)
            assert isinstance(d, Rewrite) and f"{name}_table" in d.sql, (
                f"{q!r} did not hit {name}: {d}")
            # Spark has no timeseries(): the reference is the proxy's plain translation
            reference = translate_timeseries(q, m["svc"].schemas([m["t"]]), m["ctx"].current_db)
            assert _answer(m["spark"], d.sql) == _answer(m["spark"], reference), (q, d.sql)
    finally:
        await m["ddl"](ctx, f"DROP DATAMAP {name}").runner(_no_upstream)
    return "hit"


# A datamap holds one timeseries granularity at most: one per batch, with the others.
BATCHES = [[*(TIME + ARITH)[i::len(TIMESERIES)], ts] for i, ts in enumerate(TIMESERIES)]


@pytest.mark.parametrize("batch", BATCHES, ids=lambda b: b[-1])
async def test_expressions_build_and_answer(matrix, batch):
    """One datamap grouping by another column and every expression of the batch (each
    stored column typed by Spark); each expression's own GROUP BY rolls up from it."""
    t, tag = matrix["t"], uuid.uuid4().hex[:6]
    items = ", ".join(f"{e} AS g{i}" for i, e in enumerate(batch))
    groups = ", ".join(batch)
    wide = f"SELECT c, {items}, sum(q) AS s, count(*) AS n FROM {t} GROUP BY c, {groups}"
    queries = [wide] + [f"SELECT {e} AS g, sum(q) AS s FROM {t} GROUP BY {e}" for e in batch]
    assert await _check(matrix, wide, queries, f"w_{tag}") == "hit"


# Buckets that once failed to build, and the granularities: alone, with another grouping
# column, and in a projection datamap.
ALONE = ["hour(ts)", "dayofmonth(ts)", "n DIV 5", "date_format(ts, 'yyyy-MM')",
         "timeseries(ts, 'five_minute')", "timeseries(ts, 'ten_minute')",
         "timeseries(ts, 'hour')", "timeseries(ts, 'week')"]


@pytest.mark.parametrize("expr", ALONE)
async def test_expression_alone_and_with_another_column(matrix, expr):
    t, tag = matrix["t"], uuid.uuid4().hex[:6]
    alone = f"SELECT {expr} AS g, sum(q), count(*) FROM {t} GROUP BY {expr}"
    with_c = f"SELECT {expr} AS g, c, sum(q) AS s FROM {t} GROUP BY {expr}, c"
    outcomes = [await _check(matrix, alone, [alone], f"a_{tag}"),
                await _check(matrix, with_c, [with_c], f"b_{tag}"),
                await _check(matrix, f"SELECT c, {expr} AS g, q FROM {t}",
                             [f"SELECT c, {expr} AS g FROM {t} WHERE q > 0"], f"p_{tag}")]
    assert outcomes == ["hit", "hit", "hit"], outcomes


async def test_refusals_and_failures_say_what_and_why(matrix, caplog):
    """A stored type Parquet cannot hold is refused naming the expression; a build that
    Spark fails (here ANSI's invalid cast) reports Spark's own message and SQLSTATE, never
    an empty one, and logs the whole failure once with the statement; no datamap is left."""
    t, ctx = matrix["t"], matrix["ctx"]
    with pytest.raises(ClientError) as e:
        await matrix["ddl"](ctx, f"CREATE DATAMAP v USING 'mv' AS SELECT c, NULL AS z, q FROM {t}"
                            ).runner(_no_upstream)
    assert e.value.sqlstate == "0A000" and "NULL" in str(e.value) and "void" in str(e.value)
    bad = f"CREATE DATAMAP bad USING 'mv' AS SELECT CAST(c AS INT) AS ci, sum(q) FROM {t} GROUP BY CAST(c AS INT)"
    caplog.clear()
    with caplog.at_level("ERROR", logger="proxy.datamaps"):
        with pytest.raises(ClientError) as e:
            await matrix["ddl"](ctx, bad).runner(_no_upstream)
    message = str(e.value)
    assert message.startswith(f"Building datamap {ctx.current_db}.bad failed: ")
    assert "CAST_INVALID_INPUT" in message and e.value.sqlstate == "22018", message
    errors = [r for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1 and bad in errors[0].getMessage()
    assert "JVM stacktrace" in errors[0].getMessage() and errors[0].exc_info
    assert matrix["svc"].catalog.get_datamap(ctx.current_db, "bad") is None


# Definitions beyond sum / count / min / max / avg of a plain GROUP BY (variances, a grouping
# expression not projected, HAVING, sums of CASE / IF, DISTINCT aggregates, WITH, a self-join):
# each builds, answers its must-hit queries as Spark does (double columns within the
# documented 1e-9), and its segments after appends (incremental), after compaction and after an overwrite (full
# rebuild) re-aggregate to what a full build of the definition gives.
FORMS = {
    "var": ("SELECT c, n DIV 10 AS b, var_pop(n) AS vp, stddev(x) AS sd, variance(m) AS vm, "
            "count(*) AS k FROM {t} GROUP BY c, n DIV 10",
            ["SELECT c, var_pop(n) AS vp, stddev_samp(x) AS sd, var_samp(m) AS vm, "
             "stddev_pop(n) AS sp, std(x) AS s2 FROM {t} GROUP BY c",
             "SELECT c, n DIV 10 AS b, var_samp(n) AS v, stddev(x) AS sd FROM {t} GROUP BY c, n DIV 10",
             "SELECT var_pop(x) AS v, stddev(m) AS s FROM {t}"]),
    "hidden": ("SELECT c, sum(q) AS s FROM {t} GROUP BY c, n DIV 10",
               ["SELECT c, sum(q) AS s FROM {t} GROUP BY c, n DIV 10",
                "SELECT n DIV 10 AS b, sum(q) AS s FROM {t} GROUP BY n DIV 10"]),
    "having": ("SELECT c, n DIV 10 AS b, sum(q) AS s FROM {t} GROUP BY c, n DIV 10 "
               "HAVING count(*) > 1 AND max(x) < 8",
               ["SELECT c, n DIV 10 AS b, sum(q) AS s FROM {t} GROUP BY c, n DIV 10 "
                "HAVING count(*) > 1 AND max(x) < 8",
                "SELECT c, sum(q) AS s FROM {t} GROUP BY c HAVING count(*) > 2"]),
    "case": ("SELECT c, sum(if(n > 3, 1, 0)) AS big, sum(CASE WHEN n > 3 THEN x ELSE 0 END) AS bx, "
             "sum(CASE WHEN m > 30 THEN 1L ELSE 0 END) AS bm FROM {t} GROUP BY c",
             ["SELECT c, sum(if(n > 3, 1, 0)) AS big, sum(CASE WHEN n > 3 THEN x ELSE 0 END) AS bx, "
              "sum(CASE WHEN m > 30 THEN 1L ELSE 0 END) AS bm FROM {t} GROUP BY c",
              "SELECT sum(CASE WHEN n > 3 THEN x ELSE 0 END) AS bx FROM {t}"]),
    "distinct": ("SELECT c, count(DISTINCT n DIV 2) AS dn, sum(DISTINCT x) AS sx, count(*) AS k "
                 "FROM {t} GROUP BY c",
                 ["SELECT c, count(DISTINCT n DIV 2) AS dn, sum(DISTINCT x) AS sx, count(*) AS k "
                  "FROM {t} GROUP BY c",
                  "SELECT count(DISTINCT n DIV 2) AS dn, avg(DISTINCT x) AS ax FROM {t}"]),
    "with": ("WITH r AS (SELECT c, n, q FROM {t} WHERE n > 0) SELECT c, sum(q) AS s, count(*) AS k "
             "FROM r GROUP BY c",
             ["SELECT sum(q) AS s FROM {t} WHERE n > 0"]),
    # a self-join, each reference a relation of its own; queries matched by alias mapping.
    # The append adds new⋈old (n = 1 against the old q = 1), old⋈new and new⋈new pairs:
    # refreshed incrementally, one term per reference (pipeline/jobs.py plan_delta)
    "selfjoin": ("SELECT a.c, b.c AS peer, sum(a.q) AS s, count(*) AS k FROM {t} a JOIN {t} b "
                 "ON a.n = b.q GROUP BY a.c, b.c",
                 ["SELECT a.c, b.c AS peer, sum(a.q) AS s, count(*) AS k FROM {t} a JOIN {t} b "
                  "ON a.n = b.q GROUP BY a.c, b.c",
                  "SELECT y.c, x.c AS peer, sum(y.q) AS s FROM {t} x JOIN {t} y ON y.n = x.q "
                  "GROUP BY y.c, x.c",
                  "SELECT b.c AS peer, count(*) AS k FROM {t} a JOIN {t} b ON a.n = b.q "
                  "WHERE a.c = 'a' GROUP BY b.c"]),
}
MORE_ROWS = ("('a', 11, 110, 1.25, 2), ('a', 12, 120, 1.25, 3), ('d', 5, 50, 5.55, 1), "
             "('b', 13, NULL, NULL, 4), ('a', NULL, 7, 0.10, 5), ('d', 5, 50, 5.55, 1), "
             "('c', 1, 10, 2.00, 2)")
# three datamaps per test, so that each stays within the module's timeout; the first of
# each group is refreshed incrementally (two segments after the append)
FORM_GROUPS = [["var", "hidden", "having"], ["case", "distinct", "with"], ["selfjoin"]]


def _close(a, b) -> bool:
    import math
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and (
            math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12) or (math.isnan(a) and math.isnan(b)))
    return a == b


def _same(got, want) -> bool:
    """Equal names, types and rows, doubles within the documented tolerance."""
    (gcols, grows), (wcols, wrows) = got, want
    key = lambda r: repr([v if not isinstance(v, float) else round(v, 6) for v in r])  # noqa: E731
    grows, wrows = sorted(grows, key=key), sorted(wrows, key=key)
    return gcols == wcols and len(grows) == len(wrows) and all(
        len(g) == len(w) and all(_close(x, y) for x, y in zip(g, w)) for g, w in zip(grows, wrows))


def _table_copy(matrix, prefix: str, forms) -> tuple[str, dict[str, str]]:
    """A table of its own with the matrix table's rows (the forms' loads change it), and
    a datamap name per form."""
    spark, db = matrix["spark"], matrix["ctx"].current_db
    t = f"{db}.{prefix}_{uuid.uuid4().hex[:6]}"
    spark.sql(f"CREATE TABLE {t} (c STRING, n INT, m BIGINT, x DECIMAL(8,2), q INT) USING parquet")
    spark.sql(f"INSERT INTO {t} SELECT c, n, m, x, q FROM {matrix['t']}")
    return t, {form: f"{form}_{uuid.uuid4().hex[:6]}" for form in forms}


@pytest.mark.parametrize("forms", FORM_GROUPS, ids=lambda g: "-".join(g))
async def test_new_definition_forms_answer_and_refresh_like_a_full_build(matrix, forms):
    from pipeline import read_segments, reaggregate
    spark, svc, ctx = matrix["spark"], matrix["svc"], matrix["ctx"]
    t, names = _table_copy(matrix, "forms", forms)

    def check(stage: str) -> None:
        for form in forms:
            definition, queries = FORMS[form]
            rec = svc.catalog.get_datamap(ctx.current_db, names[form])
            ids = [s.id for s in svc.catalog.visible_segments(ctx.current_db, names[form])]
            d = rec.definition
            stored = reaggregate(d, read_segments(spark, d, ids))
            stored = stored.selectExpr(*[f"CAST(`{c.name}` AS {c.type}) AS `{c.name}`" for c in d.columns])
            built = _answer(spark, d.build_sql({}))
            assert _same(([(f.name, f.dataType.simpleString()) for f in stored.schema.fields],
                          [tuple(r) for r in stored.collect()]), built), (stage, form)
            for q in queries:
                q = q.format(t=t)
                dec = matrix["select"](ctx, q)
                # a hit (another of the forms' datamaps may answer it more cheaply)
                assert isinstance(dec, Rewrite) and dec.datamaps, (stage, q, dec)
                assert _same(_answer(spark, dec.sql), _answer(spark, q)), (stage, q, dec.sql)

    for form in forms:
        await matrix["ddl"](ctx, f"CREATE DATAMAP {names[form]} AS {FORMS[form][0].format(t=t)}"
                            ).runner(_no_upstream)
    try:
        check("built")
        spark.sql(f"INSERT INTO {t} VALUES {MORE_ROWS}")
        svc.after_load(t)
        assert len(svc.catalog.visible_segments(ctx.current_db, names[forms[0]])) == 2
        check("appended")
        for name in names.values():
            await matrix["ddl"](ctx, f"ALTER DATAMAP {name} COMPACT 'MAJOR'").runner(_no_upstream)
        check("compacted")
        spark.sql(f"INSERT OVERWRITE TABLE {t} SELECT c, n, m, x, q FROM {matrix['t']} WHERE n > 1")
        svc.after_load(t, overwrite=True)
        check("overwritten")
    finally:
        for name in names.values():
            await matrix["ddl"](ctx, f"DROP DATAMAP IF EXISTS {name}").runner(_no_upstream)


# Definitions no increment exists for, refreshed in full (rewriter/rebuilt.py): each builds
# with refresh mode `full` shown by SHOW DATAMAP, answers its own query (and, for one
# grouped block, coarser counts, integral sums and min / max) as Spark does, is rebuilt as
# one segment after an append and an overwrite, and answers as Spark does again.
FULL_FORMS = {
    "union": ("SELECT c AS k, sum(q) AS s FROM {t} GROUP BY c UNION ALL "
              "SELECT CAST(n AS STRING), sum(q) FROM {t} GROUP BY n",
              ["SELECT c AS k, sum(q) AS s FROM {t} GROUP BY c UNION ALL "
               "SELECT CAST(n AS STRING), sum(q) FROM {t} GROUP BY n ORDER BY s DESC, k"]),
    "union_distinct": ("SELECT c FROM {t} WHERE n > 2 UNION SELECT c FROM {t} WHERE m > 30",
                       ["SELECT count(*) AS k FROM (SELECT c FROM {t} WHERE n > 2 UNION "
                        "SELECT c FROM {t} WHERE m > 30) u"]),
    "in": ("SELECT c, n DIV 10 AS b, count(*) AS k, sum(q) AS s, min(x) AS mx FROM {t} "
           "WHERE n IN (SELECT n FROM {t} WHERE m > 0) GROUP BY c, n DIV 10",
           ["SELECT c, n DIV 10 AS b, count(*) AS k, sum(q) AS s, min(x) AS mx FROM {t} "
            "WHERE n IN (SELECT n FROM {t} WHERE m > 0) GROUP BY c, n DIV 10",
            "SELECT c, count(*) AS k, sum(q) AS s, min(x) AS mx FROM {t} "
            "WHERE n IN (SELECT n FROM {t} WHERE m > 0) GROUP BY c",
            "SELECT count(*), min(x) AS low FROM {t} WHERE n IN (SELECT n FROM {t} WHERE m > 0)"]),
    "exists": ("SELECT a.c, count(*) AS k FROM {t} a WHERE EXISTS "
               "(SELECT 1 FROM {t} b WHERE b.n = a.n + 1) GROUP BY a.c",
               ["SELECT a.c, count(*) AS k FROM {t} a WHERE EXISTS "
                "(SELECT 1 FROM {t} b WHERE b.n = a.n + 1) GROUP BY a.c"]),
    "derived": ("SELECT d.c, sum(d.q) AS s FROM (SELECT c, q FROM {t} WHERE x > 0) d GROUP BY d.c",
                ["SELECT e.c, sum(e.q) AS s FROM (SELECT c, q FROM {t} WHERE x > 0) e GROUP BY e.c"]),
    "rollup": ("SELECT c, n DIV 10 AS b, sum(q) AS s, count(*) AS k FROM {t} "
               "GROUP BY c, n DIV 10 WITH ROLLUP",
               ["SELECT * FROM (SELECT c, n DIV 10 AS b, sum(q) AS s, count(*) AS k FROM {t} "
                "GROUP BY c, n DIV 10 WITH ROLLUP) r WHERE r.b IS NULL"]),
    "sets": ("SELECT c, n DIV 10 AS b, sum(q) AS s FROM {t} GROUP BY GROUPING SETS ((c), (n DIV 10), ())",
             ["SELECT c, n DIV 10 AS b, sum(q) AS s FROM {t} "
              "GROUP BY GROUPING SETS ((c), (n DIV 10), ())"]),
    "cte": ("WITH g AS (SELECT c, sum(q) AS s FROM {t} GROUP BY c) SELECT c, s FROM g WHERE s > 3",
            ["WITH g AS (SELECT c, sum(q) AS s FROM {t} GROUP BY c) SELECT c, s FROM g WHERE s > 3"]),
}
# a query none of them answers (a UNION ALL of aggregates is never rolled up)
FULL_MISS = "SELECT c, sum(q) AS s FROM {t} GROUP BY c"
FULL_GROUPS = [["union", "union_distinct", "in", "exists"], ["derived", "rollup", "sets", "cte"]]


@pytest.mark.parametrize("forms", FULL_GROUPS, ids=lambda g: "-".join(g))
async def test_full_refresh_forms_answer_and_rebuild(matrix, forms):
    spark, svc, ctx = matrix["spark"], matrix["svc"], matrix["ctx"]
    t, names = _table_copy(matrix, "full", forms)

    def check(stage: str) -> None:
        for form in forms:
            assert len(svc.catalog.visible_segments(ctx.current_db, names[form])) == 1, stage
            for q in FULL_FORMS[form][1]:
                q = q.format(t=t)
                dec = matrix["select"](ctx, q)
                assert isinstance(dec, Rewrite) and f"{names[form]}_table" in dec.sql, (stage, q, dec)
                assert _same(_answer(spark, dec.sql), _answer(spark, q)), (stage, q, dec.sql)
        miss = matrix["select"](ctx, FULL_MISS.format(t=t))
        assert not any(f"{n}_table" in getattr(miss, "sql", "") for n in names.values()), miss

    for form in forms:
        await matrix["ddl"](ctx, f"CREATE DATAMAP {names[form]} AS {FULL_FORMS[form][0].format(t=t)}"
                            ).runner(_no_upstream)
    try:
        shown = {r[0]: r for r in (await matrix["ddl"](ctx, "SHOW DATAMAP").runner(_no_upstream)).rows}
        for name in names.values():
            assert shown[name][-2] == "full" and "has no increment" in shown[name][-1], shown[name]
        check("built")
        spark.sql(f"INSERT INTO {t} VALUES {MORE_ROWS}")
        svc.after_load(t)
        check("appended")
        spark.sql(f"INSERT OVERWRITE TABLE {t} SELECT c, n, m, x, q FROM {matrix['t']} WHERE n > 1")
        svc.after_load(t, overwrite=True)
        check("overwritten")
    finally:
        for name in names.values():
            await matrix["ddl"](ctx, f"DROP DATAMAP IF EXISTS {name}").runner(_no_upstream)
