"""Decisions of the datamap StatementHandlers (no Spark: a real catalog, schemas given as
data, and a Spark provider that fails if a decision ever needed Spark)."""
from __future__ import annotations

import dataclasses

import pytest

from proxy.datamaps.catalog.store import Catalog
from proxy.datamaps.explain import explain_header
from proxy.datamaps.handler import DatamapDdlHandler, DatamapSelectHandler
from proxy.datamaps.service import EMPTY, DatamapService, referenced_tables
from proxy.errors import ClientError
from proxy.routing.router import Local, LocalResult, Reject, Rewrite
from rewriter.api import RewriteResult
from tests.support.datamaps import (
    add_datamap, decision_service, forwarded, no_spark, SALES_AGG, SALES_SCHEMAS,
    statement_ctx,
)


@pytest.fixture
def service(tmp_path):
    yield from decision_service(tmp_path, SALES_SCHEMAS)


def _add_built_datamap(svc, name="agg", sql=SALES_AGG, lazy=False):
    return add_datamap(svc, SALES_SCHEMAS, "db1", name, sql, lazy=lazy)


async def _upstream(sql):
    assert sql.startswith("EXPLAIN ")
    return LocalResult((("plan", "string"),), [(f"== Physical Plan ==\nScan for: {sql[8:]}",)])


def test_a_statement_is_judged_by_what_the_index_that_rewrote_it_covers(service):
    """A refresh publishing between the rewrite and the freshness check must not make the
    guard judge the new segment's files while the rewritten SQL reads the old segments."""
    _add_built_datamap(service)
    provider, c = service.rewrite_index, service.catalog
    old = service.index()
    seg = c.add_base_segment("db1.sales", ["file:/w/db1.sales/b.parquet"])
    sid = c.begin_segment("db1", "agg", {"db1.sales": [seg.id]})
    c.publish_segment("db1", "agg", sid, rows=1, kind="refreshed")
    new = service.index()
    assert new is not old
    assert provider.covered("db1.agg", old).files["db1.sales"] == {"/w/db1.sales/a.parquet"}
    assert provider.covered("db1.agg", new).files["db1.sales"] == {
        "/w/db1.sales/a.parquet", "/w/db1.sales/b.parquet"}
    assert provider.covered("db1.agg") == provider.covered("db1.agg", new)


def test_ddl_decisions(service):
    h = DatamapDdlHandler(service)
    assert h(statement_ctx(), "SELECT 1") is None
    assert h(statement_ctx(), "SET datamap.rewrite.enabled = false") is None   # proxy/routing/statements.py
    assert h(statement_ctx(), "EXPLAIN CODEGEN SELECT 1") is None
    rej = h(statement_ctx(), "CREATE DATAMAP d USING mv AS SELECT 1")
    assert isinstance(rej, Reject) and rej.sqlstate == "42000" and "'mv'" in rej.message
    rej = h(statement_ctx(), "CREATE DATAMAP d USING 'lucene' AS SELECT 1")
    assert isinstance(rej, Reject) and rej.sqlstate == "0A000"
    for sql, note in [("CREATE DATAMAP d USING 'mv' AS SELECT 1", "CreateDatamap"),
                      ("DROP DATAMAP d", "DropDatamap"), ("SHOW DATAMAP", "ShowDatamaps"),
                      ("REBUILD DATAMAP d", "RebuildDatamap"),
                      ("ALTER DATAMAP d COMPACT 'MAJOR'", "CompactDatamap"),
                      ("SHOW SEGMENTS FOR TABLE t", "ShowSegments"),
                      ("EXPLAIN SELECT 1", "explain")]:
        decision = h(statement_ctx(), sql)
        assert isinstance(decision, Local) and decision.note.endswith(note), sql


