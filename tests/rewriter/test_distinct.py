"""Distinct counts from sketches (rewriter/distinct.py): the definition turned into sketch
columns, and the queries answered from them only when the caller allows estimates. The
exact cases (and the refusals without the setting) are fixtures: bi_distinct*.yaml."""
from __future__ import annotations

import pytest

from rewriter import Candidate, DatamapDefinitionError, compile_datamap, rewrite
from rewriter.distinct import APPROXIMATE_KEY, SketchDefinitionError, lgk_for, sketch_definition
from tests.support.rewriter_cases import SCHEMA

SK = ("SELECT o_orderpriority, o_orderstatus, approx_count_distinct(o_custkey) AS customers, "
      "count(*) AS n FROM tpch.orders GROUP BY o_orderpriority, o_orderstatus")
HLL = {"distinct_sketch": "hll"}


def sketch_dm(props=HLL, sql=SK, name="sk"):
    return compile_datamap(name, sketch_definition(sql, props), SCHEMA, "default")


def approx(sql, *, partial=False, segments=None, allowed=True, dm=None):
    cand = Candidate(dm or sketch_dm(), one_row_per_group=not partial, segments=segments)
    return rewrite(sql, [cand], SCHEMA, "default", approximate=allowed)


def test_the_setting_key_is_the_proxys():
    from proxy.routing.classify import APPROXIMATE_KEY as proxy_key
    assert proxy_key == APPROXIMATE_KEY


def test_layout_of_a_sketch_column():
    d = sketch_dm()
    col = next(c for c in d.columns if c.name == "customers")
    assert (col.role, col.agg, col.type) == ("agg", "hll", "binary")
    assert col.expr_sql == "HLL_SKETCH_AGG(orders.o_custkey, 12)"
    assert "HLL_SKETCH_AGG(orders.o_custkey, 12) AS customers" in d.build_select


@pytest.mark.parametrize("props,sql,k", [
    (HLL, "approx_count_distinct(o_custkey)", 12),
    (HLL, "approx_count_distinct(o_custkey, 0.05)", 9),
    (HLL, "approx_count_distinct(o_custkey, 0.01)", 14),
    ({**HLL, "distinct_sketch_lgk": "16"}, "approx_count_distinct(o_custkey, 0.05)", 16),
])
def test_lgconfigk_from_the_properties_or_relative_sd(props, sql, k):
    out = sketch_definition(f"SELECT o_orderstatus, {sql} AS u FROM tpch.orders "
                            "GROUP BY o_orderstatus", props)
    assert f"HLL_SKETCH_AGG(o_custkey, {k}) AS u" in out


def test_lgk_for_is_clamped():
    assert lgk_for(0.5) == 4 and lgk_for(0.0001) == 21 and lgk_for(0) == 21


@pytest.mark.parametrize("props,why", [
    ({"distinct_sketch": "theta"}, "expected 'hll'"),
    ({**HLL, "distinct_sketch_lgk": "30"}, "from 4 to 21"),
    ({**HLL, "distinct_sketch_lgk": "x"}, "whole number"),
])
def test_bad_sketch_properties_are_refused(props, why):
    with pytest.raises(SketchDefinitionError, match=why):
        sketch_definition(SK, props)


def test_the_property_needs_an_approx_count_distinct():
    with pytest.raises(SketchDefinitionError, match="needs an approx_count_distinct"):
        sketch_definition("SELECT o_orderstatus, count(*) AS n FROM tpch.orders "
                          "GROUP BY o_orderstatus", HLL)


def test_no_property_leaves_the_text_and_compiling_refuses_with_the_way_out():
    assert sketch_definition(SK, {}) == SK
    with pytest.raises(DatamapDefinitionError, match="'distinct_sketch'='hll'") as e:
        compile_datamap("sk", SK, SCHEMA, "default")
    assert e.value.sqlstate == "0A000"


def test_bad_lgk_in_a_definition_is_refused():
    with pytest.raises(DatamapDefinitionError, match="lgConfigK"):
        compile_datamap("sk", "SELECT o_orderstatus, hll_sketch_agg(o_custkey, 40) AS s "
                              "FROM tpch.orders GROUP BY o_orderstatus", SCHEMA, "default")


