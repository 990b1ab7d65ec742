"""Pure-logic checks of the join rules (rewriter/outer_joins.py, rewriter/derived.py) that
the fixture files (bi_joins*.yaml) do not pin down one by one."""
from __future__ import annotations

import pytest
import sqlglot
from sqlglot import exp

from rewriter import derived
from rewriter.facts import Pred, _classify
from rewriter.normalize import canonical_predicate
from rewriter.outer_joins import rejected_tables

TYPES = {"tpch.orders.o_orderstatus": "string", "tpch.orders.o_totalprice": "decimal(15,2)"}


def _pred(sql: str) -> Pred:
    [c] = canonical_predicate(sqlglot.parse_one(sql, read="spark"))
    return _classify(c, TYPES)


@pytest.mark.parametrize("sql", [
    "tpch.orders.o_orderstatus = 'F'",
    "tpch.orders.o_orderstatus IN ('F', 'O')",
    "tpch.orders.o_orderstatus <> 'F'",
    "NOT tpch.orders.o_orderstatus IS NULL",
    "tpch.orders.o_orderstatus LIKE 'F%'",
    "CAST(tpch.orders.o_totalprice AS DOUBLE) > tpch.lineitem.l_tax",
    "tpch.orders.o_custkey = tpch.customer.c_custkey",
])
def test_null_rejecting(sql):
    assert "tpch.orders" in rejected_tables(_pred(sql))


@pytest.mark.parametrize("sql", [
    "tpch.orders.o_orderstatus IS NULL",
    "coalesce(tpch.orders.o_orderstatus, 'F') = 'F'",
    "tpch.orders.o_orderstatus <=> 'F'",
    "tpch.orders.o_orderstatus = 'F' OR tpch.orders.o_orderstatus IS NULL",
    "CASE WHEN tpch.orders.o_orderstatus = 'F' THEN TRUE ELSE TRUE END",
    "tpch.lineitem.l_tax IN (SELECT tpch.orders.o_totalprice FROM tpch.orders)",
])
def test_not_null_rejecting(sql):
    assert "tpch.orders" not in rejected_tables(_pred(sql))


def test_correlated_subquery_is_not_marked():
    sel = sqlglot.parse_one(
        "SELECT l.a FROM t AS l WHERE l.a IN (SELECT u.a FROM u AS u WHERE u.b = l.b) "
        "AND l.c IN (SELECT v.c FROM v AS v)", read="spark")
    ids = derived.mark(sel)
    subs = list(sel.find_all(exp.Subquery))
    assert [id(s) in ids for s in subs] == [False, True]


def test_graft_refuses_a_column_the_written_derived_table_does_not_name():
    written = sqlglot.parse_one("SELECT s.k FROM t JOIN (SELECT k, sum(x) FROM u GROUP BY k) s ON t.k = s.k",
                                read="spark")
    rewritten = written.copy()
    derived.mark(rewritten)
    rewritten.expressions[0].replace(exp.column("_col_1", "s"))
    assert not derived.graft(rewritten, written)
    ok = written.copy()
    derived.mark(ok)
    assert derived.graft(ok, written)
    assert ok.find(exp.Subquery) is written.find(exp.Subquery)


@pytest.mark.parametrize("sql,expected", [
    # the inner EXISTS defines `lineitem` for itself only: u.a = lineitem.a is the outer's
    ("SELECT 1 FROM t AS lineitem WHERE k IN (SELECT u.k FROM u AS u WHERE u.a = lineitem.a "
     "AND EXISTS (SELECT 1 FROM t AS lineitem))", True),
    ("SELECT 1 FROM t AS l WHERE k IN (SELECT u.k FROM u AS u WHERE EXISTS "
     "(SELECT 1 FROM v AS v WHERE v.a = u.a))", False),
    ("SELECT 1 FROM t AS l WHERE k IN (SELECT x.k FROM (SELECT w.k FROM w AS w) AS x)", False),
    ("SELECT 1 FROM t AS l WHERE k IN (SELECT 'a' AS k UNION ALL SELECT m.k FROM m AS m "
     "WHERE m.z = l.z)", True),
])
def test_correlation_follows_sql_scoping(sql, expected):
    sub = sqlglot.parse_one(sql, read="spark").args["where"].find(exp.Subquery)
    assert derived.correlated(sub) is expected