async def test_catalog_only_runners(service):
    h = DatamapDdlHandler(service)
    assert await h(statement_ctx(), "DROP DATAMAP IF EXISTS ghost").runner(_upstream) == EMPTY
    for sql, state, text in [("DROP DATAMAP ghost", "42S02", "Datamap db1.ghost does not exist"),
                             ("REBUILD DATAMAP db2.ghost", "42S02", "db2.ghost"),
                             ("ALTER DATAMAP ghost COMPACT 'MINOR'", "42S02", "db1.ghost"),
                             ("SHOW SEGMENTS FOR TABLE nothing", "42S02", "db1.nothing")]:
        with pytest.raises(ClientError) as e:
            await h(statement_ctx(), sql).runner(_upstream)
        assert e.value.sqlstate == state and text in str(e.value), sql

    _add_built_datamap(service)
    shown = await h(statement_ctx(), "SHOW DATAMAP ON TABLE sales").runner(_upstream)
    assert [r[:5] for r in shown.rows] == [("agg", "mv", "db1.agg_table", "", "ENABLED")]
    assert (await h(statement_ctx(), "SHOW MATERIALIZED VIEWS ON TABLE db1.other").runner(_upstream)).rows == []
    segs = await h(statement_ctx(), "SHOW SEGMENTS FOR TABLE agg_table").runner(_upstream)
    assert [r[0] for r in segs.rows] == ["0"]
    with pytest.raises(ClientError) as e:
        await h(statement_ctx(), "DROP DATAMAP agg ON TABLE db1.other").runner(_upstream)
    assert e.value.sqlstate == "42S02" and "on table db1.other" in str(e.value)
    with pytest.raises(ClientError) as e:
        await h(statement_ctx(), "ALTER DATAMAP agg COMPACT 'CUSTOM' WHERE SEGMENT.ID IN (0, 7)"
                ).runner(_upstream)
    assert e.value.sqlstate == "42S02" and "Segment 7" in str(e.value)
    # a single visible segment: nothing to compact, no Spark needed
    assert await h(statement_ctx(), "ALTER DATAMAP agg COMPACT 'MAJOR'").runner(_upstream) == EMPTY


def test_select_rewrites_from_enabled_in_sync_datamaps(service):
    h = DatamapSelectHandler(service)
    q = "SELECT country, sum(qty) FROM sales GROUP BY country"
    assert forwarded(h(statement_ctx(), q))                      # no datamap yet
    _add_built_datamap(service)
    d = h(statement_ctx(), q)
    assert isinstance(d, Rewrite) and "agg_table" in d.sql and d.note == "mv:agg"
    assert "dm_segment_id" in d.sql                  # reads only visible segments
    assert forwarded(h(statement_ctx(**{"datamap.rewrite.enabled": "false"}), q))
    assert h(statement_ctx(), "INSERT INTO sales SELECT * FROM sales") is None
    # a new base segment the datamap has not seen: out of sync, no rewrite
    service.catalog.add_base_segment("db1.sales", ["file:/w/b.parquet"])
    assert forwarded(h(statement_ctx(), q))
    sid = service.catalog.begin_segment("db1", "agg", {"db1.sales": ["1"]})
    service.catalog.publish_segment("db1", "agg", sid, rows=2)
    assert isinstance(h(statement_ctx(), q), Rewrite)
    service.catalog.set_status("db1", "agg", "DISABLED", "test")
    assert forwarded(h(statement_ctx(), q))


def test_select_handler_forwards_on_rewriter_failure(service, monkeypatch):
    _add_built_datamap(service)

    def boom():
        raise RuntimeError("index exploded")
    monkeypatch.setattr(service, "index", boom)
    assert forwarded(DatamapSelectHandler(service)(statement_ctx(), "SELECT country FROM sales"))


def test_candidates_carry_rows_and_segments(service):
    _add_built_datamap(service)
    sid = service.catalog.begin_segment("db1", "agg", {"db1.sales": []})
    service.catalog.publish_segment("db1", "agg", sid, rows=3)
    (cand,) = service.candidates()
    assert cand.rows == 8 and cand.segments == ("0", "1") and not cand.one_row_per_group
    v = service.catalog.version()
    assert service.index() is service.index()        # cached per catalog version
    service.catalog.record_event("db1", "agg", "note")
    assert service.catalog.version() != v and service.index().version == service.catalog.version()


