"""Serving tier: base tables read whole in a served answer (proxy/serving/basetables.py) --
a datamap joined with a dimension table, and the narrow-window union's base rows -- run by
Spark and by the local engine from the SAME SQL text, compared on names, Spark types and
rows (or both raising; or the engine raising where Spark answers: the proxy then asks Spark).

The base tables are real Spark tables; the tier sees them as production does: their layout
from pipeline.table_layout, their files from the real freshness guard's listing
(FreshnessGuard.table_files), the byte budget from newfiles.BaseReads.
  dimP.region   Parquet: NULL and duplicate keys, a key the datamap lacks, decimals, dates,
                -0.0 / NaN doubles, NULL strings;
  dimP.parts    Parquet partitioned by (p string, n int), a NULL partition value
                (__HIVE_DEFAULT_PARTITION__);
  dimC.region   CSV with a header: plain fields, empty fields (NULL);
  dimC.quoted   CSV whose fields Spark wrote quoted: the engine raises, Spark answers;
  dimC.stamps   CSV with a timestamp column: refused;
  dimO.region   ORC: refused (its files are not read here).
"""
from __future__ import annotations

import pytest
import sqlglot

from proxy.datamaps.freshness.guard import FreshnessGuard
from proxy.serving.newfiles import BaseReads
from proxy.serving.translate import NotServable, translate
from tests.support.serving import (  # noqa: F401 - engine: a fixture
    both_outcomes, check_outcome, engine, segmented_table, typed_frame,
)

pytestmark = pytest.mark.spark

A_COLS = {"k": "int", "ks": "string", "d": "date", "v": "decimal(10,2)", "n": "bigint"}
_N = None
A_ROWS = [  # k, ks, d, v, n, segment
    (1, "a", "2024-01-31", "10.00", 1, "0"), (2, "b", "2024-02-29", "-0.50", 2, "0"),
    (_N, _N, _N, "40.00", 3, "0"), (3, "c", "2023-12-31", "0.01", 1, "1"),
    (4, "d", "2024-03-01", _N, 5, "1"), (1, "a", "2024-01-31", "999.00", 9, "2"),  # hidden
]
REGION = [  # k, name, share decimal(5,3), since date, x double
    "(1, 'one', 0.125, DATE '2020-01-01', 0.0)", "(1, 'uno', -0.125, NULL, -0.0)",
    "(2, NULL, 1.000, DATE '1999-12-31', CAST('NaN' AS DOUBLE))",
    "(NULL, 'nobody', NULL, DATE '2024-02-29', 1.5)", "(9, 'nine', 99.999, NULL, NULL)",
]
D = "(SELECT k, ks, d, v, n FROM relD.t WHERE dm_segment_id IN ('0', '1')) AS m"
ROWS_, ORDERED, REFUSED, ERROR, FALLBACK = "rows", "ordered", "refused", "error", "fallback"

CASES = [
    ("Parquet dimension, inner join: duplicates multiply, NULL keys never match",
     f"SELECT m.k AS k, r.name AS name, r.share AS share, m.v AS v FROM {D} "
     "JOIN dimP.region AS r ON m.k = r.k", ROWS_),
    ("Parquet dimension, left join aggregated by a dimension column",
     f"SELECT r.name AS name, sum(m.v) AS v, count(*) AS c, max(r.since) AS s FROM {D} "
     "LEFT JOIN dimP.region r ON m.k = r.k GROUP BY r.name ORDER BY name", ORDERED),
    ("Parquet dimension, right join: the dimension's unmatched rows",
     f"SELECT r.k AS rk, r.x AS x, m.n AS n FROM {D} RIGHT JOIN dimP.region AS r "
     "ON m.k = r.k", ROWS_),
    ("a dimension named without an alias, a filter on it",
     f"SELECT region.name AS name, m.n AS n FROM {D} JOIN dimP.region "
     "ON m.k = region.k WHERE region.share > 0", ROWS_),
    ("a dimension in an IN (SELECT ...) filter",
     f"SELECT m.ks AS ks, m.n AS n FROM {D} WHERE m.k IN (SELECT r.k FROM dimP.region r "
     "WHERE r.name IS NOT NULL)", ROWS_),
    ("narrow-window union: the datamap's rows UNION ALL the base rows outside its window",
     "SELECT u.ks AS ks, sum(u.n) AS n FROM (SELECT k, ks, d, v, n FROM relD.t WHERE "
     "dm_segment_id IN ('0', '1') UNION ALL SELECT r.k AS k, r.name AS ks, r.since AS d, "
     "CAST(sum(r.share) AS DECIMAL(10,2)) AS v, count(*) AS n FROM dimP.region AS r WHERE "
     "NOT COALESCE(r.since >= CAST('2000-01-01' AS DATE), FALSE) GROUP BY r.k, r.name, "
     "r.since) AS u GROUP BY u.ks", ROWS_),
    ("partitioned Parquet: partition values typed from the path, NULL partition",
     f"SELECT p.p AS p, p.n AS pn, p.w AS w, m.v AS v FROM {D} JOIN dimP.parts AS p "
     "ON m.k = p.k", ROWS_),
    ("partitioned Parquet, a filter on a partition column",
     f"SELECT sum(p.w) AS w, count(*) AS c FROM {D} JOIN dimP.parts p ON m.k = p.k "
     "WHERE p.p = 'x' OR p.n IS NULL", ROWS_),
    ("CSV dimension: plain fields, empty ones NULL",
     f"SELECT m.k AS k, c.name AS name, c.amount AS amount, c.day AS day, c.ok AS ok, "
     f"c.x AS x FROM {D} LEFT JOIN dimC.region c ON m.k = c.k", ROWS_),
    ("CSV dimension aggregated", f"SELECT c.name AS name, sum(c.amount) AS s, "
     f"sum(m.n) AS n FROM {D} JOIN dimC.region AS c ON m.k = c.k GROUP BY c.name", ROWS_),
    ("CSV fields Spark wrote quoted: the engine raises, Spark answers",
     f"SELECT m.k AS k, q.name AS name FROM {D} JOIN dimC.quoted q ON m.k = q.k", FALLBACK),
    ("a timestamp column of a CSV table (Spark parses it in the session zone)",
     f"SELECT m.k AS k, s.at AS at FROM {D} JOIN dimC.stamps s ON m.k = s.k", REFUSED),
    ("an ORC dimension", f"SELECT m.k AS k, o.name AS name FROM {D} "
     "JOIN dimO.region o ON m.k = o.k", REFUSED),
    ("a dimension joined on a key and a filter of its own (ON, not WHERE)",
     f"SELECT m.k AS k, r.name AS name FROM {D} LEFT JOIN dimP.region r ON r.share > 0 "
     "AND m.k = r.k", ROWS_),
    ("a non-equi join with a dimension", f"SELECT m.k AS k, r.k AS rk FROM {D} "
     "JOIN dimP.region r ON m.k < r.k", ROWS_),
    ("an overflowing sum over a dimension join raises in both",
     f"SELECT sum(m.n * 4611686018427387904) AS s FROM {D} JOIN dimP.region r "
     "ON m.k = r.k", ERROR),
]



