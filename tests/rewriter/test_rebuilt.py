"""Datamaps refreshed in full (rewriter/rebuilt.py) beyond the fixtures: which constructs
make a definition full and say so, what stays refused naming its construct, SHOW
DATAMAP's refresh words, and that a full datamap is never compensated."""
from __future__ import annotations

import pytest

from rewriter import Candidate, DatamapDefinitionError, DatamapIndex, compile_datamap, refresh_mode
from tests.support.rewriter_cases import SCHEMA

U = ("SELECT country, sum(quantity) AS q FROM sales GROUP BY country UNION ALL "
     "SELECT region, sum(size) FROM store GROUP BY region")


@pytest.mark.parametrize("sql,construct", [
    (U, "UNION ALL"),
    ("SELECT country FROM sales UNION SELECT region FROM store", "UNION"),
    ("SELECT country FROM sales INTERSECT SELECT region FROM store", "INTERSECT"),
    ("SELECT country FROM sales EXCEPT SELECT region FROM store", "EXCEPT"),
    ("SELECT country, sum(quantity) AS q FROM sales GROUP BY CUBE(country, city)", "CUBE"),
    ("SELECT country, city, sum(quantity) AS q FROM sales GROUP BY GROUPING SETS ((country), (city))",
     "GROUPING SETS"),
    ("SELECT b.country, sum(b.quantity) AS q FROM (SELECT country, quantity FROM sales) b "
     "GROUP BY b.country", "a derived table"),
    ("SELECT country, count(*) AS n FROM sales WHERE item_id IN (SELECT item_id FROM item) "
     "GROUP BY country", "an IN subquery"),
    ("SELECT country, count(*) AS n FROM sales s WHERE EXISTS (SELECT 1 FROM item i "
     "WHERE i.item_id = s.item_id) GROUP BY country", "an EXISTS subquery"),
    ("SELECT country, quantity - (SELECT min(quantity) FROM sales) AS d FROM sales",
     "a scalar subquery"),
    ("WITH c AS (SELECT country, sum(quantity) AS q FROM sales GROUP BY country) "
     "SELECT country, q FROM c", "a WITH whose CTE c"),
])
def test_each_construct_makes_a_full_datamap_that_says_why(sql, construct):
    d = compile_datamap("f", sql, SCHEMA, "default")
    assert d.refresh == "full" and not d.is_aggregate
    assert d.refresh_reason.startswith(construct) and "no increment" in d.refresh_reason
    assert refresh_mode(d) == ("full", d.refresh_reason)
    assert all(c.role == "column" for c in d.columns)


def test_a_full_datamap_reads_every_table_of_its_subqueries_and_branches():
    d = compile_datamap("f", "SELECT country, count(*) AS n FROM sales WHERE store_id IN "
                        "(SELECT store_id FROM store WHERE region = 'north') GROUP BY country "
                        "UNION ALL SELECT category, count(*) FROM item GROUP BY category",
                        SCHEMA, "default")
    assert d.base_tables[0] == "default.sales" and d.database == "default"
    assert sorted(d.base_tables) == ["default.item", "default.sales", "default.store"]
    assert [c.name for c in d.columns] == ["country", "n"]


@pytest.mark.parametrize("sql,text", [
    ("SELECT country, rank() OVER (ORDER BY quantity) AS r FROM sales UNION ALL "
     "SELECT region, size FROM store", "window functions"),
    ("SELECT country FROM sales WHERE item_id IN (SELECT item_id FROM item LIMIT 3)", "LIMIT"),
    ("SELECT * FROM sales UNION ALL SELECT * FROM sales", "SELECT *"),
    ("SELECT country, rand() AS r FROM sales UNION ALL SELECT region, 1 FROM store",
     "non-deterministic"),
    ("SELECT timeseries(ts, 'hour') AS h FROM sales UNION SELECT ts FROM sales", "timeseries()"),
    ("SELECT country FROM nope UNION SELECT region FROM store", "default.nope not found"),
    ("SELECT country, first(city) AS c FROM sales GROUP BY country UNION ALL "
     "SELECT region, first(store_name) FROM store GROUP BY region", "depends on the order"),
    ("SELECT country, collect_list(city) AS c FROM sales GROUP BY ROLLUP(country)",
     "depends on the order"),
])
def test_what_a_full_rebuild_cannot_keep_is_refused_naming_it(sql, text):
    with pytest.raises(DatamapDefinitionError) as e:
        compile_datamap("bad", sql, SCHEMA, "default")
    assert text in str(e.value) and "bad" in str(e.value)
    assert e.value.sqlstate in ("0A000", "42S02")


def test_a_full_datamap_is_never_compensated():
    d = compile_datamap("u", U, SCHEMA, "default")
    cand = Candidate(d, delta=(("default.sales", "(SELECT * FROM default.sales)"),))
    res = DatamapIndex([cand], SCHEMA).rewrite(U, "default")
    assert not res.rewritten and "never compensated" in res.skipped["default.u"]
    assert DatamapIndex([Candidate(d)], SCHEMA).rewrite(U, "default").used == ["default.u"]


def test_refresh_words_of_incremental_datamaps_say_what_distinct_counts_keep():
    plain = compile_datamap("a", "SELECT country, sum(quantity) AS q FROM sales GROUP BY country",
                            SCHEMA, "default")
    assert refresh_mode(plain) == ("incremental", "the new rows' partial aggregates are "
                                                  "appended as a segment")
    exact = compile_datamap("e", "SELECT country, count(DISTINCT city) AS c FROM sales "
                            "GROUP BY country", SCHEMA, "default")
    mode, why = refresh_mode(exact)
    assert mode == "incremental"
    assert "exact COUNT(DISTINCT sales.city): the distinct values of its argument kept per " \
           "group in column city" in why, why
    assert refresh_mode(None) == ("NA", "")
