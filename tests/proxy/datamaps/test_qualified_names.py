"""Same-named datamaps in two databases, and EXPLAIN naming the datamaps that were no
candidates (DISABLED, not in sync). Decisions only: a real catalog, schemas given as data,
no Spark (a decision that needed it fails)."""
from __future__ import annotations

import dataclasses

import pytest

from proxy.datamaps.catalog.records import display_name
from proxy.datamaps.ddl.parser import Name
from proxy.datamaps.explain import explain_header
from proxy.datamaps.handler import DatamapDdlHandler, DatamapLoadHandler, DatamapSelectHandler
from proxy.errors import ClientError
from proxy.routing.router import LocalResult, PassThrough, Reject, Rewrite, StatementContext
from rewriter import compile_datamap
from rewriter.api import RewriteResult
from tests.support.datamaps import add_datamap, decision_service, forwarded

SCHEMAS = {"db1": {"sales": {"country": "string", "qty": "int"}},
           "db2": {"sales": {"country": "string", "qty": "int"},
                   "other": {"k": "int"}}}
AGG = "SELECT country, sum(qty) FROM sales GROUP BY country"
Q = "SELECT country, sum(qty) FROM sales GROUP BY country"


@pytest.fixture
def service(tmp_path):
    yield from decision_service(tmp_path, SCHEMAS)


def _ctx(db):
    return StatementContext("s1", "me", db, {}, 10)


def _datamap(svc, db, name="agg", sql=AGG, lazy=False, build=True, rows=5):
    return add_datamap(svc, SCHEMAS, db, name, sql, lazy=lazy, build=build, rows=rows)


async def _upstream(sql):
    return LocalResult((("plan", "string"),), [("== Physical Plan ==",)])


async def _explain(svc, db, query):
    return (await DatamapDdlHandler(svc)(_ctx(db), "EXPLAIN " + query).runner(_upstream)).rows[0][0]


def test_display_name():
    assert display_name("db1.agg", "db1") == "agg"
    assert display_name("db1.agg", "DB1") == "agg"
    assert display_name("db1.agg", "db2") == "db1.agg"
    assert display_name("default.agg", None) == "agg"
    assert display_name("agg", "db1") == "agg"
    r = RewriteResult("SELECT 1", False, [], {"db1.agg": "no match", "db2.agg": "no match"})
    assert explain_header(r, "db1").splitlines()[3:] == ["Skipped agg: no match",
                                                         "Skipped db2.agg: no match"]


async def test_both_datamaps_are_offered_and_each_database_hits_its_own(service):
    _datamap(service, "db1")
    _datamap(service, "db2")
    assert sorted(c.definition.qualified for c in service.candidates()) == ["db1.agg", "db2.agg"]
    h = DatamapSelectHandler(service)
    # the same SQL text, two current databases: each gets its own datamap (never the cache's)
    for db, other in (("db1", "db2"), ("db2", "db1"), ("db1", "db2")):
        d = h(_ctx(db), Q)
        assert isinstance(d, Rewrite) and f"{db}.agg_table" in d.sql, (db, d)
        assert f"{other}.agg_table" not in d.sql and d.note == "mv:agg"
    d = h(_ctx("db1"), Q.replace("sales", "db2.sales"))
    assert isinstance(d, Rewrite) and "db2.agg_table" in d.sql and d.note == "mv:db2.agg"
    assert "Hit mv DataMap: agg" in (await _explain(service, "db2", Q)).splitlines()
    plan = await _explain(service, "db1", Q.replace("sales", "db2.sales"))
    assert "Hit mv DataMap: db2.agg" in plan.splitlines() and "db2.agg_table" in plan


