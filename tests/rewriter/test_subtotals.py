"""rewriter/subtotals.py beyond the fixtures: definitions, exact grain, blocks, markers."""
from __future__ import annotations

import pytest

from rewriter import Candidate, DatamapDefinitionError, compile_datamap, rewrite
from tests.support.rewriter_cases import SCHEMA

SALES = "SELECT country, city, sum(quantity) AS q, count(*) AS cnt FROM sales GROUP BY country, city"


def _rewrite(sql: str, definition: str = SALES):
    return rewrite(sql, [Candidate(compile_datamap("agg_sales", definition, SCHEMA, "default"))],
                   SCHEMA, "default")


def test_a_datamap_definition_with_subtotals_is_refreshed_in_full():
    d = compile_datamap("r", "SELECT country, sum(quantity) AS q FROM sales GROUP BY ROLLUP(country)",
                        SCHEMA, "default")
    assert d.refresh == "full" and "ROLLUP" in d.refresh_reason
    with pytest.raises(DatamapDefinitionError) as err:   # what a full rebuild cannot keep either
        compile_datamap("r", "SELECT country, sum(quantity) AS q, rank() OVER (ORDER BY "
                        "sum(quantity)) AS k FROM sales GROUP BY ROLLUP(country)", SCHEMA, "default")
    assert err.value.sqlstate == "0A000" and "window" in str(err.value)


def test_the_exact_grain_still_reaggregates_and_keeps_having():
    # the datamap's grain is the finest set, but the subtotal rows are many datamap rows:
    # the stored column must not be read as the total, nor HAVING a filter of its rows
    res = _rewrite("SELECT country, city, sum(quantity) AS s FROM sales "
                   "GROUP BY ROLLUP(country, city) HAVING sum(quantity) > 10")
    assert res.rewritten, res.skipped
    assert "SUM(agg_sales.q) AS s" in res.sql
    assert "SUM(agg_sales.q) > 10 AS dm_having" in res.sql and res.sql.endswith("WHERE dm_having")


def test_a_subtotal_block_in_a_union_branch_is_rewritten_alone():
    res = _rewrite("SELECT country, sum(quantity) AS s FROM sales GROUP BY ROLLUP(country) "
                   "UNION ALL SELECT 'x' AS country, 1 AS s")
    assert res.rewritten, res.skipped
    assert "GROUP BY ROLLUP (agg_sales.country)" in res.sql
    assert res.sql.endswith("SELECT 'x' AS country, 1 AS s")


def test_no_marker_is_left_in_any_rewrite():
    queries = [
        "SELECT CASE WHEN grouping(country) = 1 THEN 'all' ELSE country END AS c, "
        "grouping_id(country, city) AS g, sum(quantity) AS s FROM sales GROUP BY CUBE(country, city) "
        "HAVING grouping(city) = 0 ORDER BY grouping_id(country, city), c",
        "SELECT upper(country) AS c, count(*) AS n FROM sales GROUP BY country, city WITH ROLLUP ORDER BY upper(country)",
    ]
    for q in queries:
        res = _rewrite(q)
        assert res.rewritten, (q, res.skipped)
        assert "__dm_group" not in res.sql.lower()


def test_a_spelling_spark_would_not_match_is_refused():
    # an output that matches no grouping expression as written reads an ungrouped column
    # (Spark rejects the original): never derived from the datamap's grouping column
    res = _rewrite("SELECT lower(country) AS c, count(*) AS n FROM sales GROUP BY ROLLUP(upper(country))")
    assert not res.rewritten
    assert "neither a grouping expression" in res.skipped["default.agg_sales"]


def test_having_and_order_by_names_that_clash_are_refused():
    res = _rewrite("SELECT country, sum(quantity) AS dm_having FROM sales GROUP BY ROLLUP(country) "
                   "HAVING count(*) > 1")
    assert not res.rewritten
    assert "cannot be applied around them" in res.skipped["default.agg_sales"]


def test_distinct_with_an_order_by_expression_is_refused():
    res = _rewrite("SELECT DISTINCT country FROM sales GROUP BY ROLLUP(country, city) "
                   "ORDER BY grouping_id()")
    assert not res.rewritten
    assert "DISTINCT with an ORDER BY expression" in res.skipped["default.agg_sales"]
