"""Serving tier: several relations in one answer -- joins between datamap reads, derived
tables, CTEs, IN / EXISTS / scalar subqueries, and the series-limit and top-N joins BI tools
write (proxy/serving/relations.py) -- run by Spark and by the local engine from the SAME SQL
text, compared on names, Spark types and rows (or both raising).

Two datamap tables, relA.t and relB.t, written by Spark as Parquet partitioned by segment.
Edge values: NULL join keys on both sides, duplicate keys, keys on one side only, an int
key against a bigint one, decimal keys of different scales (1.50 = 1.5000), a string key
against an int one (refused), -0.0 / 0.0 and NaN double keys, an empty side (segment 9 has
no files), NULLs in an IN subquery. Segment 2 of each table must never be read.
"""
from __future__ import annotations

import pytest
import sqlglot

from proxy.serving.translate import NotServable, translate
from tests.support.serving import (  # noqa: F401 - engine: a fixture
    both_outcomes, check_outcome, engine, segmented_table, typed_frame,
)

pytestmark = pytest.mark.spark

A_COLS = {"k": "int", "ks": "string", "kd": "decimal(10,2)", "x": "double",
          "v": "decimal(10,2)"}
B_COLS = {"k": "bigint", "ks": "string", "kd": "decimal(12,4)", "ki": "string",
          "x": "double", "w": "int"}
_N = None
A_ROWS = [  # k, ks, kd, x, v, segment
    (1, "a", "1.50", "0.0", "10.00", "0"), (1, "a", "1.50", "-0.0", "20.00", "0"),
    (2, "b", "2.00", "NaN", "30.00", "0"), (_N, _N, _N, _N, "40.00", "0"),
    (3, "c", "3.25", "1.5", "50.00", "1"), (4, "1", "0.00", "2.5", _N, "1"),
    (1, "a", "1.50", "0.0", "-5.00", "1"),
    (1, "a", "1.50", "0.0", "999.00", "2"),     # never visible
]
B_ROWS = [  # k, ks, kd, ki, x, w, segment
    (1, "a", "1.5000", "1", "-0.0", 100, "0"), (1, "a", "1.5000", "1", "0.0", 200, "0"),
    (2, "B", "2.0001", "2", "NaN", 300, "0"), (_N, _N, _N, _N, _N, 400, "0"),
    (5, "e", "3.2500", " 3", "1.5", 500, "1"), (3, "c", "3.25", "x", "2.5", _N, "1"),
    (2, "b", "2.0000", "2", "NaN", 999, "2"),    # never visible
]


def _read(db: str, cols, alias: str, segments="'0', '1'") -> str:
    return (f"(SELECT {', '.join(cols)} FROM {db}.t WHERE dm_segment_id IN ({segments})) "
            f"AS {alias}")


A, B = _read("relA", A_COLS, "a"), _read("relB", B_COLS, "b")
B_EMPTY = _read("relB", B_COLS, "b", "'9'")
A2 = _read("relA", A_COLS, "a2")
ROWS_, ORDERED, REFUSED, ERROR = "rows", "ordered", "refused", "error"

