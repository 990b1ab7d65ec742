"""rewriter/advise/shape.py: the query log's notion of "the same query"."""
from __future__ import annotations

import pytest

from rewriter.advise.shape import fold_tokens, shape_of

SAME = [
    ("literals and IN-list lengths",
     "SELECT region, sum(amount) FROM Sales WHERE day >= '2026-01-01' AND id IN (1, 2, 3)",
     "select region,SUM(amount) from sales where day>='2027-12-31' and id in (9)"),
    ("negative numbers, booleans, spacing",
     "SELECT a FROM t WHERE b = -5 AND c = true\n LIMIT 10",
     "select a from t where b = 7 and c = false limit 500"),
    ("quoted identifiers fold like bare ones", "SELECT `Col` FROM `T`", "SELECT col FROM t"),
    ("comments", "SELECT a /* dashboard 7 */ FROM t -- tile 3", "SELECT a FROM t"),
]
DIFFERENT = [
    ("another column grouped", "SELECT a, count(*) FROM t GROUP BY a",
     "SELECT b, count(*) FROM t GROUP BY b"),
    ("another filter column", "SELECT a FROM t WHERE b = 1", "SELECT a FROM t WHERE c = 1"),
    ("another table", "SELECT a FROM t", "SELECT a FROM u"),
]


@pytest.mark.parametrize("title,a,b", SAME, ids=[c[0] for c in SAME])
def test_same_shape(title, a, b):
    assert shape_of(a).hash == shape_of(b).hash
    assert shape_of(a).text == shape_of(b).text


@pytest.mark.parametrize("title,a,b", DIFFERENT, ids=[c[0] for c in DIFFERENT])
def test_different_shape(title, a, b):
    assert shape_of(a).hash != shape_of(b).hash


def test_text_hash_and_tables():
    sh = shape_of("WITH x AS (SELECT * FROM db2.T) SELECT * FROM x JOIN y ON x.a = y.a "
                  "WHERE x.s = 'secret'", "shop")
    assert sh.text == ("with x as (select * from db2.t) select * from x join y on x.a = y.a "
                       "where x.s = ?")
    assert sh.tables == ("db2.t", "shop.y")           # the CTE is no table
    assert len(sh.hash) == 16 and int(sh.hash, 16) >= 0
    assert "secret" not in sh.text
    # stable across processes and versions: a fixed value
    assert shape_of("SELECT 1").hash == shape_of("select 2").hash == "e1c71d1661ae46e0"


def test_writes_name_their_table():
    assert shape_of("INSERT INTO sales VALUES (1, 'a')", "db").tables == ("db.sales",)


def test_unparseable_statements_get_a_token_shape():
    sh = shape_of("this is (( not SQL 'x' 42")
    assert sh.text == "this is (( not sql ? ?" and sh.tables == ()
    assert fold_tokens("CREATE DATAMAP d AS SELECT a FROM t WHERE b = 'x' -- note\n") == \
        "create datamap d as select a from t where b = ?"
