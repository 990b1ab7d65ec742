"""compile_datamap layout and refusals, build_sql, and DatamapIndex behaviour (pure logic)."""
from __future__ import annotations

import pathlib

import pytest

from rewriter import (SEGMENT_COLUMN, Candidate, DatamapDefinitionError, DatamapIndex, build_sql,
                      compile_datamap, rewrite)
from tests.support import yamlfile as yaml

SCHEMA = yaml.safe_load((pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "rewriter"
                         / "schema.yaml").read_text())


def test_layout_avg_is_sum_and_count_and_names_are_unique():
    d = compile_datamap("Agg", "SELECT country, avg(price) AS ap, sum(price), count(*), count(1) "
                        "FROM sales GROUP BY country", SCHEMA, "default")
    assert d.name == "agg" and d.table == "default.agg_table" and d.database == "default"
    assert [(c.name, c.role, c.agg, c.type) for c in d.columns] == [
        ("country", "group", None, "string"),
        ("ap_sum", "agg", "sum", "decimal(20,2)"),
        ("ap_count", "agg", "count", "bigint"),
        ("count_star", "agg", "count_star", "bigint"),
    ]
    assert d.is_aggregate and d.base_tables == ("default.sales",)
    assert SEGMENT_COLUMN not in {c.name for c in d.columns}


def test_layout_of_variance_hidden_groups_having_and_with():
    """A variance stores count, sum and sum of squares (as double), min and max of its
    argument; a grouping expression the projection leaves out is a group column all the
    same; HAVING's aggregates are stored and the build SELECT keeps every group (no
    HAVING); a WITH that filters a base table is inlined."""
    d = compile_datamap("v", "WITH fr AS (SELECT country, city, price, quantity FROM sales "
                        "WHERE year > 2000) SELECT country, stddev(price) AS sd, sum(quantity) AS q "
                        "FROM fr GROUP BY country, city HAVING count(*) > 1", SCHEMA, "default")
    assert [(c.name, c.role, c.agg, c.type) for c in d.columns] == [
        ("country", "group", None, "string"),
        ("count_price", "agg", "count", "bigint"),
        ("sum_price_double", "agg", "sum", "double"),
        ("sumsq_price", "agg", "sum", "double"),
        ("min_price", "agg", "min", "decimal(10,2)"),
        ("max_price", "agg", "max", "decimal(10,2)"),
        ("q", "agg", "sum", "bigint"),
        ("city", "group", None, "string"),
        ("count_star", "agg", "count_star", "bigint"),
    ]
    assert build_sql(d, {}) == (
        "SELECT fr.country AS country, COUNT(fr.price) AS count_price, SUM(CAST(fr.price AS DOUBLE)) "
        "AS sum_price_double, SUM(CAST(fr.price AS DOUBLE) * CAST(fr.price AS DOUBLE)) AS sumsq_price, "
        "MIN(fr.price) AS min_price, MAX(fr.price) AS max_price, SUM(fr.quantity) AS q, "
        "fr.city AS city, COUNT(*) AS count_star FROM default.sales AS fr WHERE (fr.`year` > 2000) "
        "GROUP BY fr.country, fr.city")


def test_build_sql_materialises_exactly_the_stored_columns_and_reads_sources():
    d = compile_datamap("j", "SELECT s.country, i.category, sum(s.quantity) AS q FROM sales s "
                        "JOIN item i ON s.item_id = i.item_id WHERE s.year >= 2020 "
                        "GROUP BY s.country, i.category", SCHEMA, "default")
    assert d.join_kinds == ("inner",)
    assert build_sql(d, {}) == (
        "SELECT s.country AS country, i.category AS category, SUM(s.quantity) AS q "
        "FROM default.sales AS s JOIN default.item AS i ON s.item_id = i.item_id "
        "WHERE s.`year` >= 2020 GROUP BY s.country, i.category")
    assert d.build_sql({"default.sales": "new_rows"}).startswith(
        "SELECT s.country AS country, i.category AS category, SUM(s.quantity) AS q FROM new_rows AS s JOIN")


def test_projection_only_and_distinct_layouts():
    spj = compile_datamap("p", "SELECT country, quantity * price AS rev FROM sales", SCHEMA, "default")
    assert not spj.is_aggregate
    assert [(c.name, c.role, c.type) for c in spj.columns] == [("country", "column", "string"),
                                                               ("rev", "column", "decimal(21,2)")]
    dist = compile_datamap("d", "SELECT DISTINCT country, city FROM sales", SCHEMA, "default")
    assert dist.is_aggregate and [c.role for c in dist.columns] == ["group", "group"]
    assert "GROUP BY sales.country, sales.city" in build_sql(dist, {})