CASES = [
    ("inner join of int and bigint keys: duplicates multiply, NULL keys never match",
     f"SELECT a.k AS ak, b.k AS bk, a.v AS v, b.w AS w FROM {A} JOIN {B} ON a.k = b.k", ROWS_),
    ("left outer join", f"SELECT a.k AS ak, b.k AS bk, a.v AS v, b.w AS w FROM {A} "
     f"LEFT OUTER JOIN {B} ON a.k = b.k", ROWS_),
    ("right join", f"SELECT a.k AS ak, b.k AS bk, b.w AS w FROM {A} RIGHT JOIN {B} "
     "ON a.k = b.k", ROWS_),
    ("full outer join on two keys", f"SELECT a.k AS ak, a.ks AS aks, b.ks AS bks, b.w AS w "
     f"FROM {A} FULL OUTER JOIN {B} ON a.k = b.k AND a.ks = b.ks", ROWS_),
    ("<=>: NULL keys match", f"SELECT a.v AS v, b.w AS w FROM {A} JOIN {B} ON a.ks <=> b.ks",
     ROWS_),
    ("decimal keys of different scales (1.50 = 1.5000)", f"SELECT a.kd AS akd, b.kd AS bkd, "
     f"a.v AS v, b.w AS w FROM {A} FULL JOIN {B} ON a.kd = b.kd", ROWS_),
    ("double keys: -0.0 = 0.0, NaN = NaN, each side's value as stored",
     f"SELECT a.x AS ax, b.x AS bx, a.v AS v, b.w AS w FROM {A} JOIN {B} ON a.x = b.x", ROWS_),
    ("a string key against an int one (not proven)", f"SELECT a.v AS v FROM {A} JOIN {B} "
     "ON a.k = b.ki", REFUSED),
    ("an empty side: inner", f"SELECT a.k AS k, b.w AS w FROM {A} JOIN {B_EMPTY} "
     "ON a.k = b.k", ROWS_),
    ("an empty side: left, aggregated", f"SELECT a.k AS k, count(b.w) AS n, sum(a.v) AS s, "
     f"max(b.ks) AS m FROM {A} LEFT JOIN {B_EMPTY} ON a.k = b.k GROUP BY a.k", ROWS_),
    ("aggregate over a full join, grouped by a key of the outer side, ordered",
     f"SELECT b.ks AS ks, sum(a.v) AS sv, sum(b.w) AS sw, count(*) AS n FROM {A} FULL JOIN "
     f"{B} ON a.k = b.k GROUP BY b.ks ORDER BY ks DESC", ORDERED),
    ("three relations, a cross join", f"SELECT a.k AS ak, b.w AS w, a2.v AS v2 FROM {A} "
     f"JOIN {B} ON a.k = b.k CROSS JOIN {A2} WHERE a2.k = 3", ROWS_),
    ("Superset series limit: JOIN onto the top 2 by a measure",
     f"SELECT a.ks AS ks, sum(a.v) AS s FROM {A} JOIN (SELECT a.ks AS ks__, sum(a.v) AS mme "
     f"FROM {A} GROUP BY a.ks ORDER BY mme DESC LIMIT 2) AS series_limit "
     "ON a.ks = series_limit.ks__ GROUP BY a.ks ORDER BY s DESC LIMIT 10000", ORDERED),
    ("Tableau top-N: INNER JOIN (...) t0 with ordinals",
     f"SELECT a.k AS k, sum(a.v) AS s FROM {A} INNER JOIN (SELECT b.k AS k, sum(b.w) AS x0 "
     f"FROM {B} GROUP BY 1 ORDER BY x0 DESC LIMIT 3) t0 ON (a.k = t0.k) GROUP BY 1", ROWS_),
    ("Power BI top-N inside its OTBL wrapper",
     f"SELECT * FROM (SELECT a.k AS k, sum(a.v) AS a0 FROM {A} INNER JOIN (SELECT a.k AS k, "
     f"sum(a.v) AS a0 FROM {A} GROUP BY a.k ORDER BY a0 DESC LIMIT 2) AS TOPN "
     "ON a.k = TOPN.k GROUP BY a.k) AS OTBL WHERE NOT OTBL.a0 IS NULL LIMIT 1000001", ROWS_),
    ("* and r.* over a join keep each side's names and order (a name twice)",
     f"SELECT *, b.* FROM (SELECT a.k AS K, a.v AS `Sum v` FROM {A}) AS x JOIN {B} "
     "ON x.K = b.k", ROWS_),
    ("* over CTEs (a never-read one reads a table that is no datamap)",
     f"WITH unread AS (SELECT * FROM relA.t), c AS (SELECT a.k AS K, sum(a.v) AS `S v` "
     f"FROM {A} GROUP BY a.k) SELECT c.*, * FROM c JOIN {B} ON c.K = b.k", ROWS_),
    ("* over a table", "SELECT * FROM relA.t", REFUSED),
    ("Power BI top-N, the outer SELECT named", f"SELECT OTBL.k AS k, OTBL.a0 AS a0 FROM "
     f"(SELECT a.k AS k, sum(a.v) AS a0 FROM {A} INNER JOIN (SELECT a.k AS k, sum(a.v) AS a0 "
     f"FROM {A} GROUP BY a.k ORDER BY a0 DESC LIMIT 2) AS TOPN ON a.k = TOPN.k GROUP BY a.k) "
     "AS OTBL WHERE NOT OTBL.a0 IS NULL LIMIT 1000001", ROWS_),
    ("a CTE read twice", f"WITH top AS (SELECT b.k AS k, sum(b.w) AS w FROM {B} GROUP BY b.k) "
     "SELECT t1.k AS k, t1.w AS w, t2.w AS w2 FROM top t1 LEFT JOIN top AS t2 "
     "ON t1.k = t2.k + 1", ROWS_),
    ("CTEs reading earlier CTEs, joined to a read", f"WITH c1 AS (SELECT a.k AS k, a.v AS v "
     f"FROM {A}), c2 AS (SELECT c1.k AS k, sum(c1.v) AS s FROM c1 GROUP BY c1.k) "
     f"SELECT c2.k AS k, c2.s AS s, b.w AS w FROM c2 JOIN {B} ON c2.k = b.k", ROWS_),
    ("IN (SELECT ...) of bigints with a NULL among them",
     f"SELECT a.k AS k, a.v AS v FROM {A} WHERE a.v > 0 AND (a.k IN (SELECT b.k FROM {B}))",
     ROWS_),
    ("IN (SELECT ...) as a value (Spark answers false where SQL says NULL)",
     f"SELECT a.k AS k, a.k IN (SELECT b.k FROM {B}) AS hit FROM {A}", REFUSED),
    ("NOT over an AND holding IN (SELECT ...)", f"SELECT a.k AS k FROM {A} "
     f"WHERE NOT (a.k IN (SELECT b.k FROM {B}) AND a.v > 0)", REFUSED),
    ("NOT IN (SELECT ...) with a NULL: no row passes",
     f"SELECT a.k AS k FROM {A} WHERE a.k NOT IN (SELECT b.k FROM {B})", ROWS_),
    ("NOT IN (SELECT ...) without NULLs",
     f"SELECT a.k AS k FROM {A} WHERE a.k NOT IN (SELECT b.k FROM {B} WHERE b.k IS NOT NULL)",
     ROWS_),
    ("IN (SELECT ...) of decimals of different scales",
     f"SELECT a.kd AS kd, a.v AS v FROM {A} WHERE a.kd IN (SELECT b.kd FROM {B})", ROWS_),
    ("NOT IN an empty subquery keeps NULL keys too",
     f"SELECT a.kd AS kd, a.v AS v FROM {A} WHERE NOT a.kd IN (SELECT b.kd FROM {B_EMPTY})",
     ROWS_),
    ("IN (SELECT ...) in HAVING", f"SELECT a.k AS k, sum(a.v) AS s FROM {A} GROUP BY a.k "
     f"HAVING a.k IN (SELECT b.k FROM {B}) OR sum(a.v) > 0", REFUSED),
    ("IN (SELECT ...) comparing an int with a string (not proven)",
     f"SELECT a.k AS k FROM {A} WHERE a.k IN (SELECT b.ki FROM {B})", REFUSED),
    ("EXISTS / NOT EXISTS, empty and not", f"SELECT a.k AS k FROM {A} WHERE EXISTS "
     f"(SELECT * FROM {B} WHERE b.w > 400) AND NOT EXISTS (SELECT 1 FROM {B_EMPTY})", ROWS_),
    ("a correlated EXISTS", f"SELECT a.k AS k FROM {A} WHERE EXISTS (SELECT 1 FROM {B} "
     "WHERE b.k = a.k)", REFUSED),
    ("a scalar subquery: share of the total", f"SELECT a.ks AS ks, sum(a.v) / (SELECT sum(b.w) "
     f"FROM {B}) AS share, (SELECT max(b.kd) FROM {B_EMPTY}) AS none FROM {A} GROUP BY a.ks",
     ROWS_),
    ("a scalar subquery with GROUP BY (may return several rows)", f"SELECT a.k AS k FROM {A} "
     f"WHERE a.k = (SELECT max(b.k) FROM {B} GROUP BY b.ks)", REFUSED),
    ("a non-equi join", f"SELECT a.k AS ak, b.k AS bk FROM {A} JOIN {B} ON a.k < b.k",
     ROWS_),
    ("a left join on a range and an OR: unmatched rows padded", f"SELECT a.k AS ak, "
     f"b.w AS w FROM {A} LEFT JOIN {B} ON a.kd <= b.kd AND (a.x = b.x OR b.w > 300)", ROWS_),
    ("a full join whose ON filters one side (NULL never matches)", f"SELECT a.k AS ak, "
     f"b.k AS bk FROM {A} FULL JOIN {B} ON a.k = b.k AND b.ks <> 'a' AND a.v > 0", ROWS_),
    ("ON comparing a string with an int (not proven)", f"SELECT a.k AS k FROM {A} JOIN {B} "
     "ON a.k = b.k AND a.ks > b.w", REFUSED),
    ("USING (Spark merges the key)", f"SELECT a.v AS v FROM {A} JOIN {B} USING (k)", REFUSED),
    ("LEFT SEMI JOIN", f"SELECT a.v AS v FROM {A} LEFT SEMI JOIN {B} ON a.k = b.k", REFUSED),
    ("an unqualified column in both relations (Spark: ambiguous)",
     f"SELECT k FROM {A} JOIN {B} ON a.k = b.k", REFUSED),
    ("a sum over a join that overflows raises in both", f"SELECT sum(b.k * 4611686018427387904)"
     f" AS s FROM {A} JOIN {B} ON a.k = b.k", ERROR),
]


@pytest.fixture(scope="module")
def tables():
    with segmented_table(typed_frame(A_COLS, A_ROWS), "relA") as (spark, a_files), \
            segmented_table(typed_frame(B_COLS, B_ROWS), "relB") as (_, b_files):
        yield spark, {"rela.t": a_files, "relb.t": b_files}


@pytest.mark.parametrize("title,sql,expect", CASES, ids=[c[0] for c in CASES])
def test_served_like_spark(title, sql, expect, tables, engine):
    spark, files = tables

    def files_of(table, ids):
        assert "2" not in ids, "the hidden segment was asked for"
        return [f for sid in ids for f in files[table].get(sid, [])]
    try:
        plan = translate(sqlglot.parse_one(sql, read="spark"),
                         {"relA.t": A_COLS, "relB.t": B_COLS}, files_of)
    except NotServable as e:
        assert expect == REFUSED, f"not servable: {e}"
        return
    assert expect != REFUSED, f"served, but the case says refused: {plan.sql}"
    check_outcome(both_outcomes(spark, engine, sql, plan), plan, expect)