def _csv(spark, root, name: str, columns: str, text: str) -> None:
    path = root / name
    path.mkdir(parents=True)
    (path / "part-0.csv").write_text(text)
    spark.sql(f"CREATE TABLE dimC.{name} ({columns}) USING csv OPTIONS (header 'true') "
              f"LOCATION '{path}'")


def _base_tables(spark, tmp_path_factory) -> list[str]:
    root = tmp_path_factory.mktemp("base-tables")
    for db in ("dimP", "dimC", "dimO"):
        spark.sql(f"CREATE DATABASE {db} LOCATION '{root / db}'")
    region = "k int, name string, share decimal(5,3), since date, x double"
    spark.sql(f"CREATE TABLE dimP.region ({region}) USING parquet")
    spark.sql(f"INSERT INTO dimP.region VALUES {', '.join(REGION)}")
    spark.sql(f"CREATE TABLE dimO.region ({region}) USING orc")
    spark.sql(f"INSERT INTO dimO.region VALUES {', '.join(REGION)}")
    spark.sql("CREATE TABLE dimP.parts (k int, w bigint, p string, n int) USING parquet "
              "PARTITIONED BY (p, n)")
    spark.sql("INSERT INTO dimP.parts VALUES (1, 10, 'x', 1), (1, 20, 'y', NULL), "
              "(2, -5, NULL, 2), (3, 7, 'x', 1), (NULL, 1, 'x', 1)")
    _csv(spark, root, "region", "k int, name string, amount decimal(6,2), day date, "
         "ok boolean, x double",
         "k,name,amount,day,ok,x\n1,one,1.50,2024-02-29,true,1.0E-5\n1,uno,-0.01,,FALSE,-2.5\n"
         "2,,,2023-01-01,,\n,nobody,3,2020-01-01,True,0\n")
    _csv(spark, root, "quoted", "k int, name string", 'k,name\n1,"a,b"\n2,plain\n')
    _csv(spark, root, "stamps", "k int, at timestamp", "k,at\n1,2024-01-01 00:00:00\n")
    return ["dimp.region", "dimo.region", "dimp.parts", "dimc.region", "dimc.quoted",
            "dimc.stamps"]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from pipeline.files import table_layout
    with segmented_table(typed_frame(A_COLS, A_ROWS), "relD") as (spark, files):
        tables = _base_tables(spark, tmp_path_factory)
        guard = FreshnessGuard(lambda t: table_layout(spark, t), lambda _t: None)
        guard.load_layouts(tables)
        try:
            yield spark, files, guard
        finally:
            for db in ("dimP", "dimC", "dimO"):
                spark.sql(f"DROP DATABASE IF EXISTS {db} CASCADE")


@pytest.mark.parametrize("title,sql,expect", CASES, ids=[c[0] for c in CASES])
def test_served_like_spark(title, sql, expect, world, engine):
    spark, files, guard = world

    def files_of(table, ids):
        assert "2" not in ids, "the hidden segment was asked for"
        return [f for sid in ids for f in files.get(sid, [])]
    reads = BaseReads(guard.layout, guard.table_files, 1 << 30, [])
    try:
        plan = translate(sqlglot.parse_one(sql, read="spark"), {"relD.t": A_COLS}, files_of,
                         "UTC", reads.new_files, reads.table)
    except NotServable as e:
        assert expect == REFUSED, f"not servable: {e}"
        return
    assert expect != REFUSED, f"served, but the case says refused: {plan.sql}"
    check_outcome(both_outcomes(spark, engine, sql, plan), plan, expect)


def test_budget_names_the_setting(world):
    _spark, files, guard = world
    reads = BaseReads(guard.layout, guard.table_files, 10, [])
    with pytest.raises(NotServable, match=r"the files of dimp\.region are \d+ bytes, over "
                                          r"\[serving\] max_base_bytes \(10\)"):
        translate(sqlglot.parse_one(CASES[0][1], read="spark"), {"relD.t": A_COLS},
                  lambda t, ids: files["0"], "UTC", reads.new_files, reads.table)