async def test_explain(service):
    h = DatamapDdlHandler(service)
    res = await h(statement_ctx(), "EXPLAIN SELECT country, sum(qty) FROM sales GROUP BY country"
                  ).runner(_upstream)
    assert res.columns == (("plan", "string"),)
    text = res.rows[0][0]
    assert text.startswith("== Datamap Rewrite ==\nNo datamap hit\nRewritten SQL: SELECT country")
    assert "\n\n== Physical Plan ==" in text
    _add_built_datamap(service)
    text = (await h(statement_ctx(), "EXPLAIN EXTENDED SELECT country, sum(qty) FROM sales GROUP BY "
                    "country").runner(_upstream)).rows[0][0]
    lines = text.split("\n")
    assert lines[:2] == ["== Datamap Rewrite ==", "Hit mv DataMap: agg"]
    assert lines[2].startswith("Rewritten SQL: ") and "agg_table" in lines[2]
    # no serving tier in this handler: EXPLAIN says Spark answers (docs/serving.md)
    assert lines[3:5] == ["Served by: spark (no local engine)",
                          "Result cache: bypassed (not served locally)"]
    # the freshness guard's line: this fake Spark cannot say where files live
    assert lines[5].startswith("Freshness: agg: not checked (cannot list db1.sales")
    assert lines[6] == "" and lines[7] == "== Physical Plan =="
    assert "Scan for: SELECT" not in lines[7] or "agg_table" in lines[7]
    text = (await h(statement_ctx(), "EXPLAIN SELECT id FROM sales WHERE qty > 1").runner(_upstream)).rows[0][0]
    assert "No datamap hit" in text and "Skipped agg: " in text


def test_explain_header_format():
    r = RewriteResult("SELECT 1", False, [], {"a": "no match", "b": "disabled"})
    assert explain_header(r) == ("== Datamap Rewrite ==\nNo datamap hit\nRewritten SQL: SELECT 1\n"
                                 "Skipped a: no match\nSkipped b: disabled\n")


def test_referenced_tables():
    assert sorted(referenced_tables("WITH x AS (SELECT * FROM s) SELECT * FROM x JOIN db2.t "
                                    "ON 1=1 JOIN S ON 1=1", "db1")) == ["db1.s", "db2.t"]
    with pytest.raises(ClientError) as e:
        referenced_tables("SELECT FROM FROM (", "db1", "datamap db1.x")
    assert e.value.sqlstate == "42000" and "SELECT of datamap db1.x" in str(e.value)


async def test_load_decisions(service, monkeypatch):
    from proxy.datamaps.handler import DatamapLoadHandler
    from proxy.routing.router import PassThrough
    h = DatamapLoadHandler(service)
    assert h(statement_ctx(), "INSERT INTO sales VALUES ('x', 1)") is None     # no datamap over it
    _add_built_datamap(service)
    d = h(statement_ctx(), "INSERT INTO sales VALUES ('x', 1)")
    assert isinstance(d, PassThrough) and d.after is not None
    calls = []
    monkeypatch.setattr(service, "after_load",
                        lambda table, overwrite=False, started=None:
                        calls.append((table, overwrite)))
    await d.after(_upstream)
    await h(statement_ctx(), "INSERT OVERWRITE TABLE sales VALUES ('x', 1)").after(_upstream)
    assert calls == [("db1.sales", False), ("db1.sales", True)]
    assert h(statement_ctx(), "INSERT INTO db1.other VALUES (1)") is None
    rej = h(statement_ctx(), "INSERT INTO agg_table VALUES ('x', 1, '0')")
    assert isinstance(rej, Reject) and rej.sqlstate == "0A000" and "db1.agg_table" in rej.message


async def test_inserts_behind_a_cte_or_from_clause_are_loads_too(service, monkeypatch):
    from proxy.datamaps.handler import DatamapLoadHandler
    from proxy.routing.router import PassThrough
    _add_built_datamap(service)
    calls = []
    monkeypatch.setattr(service, "after_load",
                        lambda table, overwrite=False, started=None:
                        calls.append((table, overwrite)))
    h = DatamapLoadHandler(service)
    cte = "WITH n AS (SELECT 1 AS id, 'x' AS country, 1 AS qty) INSERT OVERWRITE TABLE sales "
    d = h(statement_ctx(), cte + "SELECT id, country, qty, now() FROM n")
    assert isinstance(d, PassThrough)
    await d.after(_upstream)
    d = h(statement_ctx(), "FROM db1.other INSERT INTO sales SELECT * INSERT INTO db1.other2 SELECT *")
    await d.after(_upstream)
    assert calls == [("db1.sales", True), ("db1.sales", False)]
    rej = h(statement_ctx(), "WITH n AS (SELECT 1) INSERT INTO agg_table SELECT * FROM n")
    assert isinstance(rej, Reject) and rej.sqlstate == "0A000"
    # over the parse limit the targets are unknown: the base tables it names are re-synced
    await DatamapLoadHandler(service, max_sql_bytes=10)(statement_ctx(), cte + "SELECT 1").after(_upstream)
    assert calls[-1] == ("db1.sales", False)