def test_timeseries_definition_builds_spark_sql():
    d = compile_datamap("t", "SELECT timeseries(ts, 'HOUR') AS h, count(*) AS n FROM sales "
                        "GROUP BY timeseries(ts, 'HOUR')", SCHEMA, "default")
    assert d.columns[0].type == "timestamp"
    assert "timeseries" not in build_sql(d, {}).lower()


@pytest.mark.parametrize("sql,state,text", [
    ("SELECT country, sum(quantity) FROM nope GROUP BY country", "42S02", "default.nope not found"),
    ("SELECT country, sum(nope) FROM sales GROUP BY country", "42S02", "nope"),
    ("SELECT country, sum(quantity) FROM sales GROUP BY country LIMIT 5", "0A000", "LIMIT"),
    ("SELECT country FROM sales UNION SELECT city FROM sales LIMIT 5", "0A000", "LIMIT"),
    ("SELECT * FROM sales", "0A000", "SELECT *"),
    ("SELECT country, rand() AS r FROM sales", "0A000", "non-deterministic"),
    ("SELECT country, city, sum(quantity) FROM sales GROUP BY country", "42000", "neither grouped nor aggregated"),
    ("SELECT country, count(DISTINCT max(city)) FROM sales GROUP BY country", "0A000", "DISTINCT"),
    ("SELECT country, percentile(price, 0.5) FROM sales GROUP BY country", "0A000", "not supported"),
    ("SELECT country, stddev(city) FROM sales GROUP BY country", "0A000", "must be numeric"),
    ("WITH c AS (SELECT country, sum(quantity) AS q FROM sales GROUP BY country) "
     "SELECT country, q, rand() AS r FROM c", "0A000", "non-deterministic"),
    ("SELECT timeseries(ts, 'hour') AS h, timeseries(ts, 'day') AS d, count(*) FROM sales "
     "GROUP BY timeseries(ts, 'hour'), timeseries(ts, 'day')", "0A000", "more than one timeseries granularity"),
    ("SELECT country, sum(day) FROM sales GROUP BY country", "0A000", "numeric type"),
    ("SELEC country FROM sales", "42000", "parse"),
])
def test_refused_definitions(sql, state, text):
    with pytest.raises(DatamapDefinitionError) as e:
        compile_datamap("bad", sql, SCHEMA, "default")
    assert e.value.sqlstate == state
    assert text in str(e.value) and "bad" in str(e.value)


def test_index_caches_and_reports_reasons():
    d = compile_datamap("agg", "SELECT country, sum(quantity) AS q FROM sales GROUP BY country",
                        SCHEMA, "default")
    idx = DatamapIndex([Candidate(d, rows=3)], SCHEMA, version=7)
    q = "SELECT country, sum(quantity) FROM sales GROUP BY country"
    first = idx.rewrite(q, "default")
    again = idx.rewrite(q, "default")
    assert first.rewritten and again.sql == first.sql and again.used == ["default.agg"]
    again.used.append("x")                                     # callers cannot poison the cache
    assert idx.rewrite(q, "default").used == ["default.agg"]
    miss = idx.rewrite("SELECT city, sum(quantity) FROM sales GROUP BY city", "default")
    assert not miss.rewritten and "city" in miss.skipped["default.agg"]
    untouched = idx.rewrite("SELECT * FROM item", "default")
    assert untouched.sql == "SELECT * FROM item" and not untouched.rewritten and untouched.skipped == {}


def test_non_select_statements_are_left_alone():
    d = compile_datamap("agg", "SELECT country, sum(quantity) AS q FROM sales GROUP BY country",
                        SCHEMA, "default")
    for sql in ["INSERT INTO sales SELECT * FROM sales", "DROP TABLE sales", "SELECT country FROM sales;;"
                " SELECT 1", "not sql at all sales"]:
        r = rewrite(sql, [Candidate(d)], SCHEMA, "default")
        assert r.sql == sql and not r.rewritten


def test_definition_changed_schema_is_reported_not_raised():
    d = compile_datamap("agg", "SELECT country, sum(quantity) AS q FROM sales GROUP BY country",
                        SCHEMA, "default")
    other = {"default": {"sales": {"country": "string"}}}
    r = rewrite("SELECT country, sum(quantity) FROM sales GROUP BY country", [Candidate(d)], other, "default")
    assert not r.rewritten and "no longer compiles" in r.skipped["default.agg"]


def test_self_join_is_one_relation_per_reference():
    d = compile_datamap("sj", "SELECT a.country, b.country AS peer, sum(a.quantity) AS q "
                        "FROM sales a JOIN sales b ON a.id = b.id GROUP BY a.country, b.country",
                        SCHEMA, "default")
    assert d.base_tables == ("default.sales", "default.sales")
    assert [(c.name, c.expr_sql) for c in d.columns] == [
        ("country", "a.country"), ("peer", "b.country"), ("q", "SUM(a.quantity)")]
    assert "FROM default.sales AS a JOIN default.sales AS b ON a.id = b.id" in d.build_select
