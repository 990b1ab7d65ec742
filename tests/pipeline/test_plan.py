"""The incremental refresh plan (pure logic, no Spark)."""
from __future__ import annotations

import pytest

from pipeline.files import normalize_path
from pipeline.jobs import plan_delta
from rewriter.api import DatamapDefinition, StoredColumn


def _defn(tables, kinds=(), agg=True):
    return DatamapDefinition(name="d", database="db", table="db.d_table", select_sql="",
                             base_tables=tuple(tables), columns=(
                                 StoredColumn("x", "group", "x", "int"),),
                             is_aggregate=agg, join_kinds=tuple(kinds))


def test_nothing_changed():
    plan = plan_delta(_defn(["db.a"]), [])
    assert plan.terms == () and not plan.full_rebuild
    assert plan_delta(_defn(["db.a"]), ["db.other"]).terms == ()


def test_single_table():
    assert plan_delta(_defn(["db.a"]), ["db.a"]).terms == ({"db.a": "new"},)


def test_inner_join_telescopes_in_from_order():
    d = _defn(["db.a", "db.b", "db.c"], ["inner", "inner"])
    assert plan_delta(d, ["db.c", "db.a"]).terms == (
        {"db.a": "new", "db.b": "all", "db.c": "all"},
        {"db.a": "old", "db.b": "all", "db.c": "new"},
    )
    assert plan_delta(d, ["db.b"]).terms == ({"db.a": "all", "db.b": "new", "db.c": "all"},)


def test_left_join_left_side_incremental_right_side_full():
    d = _defn(["db.a", "db.b"], ["left"])
    assert plan_delta(d, ["db.a"]).terms == ({"db.a": "new", "db.b": "all"},)
    plan = plan_delta(d, ["db.b"])
    assert plan.full_rebuild and "db.b" in plan.reason and "outer join" in plan.reason
    assert plan_delta(d, ["db.a", "db.b"]).full_rebuild


@pytest.mark.parametrize("kinds,changed,full", [
    (["inner", "left"], ["db.b"], False),     # (a JOIN b) LEFT JOIN c: b is on the preserved side
    (["inner", "left"], ["db.c"], True),
    (["left", "inner"], ["db.c"], False),     # c is inner-joined to the left-join result
    (["left", "inner"], ["db.b"], True),
    (["right"], ["db.a"], True),
    (["full"], ["db.a"], True),
    (["cross"], ["db.b"], False),
])
def test_join_kinds(kinds, changed, full):
    tables = ["db.a", "db.b", "db.c"][: len(kinds) + 1]
    assert plan_delta(_defn(tables, kinds), changed).full_rebuild is full


def test_self_join_is_one_variable_per_reference():
    # (O+N)⋈(O+N) - O⋈O = N⋈(O+N) + O⋈N: every new pair once
    plan = plan_delta(_defn(["db.a", "db.a"], ["inner"]), ["db.a"])
    assert not plan.full_rebuild
    assert plan.terms == ({"db.a@0": "new", "db.a@1": "all"},
                          {"db.a@0": "old", "db.a@1": "new"})
    d = _defn(["db.a", "db.b", "db.a"], ["inner", "inner"])
    assert plan_delta(d, ["db.b"]).terms == ({"db.a@0": "all", "db.b": "new", "db.a@2": "all"},)
    # a self-join through a LEFT JOIN: its NULL-extended reference is not linear
    assert plan_delta(_defn(["db.a", "db.a"], ["left"]), ["db.a"]).full_rebuild


def test_swap_sources_per_reference():
    from rewriter.build import swap_sources
    sql = "SELECT a.x FROM db.t AS a JOIN db.t AS b ON a.x = b.y"
    assert swap_sources(sql, {"db.t@1": "n"}) == \
        "SELECT a.x FROM db.t AS a JOIN n AS b ON a.x = b.y"
    assert swap_sources(sql, {"db.t": "v", "db.t@0": "n"}) == \
        "SELECT a.x FROM n AS a JOIN v AS b ON a.x = b.y"


def test_unknown_join_shape_only_inner_is_incremental():
    assert not plan_delta(_defn(["db.a", "db.b", "db.c"], ["inner"]), ["db.c"]).full_rebuild
    assert plan_delta(_defn(["db.a", "db.b", "db.c"], ["left"]), ["db.a"]).full_rebuild


def test_normalize_path():
    assert normalize_path("file:///tmp/a%20b/x.parquet") == "file:/tmp/a%20b/x.parquet"
    assert normalize_path("file:/tmp/x") == "file:/tmp/x"
    assert normalize_path("file://localhost/tmp/x") == "file:/tmp/x"
    assert normalize_path("hdfs://nn:8020/w/x") == "hdfs://nn:8020/w/x"


def test_a_definition_refreshed_in_full_is_always_rebuilt():
    import dataclasses
    d = dataclasses.replace(_defn(["db.a", "db.b"]), refresh="full", refresh_reason="UNION ALL has no increment")
    plan = plan_delta(d, [d.base_tables[0]])
    assert plan.full_rebuild and "refreshed in full: UNION ALL" in plan.reason
    assert not plan_delta(d, []).full_rebuild          # nothing changed: nothing to do