async def test_drop_table_decisions(service, monkeypatch):
    from proxy.datamaps.handler import DatamapLoadHandler
    from proxy.datamaps.upkeep import maintenance
    from proxy.routing.router import PassThrough
    h = DatamapLoadHandler(service)
    assert h(statement_ctx(), "DROP TABLE sales") is None
    _add_built_datamap(service)
    rej = h(statement_ctx(), "DROP TABLE agg_table")
    assert isinstance(rej, Reject) and rej.sqlstate == "0A000" and "DROP DATAMAP agg" in rej.message
    for sql in ("DROP VIEW agg_table", "drop view if exists db1.agg_table",
                "DROP TABLE agg_table_segments"):
        rej = h(statement_ctx(), sql)                       # the live view and its storage alike
        assert isinstance(rej, Reject) and "DROP DATAMAP agg" in rej.message, sql
    # a temporary view may shadow a base table: dropping it leaves the table's datamaps
    assert h(statement_ctx(), "DROP VIEW sales") is None
    d = h(statement_ctx(), "DROP TABLE IF EXISTS db1.sales")
    assert isinstance(d, PassThrough)
    dropped_tables = []
    monkeypatch.setattr(maintenance, "drop", lambda spark, definition: dropped_tables.append(
        definition.table))
    monkeypatch.setattr(service, "spark_provider", lambda: None)
    await d.after(_upstream)
    assert dropped_tables == ["db1.agg_table"]
    assert service.catalog.list_datamaps() == []
    assert service.catalog.base_segments("db1.sales", live_only=False) == []


async def test_alter_table_of_a_base_table_invalidates_its_schema(service, monkeypatch):
    from proxy.datamaps.handler import DatamapLoadHandler
    from proxy.routing.router import PassThrough
    h = DatamapLoadHandler(service)
    assert h(statement_ctx(), "ALTER TABLE sales ADD COLUMNS (x INT)") is None   # no datamap over it
    _add_built_datamap(service)
    d = h(statement_ctx(), "ALTER TABLE sales ADD COLUMNS (x INT)")
    assert isinstance(d, PassThrough) and d.after is not None
    calls = []
    monkeypatch.setattr(service, "invalidate_schemas", lambda table=None: calls.append(table))
    await d.after(_upstream)
    assert calls == ["db1.sales"]
    assert h(statement_ctx(), "ALTER TABLE other ADD COLUMNS (x INT)") is None


def test_minor_compaction_threshold_property():
    from proxy.datamaps.upkeep.compaction import minor_threshold
    assert minor_threshold({}) == 4
    assert minor_threshold({"minor_compaction_threshold": "2"}) == 2
    for bad in ("1", "x", "-3", ""):
        with pytest.raises(ClientError) as e:
            minor_threshold({"minor_compaction_threshold": bad})
        assert e.value.sqlstate == "42000" and "minor_compaction_threshold" in str(e.value)


def _service_with_dimension(tmp_path, loads):
    """A service whose Spark knows db1.sales and the dimension table db1.countries; every
    schema load is recorded in `loads`."""
    schemas = {"db1": {**SALES_SCHEMAS["db1"], "countries": {"country": "string", "region": "string"}}}

    def provider(tables):
        loads.append(sorted(tables))
        found = {db: {t: cols for t, cols in ts.items() if f"{db}.{t}" in tables}
                 for db, ts in schemas.items()}
        if not any(found.values()):
            raise RuntimeError(f"Table or view not found: {', '.join(tables)}")
        return found
    return DatamapService(Catalog.in_state_dir(tmp_path), no_spark, schemas_provider=provider)


JOINED = ("SELECT c.region, sum(s.qty) FROM db1.sales s JOIN db1.countries c "
          "ON s.country = c.country GROUP BY c.region")


