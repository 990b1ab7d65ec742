"""rewriter/prune/scope.py: every reference to a table becomes its file-restricted subquery,
keeping the alias or the name; CTEs of the same name are left alone."""
from __future__ import annotations

import sqlglot

from rewriter.prune.scope import restrict

SCOPE = {"db.t": ("db.t__src", ["a", "b"], ["file:/x/seg_1/f2.csv", "file:/x/seg_0/f1.csv"])}


def _sql(query: str, scope=SCOPE, db: str = "db") -> str:
    return restrict(sqlglot.parse_one(query, read="spark"), scope, db).sql("spark")


def test_alias_and_name_are_kept():
    assert _sql("SELECT t.a FROM t WHERE b > 1") == (
        "SELECT t.a FROM (SELECT `a`, `b` FROM `db`.`t__src` WHERE _metadata.file_path IN "
        "('file:/x/seg_0/f1.csv', 'file:/x/seg_1/f2.csv')) AS `t` WHERE b > 1")
    assert "AS `x` JOIN" in _sql("SELECT x.a FROM db.t x JOIN u ON x.a = u.a")


def test_every_reference_and_subqueries():
    out = _sql("SELECT a FROM t WHERE a IN (SELECT a FROM t AS s)")
    assert out.count("t__src") == 2 and "AS `s`" in out


def test_no_files_reads_nothing_and_other_tables_stay():
    out = _sql("SELECT a FROM t", {"db.t": ("db.t__src", ["a"], [])})
    assert "WHERE FALSE" in out
    assert _sql("SELECT a FROM other.t") == "SELECT a FROM other.t"


def test_a_cte_of_the_same_name_is_not_the_table():
    out = _sql("WITH t AS (SELECT 1 AS a) SELECT a FROM t")
    assert "t__src" not in out


def test_the_input_is_not_changed():
    tree = sqlglot.parse_one("SELECT a FROM t", read="spark")
    restrict(tree, SCOPE, "db")
    assert tree.sql("spark") == "SELECT a FROM t"