async def test_ddl_resolves_names_against_the_current_database(service, monkeypatch):
    from proxy.datamaps.upkeep import maintenance
    _datamap(service, "db1")
    _datamap(service, "db2", rows=7)
    ddl = DatamapDdlHandler(service)

    async def run(db, sql):
        return await ddl(_ctx(db), sql).runner(_upstream)
    shown = await run("db1", "SHOW DATAMAP ON TABLE db2.sales")
    assert [r[:3] for r in shown.rows] == [("agg", "mv", "db2.agg_table")]
    assert [r[2] for r in (await run("db2", "SHOW DATAMAP ON TABLE sales")).rows] == ["db2.agg_table"]
    assert {r[2] for r in (await run("db1", "SHOW DATAMAP")).rows} == {"db1.agg_table", "db2.agg_table"}
    segs = await run("db1", "SHOW SEGMENTS FOR TABLE db2.agg_table")
    assert [(r[0], r[4]) for r in segs.rows] == [("0", 7)]
    assert [r[4] for r in (await run("db2", "SHOW SEGMENTS FOR TABLE agg_table")).rows] == [7]
    # a datamap table is dropped with DROP DATAMAP, named so that it resolves from here
    rej = DatamapLoadHandler(service)(_ctx("db1"), "DROP TABLE db2.agg_table")
    assert isinstance(rej, Reject) and "DROP DATAMAP db2.agg" in rej.message
    dropped = []
    monkeypatch.setattr(maintenance, "drop", lambda spark, d: dropped.append(d.table))
    monkeypatch.setattr(service, "spark_provider", lambda: None)
    await run("db2", "DROP DATAMAP agg")
    assert dropped == ["db2.agg_table"]
    assert [r.qualified for r in service.catalog.list_datamaps()] == ["db1.agg"]
    h = DatamapSelectHandler(service)
    assert h(_ctx("db2"), Q) is None
    assert "db1.agg_table" in h(_ctx("db1"), Q).sql
    _datamap(service, "db2")
    # DROP TABLE db1.sales cascades to db1's datamaps only
    d = DatamapLoadHandler(service)(_ctx("db2"), "DROP TABLE db1.sales")
    assert isinstance(d, PassThrough)
    await d.after(_upstream)
    assert dropped == ["db2.agg_table", "db1.agg_table"]
    assert [r.qualified for r in service.catalog.list_datamaps()] == ["db2.agg"]
    assert "db2.agg_table" in h(_ctx("db2"), Q).sql


async def test_explain_names_disabled_and_out_of_sync_datamaps_on_a_miss(service):
    _datamap(service, "db1", "lazy", lazy=True, build=False)
    _datamap(service, "db2", "lazy", lazy=True, build=False)   # not over db1.sales
    _datamap(service, "db2", "elsewhere", sql="SELECT k, count(*) FROM other GROUP BY k",
             lazy=True, build=False)
    plan = await _explain(service, "db1", Q)
    lines = plan.splitlines()
    assert "No datamap hit" in lines
    assert "Skipped lazy: datamap is DISABLED: deferred rebuild: not built yet" in lines
    assert not any("db2." in ln for ln in lines)         # other tables' datamaps: not named
    # a built datamap over the table, a load it has not caught up with yet: out of sync
    _datamap(service, "db1", "agg")
    service.catalog.add_base_segment("db1.sales", ["file:/w/db1.sales/b.parquet"])
    lines = (await _explain(service, "db2", Q.replace("sales", "db1.sales"))).splitlines()
    assert "Skipped db1.agg: datamap is not in sync: segment 1 of db1.sales not refreshed yet" \
        in lines, lines
    assert any(ln.startswith("Skipped db1.lazy: datamap is DISABLED: ") for ln in lines)
    # a failed refresh: its reason (a Spark error, many lines) on one line
    service.catalog.set_status("db1", "agg", "DISABLED",
                               "refresh after a load of db1.sales failed: boom\n\tat Foo.bar")
    lines = (await _explain(service, "db1", Q)).splitlines()
    assert "Skipped agg: datamap is DISABLED: refresh after a load of db1.sales failed: boom" \
        in lines, lines
    # a hit lists no skipped datamaps, however many are disabled
    sid = service.catalog.begin_segment("db1", "agg", {"db1.sales": ["1"]})
    service.catalog.publish_segment("db1", "agg", sid, rows=1)
    lines = (await _explain(service, "db1", Q)).splitlines()
    assert "Hit mv DataMap: agg" in lines and not any(ln.startswith("Skipped") for ln in lines)


def test_the_select_path_names_unavailable_datamaps_from_memory(service, monkeypatch):
    """A miss carries the datamaps the index left out, as the index build saw them: the
    SELECT path reads no catalog for it."""
    _datamap(service, "db1", "lazy", lazy=True, build=False)
    h = DatamapSelectHandler(service)
    h(_ctx("db1"), Q)
    monkeypatch.setattr(service.catalog, "unavailable_reason",
                        lambda *a: pytest.fail("the SELECT path read the catalog"))
    d = h(_ctx("db1"), Q)
    assert forwarded(d) and [n for n, _ in d.why_not] == ["db1.lazy"]


async def test_on_table_finds_a_datamap_named_into_another_database(service):
    d = compile_datamap("x", "SELECT country, sum(qty) FROM db1.sales GROUP BY country",
                        SCHEMAS, "db1")
    d = dataclasses.replace(d, database="db2", table="db2.x_table")
    service.catalog.create_datamap("db2", "x", provider="mv", select_sql=d.select_sql,
                                   base_tables=d.base_tables, definition=d)
    assert service.commands.require(Name("x"), Name("sales", "db1"), "default").qualified == "db2.x"
    with pytest.raises(ClientError) as e:
        service.commands.require(Name("x"), None, "db1")
    assert e.value.sqlstate == "42S02" and "db1.x does not exist" in str(e.value)