def test_rollup_merges_sketches_and_says_so():
    r = approx("SELECT o_orderpriority, approx_count_distinct(o_custkey) AS c FROM tpch.orders "
               "GROUP BY o_orderpriority")
    assert r.sql == ("SELECT sk.o_orderpriority AS o_orderpriority, "
                     "HLL_SKETCH_ESTIMATE(HLL_UNION_AGG(sk.customers)) AS c "
                     "FROM tpch.sk_table AS sk GROUP BY sk.o_orderpriority")
    assert r.approximate == ["APPROX_COUNT_DISTINCT(tpch.orders.o_custkey) estimated from the "
                             "HLL sketch sk.customers"]


def test_any_relative_sd_reads_the_sketch_when_allowed():
    r = approx("SELECT approx_count_distinct(o_custkey, 0.2) AS c FROM tpch.orders")
    assert r.sql == ("SELECT HLL_SKETCH_ESTIMATE(HLL_UNION_AGG(sk.customers)) AS c "
                     "FROM tpch.sk_table AS sk")


def test_exact_grain_reads_the_groups_own_sketch():
    r = approx("SELECT o_orderpriority, o_orderstatus, approx_count_distinct(o_custkey) AS c "
               "FROM tpch.orders GROUP BY o_orderpriority, o_orderstatus")
    assert "HLL_SKETCH_ESTIMATE(sk.customers) AS c" in r.sql and "GROUP BY" not in r.sql


def test_partial_segments_always_merge():
    r = approx("SELECT o_orderpriority, o_orderstatus, approx_count_distinct(o_custkey) AS c "
               "FROM tpch.orders GROUP BY o_orderpriority, o_orderstatus",
               partial=True, segments=("0", "1"))
    assert "HLL_SKETCH_ESTIMATE(HLL_UNION_AGG(sk.customers))" in r.sql
    assert "dm_segment_id IN ('0', '1')" in r.sql


def test_hll_sketch_agg_of_the_same_lgk():
    r = approx("SELECT o_orderstatus, hll_sketch_estimate(hll_sketch_agg(o_custkey, 12)) AS c, "
               "hll_sketch_agg(o_custkey) AS s FROM tpch.orders GROUP BY o_orderstatus")
    assert ("HLL_SKETCH_ESTIMATE(HLL_UNION_AGG(sk.customers)) AS c, "
            "HLL_UNION_AGG(sk.customers) AS s") in r.sql
    assert len(r.approximate) == 2


def test_a_grouping_column_stays_exact_next_to_a_sketch():
    r = approx("SELECT o_orderstatus, approx_count_distinct(o_orderpriority) AS p, "
               "approx_count_distinct(o_custkey) AS c FROM tpch.orders GROUP BY o_orderstatus")
    assert "APPROX_COUNT_DISTINCT(sk.o_orderpriority) AS p" in r.sql
    assert len(r.approximate) == 1


def test_not_allowed_names_the_setting_and_the_cache_keeps_them_apart():
    from rewriter import DatamapIndex
    q = "SELECT approx_count_distinct(o_custkey) AS c FROM tpch.orders"
    index = DatamapIndex([Candidate(sketch_dm())], SCHEMA)
    assert index.rewrite(q, "default", approximate=True).approximate
    r = index.rewrite(q, "default")
    assert not r.rewritten and not r.approximate
    assert f"SET {APPROXIMATE_KEY}=true allows it" in r.skipped["tpch.sk"]
    assert index.rewrite(q, "default", approximate=True).rewritten


def test_exact_answers_carry_no_approximate_note():
    r = approx("SELECT o_orderstatus, count(*) AS n FROM tpch.orders GROUP BY o_orderstatus")
    assert r.rewritten and r.approximate == []


@pytest.mark.parametrize("call", ["HLL_SKETCH_ESTIMATE(HLL_UNION_AGG(m.s))",
                                  "APPROX_COUNT_DISTINCT(m.g)", "APPROX_COUNT_DISTINCT(m.g, 0.1)"])
def test_the_serving_tier_leaves_sketches_and_hll_plus_plus_to_spark(call):
    import sqlglot
    from proxy.serving.translate import NotServable, translate
    sql = (f"SELECT {call} AS c FROM (SELECT g, s FROM db.dm_table "
           "WHERE dm_segment_id IN ('0')) AS m")
    with pytest.raises(NotServable, match="distinct-count sketches"):
        translate(sqlglot.parse_one(sql, read="spark"), {"db.dm_table": {"g": "int", "s": "binary"}},
                  lambda t, ids: [f"/f/{t}/{i}.parquet" for i in ids])
