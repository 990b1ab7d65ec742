"""Wrapped queries (rewriter/flatten.py): a wrapper BI tools add around a base table must
not change the rewriter's answer. Every single-block fixture case is run again with each
of its tables wrapped two deep, Superset style, with an ORDER BY inside:
`(SELECT * FROM (SELECT * FROM t ORDER BY 1) AS a) AS a` — a must-hit case must give
exactly its expected SQL, a must-not-hit case must still come back unchanged. The
bi_wrapped*.yaml fixtures hold the tool-specific shapes and refusals; the Spark tier runs
their must-hit cases on Spark."""
from __future__ import annotations

import pytest
import sqlglot
from sqlglot import exp

from rewriter import rewrite
from rewriter.flatten import flatten_tree
from rewriter.normalize import DIALECT, keep_spelled_formats, make_schema, parse, qualify_tree
from tests.support.rewriter_cases import CASES, SCHEMA, candidates_for


def _wrapped(sql: str) -> str | None:
    tree = keep_spelled_formats(sqlglot.parse_one(sql, read=DIALECT))   # to_date(x, 'fmt')
    if not isinstance(tree, exp.Select) or len(list(tree.find_all(exp.Select))) != 1 \
            or "timeseries" in sql.lower() or tree.args.get("qualify") \
            or "var_samp" in sql.lower():
        # sqlglot writes QUALIFY for Spark as a subquery, var_samp as variance (another
        # column name): another query
        return None
    for t in list(tree.find_all(exp.Table)):
        name = t.alias_or_name
        inner = sqlglot.parse_one(f"SELECT * FROM (SELECT * FROM {t.sql('spark')} ORDER BY 1) AS {name}",
                                  read="spark")
        t.replace(exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier(name))))
    return tree.sql(DIALECT)


WRAPPED = [(s, i, c, w) for s, i, c in CASES if not c.get("current_db")
           for w in [_wrapped(c["query"])] if w is not None]


def test_enough_cases_are_wrapped():
    assert sum(not s.endswith("__nomatch") for s, *_ in WRAPPED) >= 100
    assert sum(s.endswith("__nomatch") for s, *_ in WRAPPED) >= 50


@pytest.mark.parametrize("stem,i,case,sql", WRAPPED, ids=[f"{s}[{i}]" for s, i, *_ in WRAPPED])
def test_a_wrapper_changes_no_answer(stem, i, case, sql):
    result = rewrite(sql, candidates_for(case), SCHEMA, "default")
    if stem.endswith("__nomatch"):
        assert not result.rewritten, f"{case['title']}: rewritten to {result.sql}"
        assert result.sql == sql
    else:
        assert result.rewritten, f"{case['title']}: not rewritten: {result.skipped}"
        assert result.sql == case["expected"], case["title"]


def _flat(sql: str) -> tuple[bool, str, list[str]]:
    tree = parse(sql)
    qualify_tree(tree, make_schema(SCHEMA), "default")
    notes: list[str] = []
    changed = flatten_tree(tree, notes)
    return changed, tree.sql("spark"), notes


def test_a_cte_named_after_its_table_reads_the_table():
    changed, sql, _ = _flat("WITH sales AS (SELECT * FROM sales WHERE year > 2020) "
                            "SELECT country, sum(quantity) AS q FROM sales GROUP BY country")
    assert changed
    assert "FROM default.sales AS sales WHERE (sales.year > 2020)" in sql


ALIAS_CASES = [
    pytest.param("SELECT t.c, sum(t.q) AS s FROM (SELECT t.country AS c, t.quantity AS q "
                 "FROM sales AS t WHERE t.city = 'x') AS t GROUP BY t.c",
                 "SELECT t.country AS c, SUM(t.quantity) AS s FROM default.sales AS t "
                 "WHERE (t.city = 'x') GROUP BY t.country", id="inner alias = outer alias"),
    pytest.param("SELECT t.c, u.n FROM (SELECT country AS c, item_id FROM sales) AS t "
                 "JOIN (SELECT t.item_id, t.name AS n FROM item AS t) AS u ON t.item_id = u.item_id",
                 "SELECT t.country AS c, u.name AS n FROM default.sales AS t "
                 "JOIN default.item AS u ON t.item_id = u.item_id", id="the alias reused beside it"),
]


@pytest.mark.parametrize("sql,expected", ALIAS_CASES)
def test_no_alias_is_captured(sql, expected):
    changed, out, _ = _flat(sql)
    assert changed
    assert out == expected


def test_a_correlated_subquery_beside_the_wrapper_keeps_it():
    changed, _, notes = _flat("SELECT v.country FROM (SELECT country, item_id FROM sales WHERE year > 0) AS v "
                              "WHERE EXISTS (SELECT 1 FROM item i WHERE i.item_id = v.item_id)")
    assert not changed
    assert notes == ["derived table v kept as written (a subquery beside it may be correlated on it)"]