def test_dimension_table_schema_is_loaded_off_the_loop_then_the_query_is_rewritten(tmp_path):
    loads: list = []
    svc = _service_with_dimension(tmp_path, loads)
    try:
        _add_built_datamap(svc)
        h = DatamapSelectHandler(svc)
        # first time: the rewriter lacks db1.countries -> forwarded unchanged, load scheduled
        assert forwarded(h(statement_ctx(), JOINED))
        svc.schema_cache.drain(timeout=10)
        assert ["db1.countries"] in loads
        d = h(statement_ctx(), JOINED)
        assert isinstance(d, Rewrite) and "agg_table" in d.sql and "db1.countries" in d.sql
        # a table Spark does not know: one failed load, not retried on every statement
        bad = JOINED.replace("db1.countries", "db1.nowhere")
        assert forwarded(h(statement_ctx(), bad))
        svc.schema_cache.drain(timeout=10)
        n = len(loads)
        assert forwarded(h(statement_ctx(), bad)) and forwarded(h(statement_ctx(), bad))
        svc.schema_cache.drain(timeout=10)
        assert len(loads) == n
    finally:
        svc.close()
        svc.catalog.close()


async def test_explain_loads_missing_schemas_and_shows_the_real_decision(tmp_path):
    loads: list = []
    svc = _service_with_dimension(tmp_path, loads)
    try:
        _add_built_datamap(svc)
        d = DatamapDdlHandler(svc)(statement_ctx(), "EXPLAIN " + JOINED)
        plan = (await d.runner(_upstream)).rows[0][0]
        assert "Hit mv DataMap: agg" in plan and "db1.countries" in plan
    finally:
        svc.close()
        svc.catalog.close()


async def test_sync_datamaps_runner_without_spark(service):
    h = DatamapDdlHandler(service)
    d = h(statement_ctx(), "SYNC DATAMAPS ON TABLE sales")
    assert isinstance(d, Local) and d.note.endswith("SyncDatamaps")
    # no datamaps at all: nothing to look at, no Spark needed
    empty = await h(statement_ctx(), "SYNC DATAMAPS").runner(_upstream)
    assert [c[0] for c in empty.columns] == ["Table", "New Segment", "Files Added",
                                             "Files Removed", "DataMaps"]
    assert empty.rows == []
    with pytest.raises(ClientError) as e:
        await h(statement_ctx(), "SYNC DATAMAPS ON TABLE sales").runner(_upstream)
    assert e.value.sqlstate == "42S02" and "db1.sales has no datamaps" in str(e.value)
    _add_built_datamap(service)
    with pytest.raises(ClientError) as e:
        await h(statement_ctx(), "SYNC DATAMAPS ON TABLE db1.nothing").runner(_upstream)
    assert e.value.sqlstate == "42S02" and "db1.nothing" in str(e.value)


def test_sync_reports_each_datamap_and_survives_failures(service, monkeypatch):
    """The orchestration of SYNC DATAMAPS with the file listing and the refresh job replaced:
    which datamap is refreshed, disabled or left alone, and a failing refresh disables
    only its own datamap."""
    import json as _json
    from proxy.datamaps.freshness.sync import sync_datamaps
    from proxy.datamaps.upkeep.maintenance import BaseSync
    _add_built_datamap(service, "agg")
    _add_built_datamap(service, "lazy_one", "SELECT country, max(qty) FROM db1.sales "
                       "GROUP BY country", lazy=True)
    _add_built_datamap(service, "broken", "SELECT country, min(qty) FROM db1.sales "
                       "GROUP BY country")
    listing = {"db1.sales": BaseSync("db1.sales", None, 0, 0)}
    refreshed = []

    def fake_refresh(db, name, synced=()):
        assert list(synced) == ["db1.sales"]       # just listed: not listed again
        if name == "broken":
            raise RuntimeError("disk full")
        refreshed.append(name)
        return "refreshed"
    m = service.maintenance
    monkeypatch.setattr(m, "sync_base", lambda t, source="discovered": listing[t])
    monkeypatch.setattr(m, "refresh", fake_refresh)
    # nothing changed and everything in sync: rows say so, nothing refreshed
    out = sync_datamaps(m, None)
    assert out.rows == [("db1.sales", "", 0, 0, _json.dumps(
        {"db1.agg": "unchanged", "db1.broken": "unchanged", "db1.lazy_one": "unchanged"}))]
    assert refreshed == []
    # new files: non-lazy refreshed, lazy disabled, the failing one disabled with its reason
    listing["db1.sales"] = BaseSync("db1.sales", "1", 2, 0)
    out = sync_datamaps(m, "db1.sales")
    table, seg, added, removed, actions = out.rows[0]
    assert (table, seg, added, removed) == ("db1.sales", "1", 2, 0)
    actions = _json.loads(actions)
    assert actions["db1.agg"] == "refreshed" and actions["db1.lazy_one"] == "disabled"
    assert actions["db1.broken"].startswith("failed: refresh by SYNC DATAMAPS failed: disk full")
    assert refreshed == ["agg"]
    status = {r.name: r.status for r in service.catalog.list_datamaps()}
    assert status == {"agg": "ENABLED", "lazy_one": "DISABLED", "broken": "DISABLED"}


