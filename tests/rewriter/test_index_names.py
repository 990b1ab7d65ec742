"""DatamapIndex keys datamaps by "db.name": a datamap name is unique per database only, so
db1.agg and db2.agg are two datamaps, both usable (pure logic, no Spark)."""
from __future__ import annotations

import dataclasses

from rewriter import Candidate, DatamapIndex, compile_datamap

SCHEMAS = {
    "db1": {"sales": {"country": "string", "city": "string", "qty": "int"}},
    "db2": {"sales": {"country": "string", "city": "string", "qty": "int"},
            "items": {"id": "int", "cat": "string"}},
}
AGG1 = "SELECT country, sum(qty) AS q FROM sales GROUP BY country"
AGG2 = "SELECT city, sum(qty) AS q, count(*) AS n FROM sales GROUP BY city"


def _index(*defs, rows=None, version=1):
    rows = rows or {}
    return DatamapIndex([Candidate(d, rows=rows.get(d.qualified)) for d in defs], SCHEMAS,
                        version=version)


def _two():
    return (compile_datamap("agg", AGG1, SCHEMAS, "db1"),
            compile_datamap("agg", AGG2, SCHEMAS, "db2"))


def test_same_name_in_two_databases_both_answer_their_own_queries():
    d1, d2 = _two()
    assert (d1.qualified, d2.qualified) == ("db1.agg", "db2.agg")
    idx = _index(d1, d2)
    r1 = idx.rewrite("SELECT country, sum(qty) FROM db1.sales GROUP BY country", "default")
    assert r1.used == ["db1.agg"] and "db1.agg_table" in r1.sql and "db2." not in r1.sql
    r2 = idx.rewrite("SELECT city, count(*) FROM db2.sales GROUP BY city", "default")
    assert r2.used == ["db2.agg"] and "db2.agg_table" in r2.sql and "db1." not in r2.sql
    # the alias in the rewritten SQL stays the bare name
    assert "AS agg" in r1.sql and "AS agg" in r2.sql


def test_reasons_are_keyed_by_qualified_name():
    d1, d2 = _two()
    idx = _index(d1, d2)
    miss = idx.rewrite("SELECT city, sum(qty) FROM db1.sales GROUP BY city", "default")
    assert not miss.rewritten and list(miss.skipped) == ["db1.agg"]
    both = idx.rewrite("SELECT s.country, t.city FROM db1.sales s JOIN db2.sales t "
                       "ON s.country = t.country", "default")
    assert not both.rewritten and set(both.skipped) == {"db1.agg", "db2.agg"}


def test_same_sql_text_in_two_current_databases_is_not_served_from_the_cache():
    d1, d2 = _two()
    idx = _index(d1, d2)
    q1 = "SELECT country, sum(qty) FROM sales GROUP BY country"
    a = idx.rewrite(q1, "db1")
    b = idx.rewrite(q1, "db2")            # db2.agg stores city, not country: no rewrite
    again = idx.rewrite(q1, "db1")
    assert a.used == again.used == ["db1.agg"] and "db1.agg_table" in a.sql
    assert not b.rewritten and b.used == [] and "db2.agg" in b.skipped
    q2 = "SELECT city, sum(qty) FROM sales GROUP BY city"
    assert idx.rewrite(q2, "db2").used == ["db2.agg"]
    assert not idx.rewrite(q2, "db1").rewritten


def test_two_same_named_datamaps_over_one_table_compete_on_cost():
    # CREATE MATERIALIZED VIEW db2.agg AS ... FROM db1.sales: the datamap lives in db2
    d1 = compile_datamap("agg", AGG1, SCHEMAS, "db1")
    other = compile_datamap("agg", "SELECT country, city, sum(qty) AS q FROM db1.sales "
                            "GROUP BY country, city", SCHEMAS, "db1")
    d2 = dataclasses.replace(other, database="db2", table="db2.agg_table")
    q = "SELECT country, sum(qty) FROM db1.sales GROUP BY country"
    cheap2 = _index(d1, d2, rows={"db1.agg": 100, "db2.agg": 10}).rewrite(q, "default")
    assert cheap2.used == ["db2.agg"] and "db2.agg_table" in cheap2.sql
    assert "db2.agg is cheaper" in cheap2.skipped["db1.agg"]
    cheap1 = _index(d1, d2, rows={"db1.agg": 5, "db2.agg": 10}).rewrite(q, "default")
    assert cheap1.used == ["db1.agg"] and "db1.agg_table" in cheap1.sql
    assert "db1.agg is cheaper" in cheap1.skipped["db2.agg"]


def test_blocks_of_one_statement_use_same_named_datamaps_of_two_databases():
    d1, d2 = _two()
    r = _index(d1, d2).rewrite(
        "SELECT country AS k, sum(qty) AS v FROM db1.sales GROUP BY country UNION ALL "
        "SELECT city AS k, sum(qty) AS v FROM db2.sales GROUP BY city", "default")
    assert r.used == ["db1.agg", "db2.agg"]
    assert "db1.agg_table" in r.sql and "db2.agg_table" in r.sql


def test_a_new_index_version_starts_with_an_empty_cache():
    d1, d2 = _two()
    q = "SELECT country, sum(qty) FROM sales GROUP BY country"
    assert _index(d1, d2, version=1).rewrite(q, "db1").used == ["db1.agg"]
    # db1.agg dropped: the next catalog version's index must not answer from it
    assert not _index(d2, version=2).rewrite(q, "db1").rewritten