def test_auto_compaction_setting_and_segment_kinds(service):
    from proxy.datamaps.upkeep.compaction import auto_compaction
    assert auto_compaction({}, False) is False and auto_compaction({}, True) is True
    assert auto_compaction({"auto_compaction": "TRUE"}, False) is True
    assert auto_compaction({"auto_compaction": "false"}, True) is False
    _add_built_datamap(service)
    c = service.catalog
    for _ in range(2):
        sid = c.begin_segment("db1", "agg", {"db1.sales": ["0"]})
        c.publish_segment("db1", "agg", sid, rows=1, kind="refreshed")
    sid = c.begin_segment("db1", "agg", {"db1.sales": ["0"]})
    c.publish_segment("db1", "agg", sid, rows=1, supersedes=["1", "2"], kind="compacted")
    assert c.segment_kinds("db1", "agg") == {"0": "built", "1": "refreshed", "2": "refreshed",
                                             "3": "compacted"}


def test_auto_compaction_failure_is_recorded_and_harmless(service, monkeypatch):
    """Auto-compaction runs only when enabled and enough incremental segments are visible;
    when it fails the datamap stays ENABLED with its segments, and the history says why."""
    _add_built_datamap(service)
    c = service.catalog
    rec = c.get_datamap("db1", "agg")
    tried = []

    def failing(r, ids):
        tried.append(list(ids))
        raise RuntimeError("no space left")
    monkeypatch.setattr(service.compaction, "merge", failing)
    for _ in range(2):
        sid = c.begin_segment("db1", "agg", {"db1.sales": ["0"]})
        c.publish_segment("db1", "agg", sid, rows=1, kind="refreshed")
    service.compaction.after_refresh(rec)                       # off: nothing tried
    assert tried == []
    service.auto_compaction = True                   # server default on; threshold 4 > 2
    service.compaction.after_refresh(rec)
    assert tried == []
    rec = dataclasses.replace(rec, properties={"minor_compaction_threshold": "2"})
    service.compaction.after_refresh(rec)            # the catalog's properties count (threshold 4 there)
    assert tried == []
    c2 = dataclasses.replace(rec, properties={"auto_compaction": "true",
                                              "minor_compaction_threshold": "2"})
    monkeypatch.setattr(c, "require_datamap", lambda db, name: c2)
    service.compaction.after_refresh(c2)
    assert tried == [["1", "2"]]
    assert c.get_datamap("db1", "agg").status == "ENABLED"
    assert [s.id for s in c.visible_segments("db1", "agg")] == ["0", "1", "2"]
    assert c.events("db1", "agg")[-1].kind == "auto-compaction-failed"
    assert "no space left" in c.events("db1", "agg")[-1].detail


def test_a_temporary_view_shadowing_a_base_table_is_not_answered_from_datamaps(service):
    """Spark reads the session's temporary view `sales` for an unqualified `sales`: an
    answer from a datamap over db1.sales would be another table's rows."""
    _add_built_datamap(service)
    h = DatamapSelectHandler(service)
    q = "SELECT country, sum(qty) FROM sales GROUP BY country"
    shadowed = statement_ctx(**{"datamap.session.temp_views": "sales"})
    assert forwarded(h(shadowed, q))
    assert isinstance(h(shadowed, q.replace("FROM sales", "FROM db1.sales")), Rewrite)
    assert isinstance(h(statement_ctx(**{"datamap.session.temp_views": "other"}), q), Rewrite)
