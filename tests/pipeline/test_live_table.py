"""`<name>_table` holds exactly the live rows, never a superseded or unpublished one: the rows of the visible
segments, after incremental refreshes, while a segment is written but not yet published,
after COMPACT within the grace period (the superseded partitions still in the storage
table), after a refresh that failed midway, and when replacing the view failed at a
rebuild (the partitions it still names are kept until recovery replaces it); a datamap
table from before the view is adopted at start. A query rewritten before a compaction
still answers after it. DatamapService on the shared in-process SparkSession;
tests/e2e/test_mv_guide.py reads the table through the proxy and straight from the Spark
Thrift Server, after refreshes, COMPACT, a failed refresh and a rebuild."""
from __future__ import annotations

import uuid

import pytest

from proxy.datamaps.catalog.store import Catalog
from proxy.datamaps.handler import DatamapDdlHandler, DatamapSelectHandler
from proxy.datamaps.service import DatamapService
import proxy.datamaps.upkeep.live_view as live_view
import proxy.datamaps.upkeep.maintenance as maintenance
from proxy.routing.router import Rewrite, StatementContext

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]


def _rows(spark, sql):
    return sorted((tuple(r) for r in spark.sql(sql).collect()), key=repr)


def _count(spark, table, where="true"):
    return spark.sql(f"SELECT count(*) FROM {table} WHERE {where}").collect()[0][0]


def _assert_live(spark, catalog, db, name="agg"):
    """The view's rows are the visible segments' rows: as many as the catalog counted."""
    visible = catalog.visible_segments(db, name)
    ids = ", ".join(f"'{s.id}'" for s in visible) or "NULL"
    got = _rows(spark, f"SELECT * FROM {db}.{name}_table")
    assert got == _rows(spark, f"SELECT * FROM {db}.{name}_table_segments "
                               f"WHERE dm_segment_id IN ({ids})")
    assert len(got) == sum(s.rows for s in visible)
    return visible


async def test_datamap_table_shows_only_live_rows(pipeline_spark, pipe_db, tmp_path,
                                                  monkeypatch):
    spark, catalog = pipeline_spark, Catalog.in_state_dir(tmp_path)
    svc = DatamapService(catalog, lambda: spark)
    svc.garbage_grace_s = 3600     # superseded partitions stay for the whole test
    t = f"{pipe_db}.live_{uuid.uuid4().hex[:6]}"
    spark.sql(f"CREATE TABLE {t} USING parquet AS SELECT * FROM VALUES ('cn', 1), ('us', 2), "
              "(NULL, 3) AS v(country, qty)")
    ctx = StatementContext("s", "me", pipe_db, {}, 10)
    ddl, select = DatamapDdlHandler(svc), DatamapSelectHandler(svc)

    async def run(sql):
        async def no_upstream(sql):
            raise AssertionError(sql)
        return await ddl(ctx, sql).runner(no_upstream)

    def load(rows, overwrite=False):
        spark.sql(f"INSERT {'OVERWRITE' if overwrite else 'INTO'} {t} VALUES {rows}")
        svc.after_load(t, overwrite=overwrite)

    await run(f"CREATE DATAMAP agg USING 'mv' AS SELECT country, sum(qty), count(*) FROM {t} "
              "GROUP BY country")
    view = f"{pipe_db}.agg_table"
    storage = f"{pipe_db}.agg_table_segments"

    # incremental refreshes: several segments, the same group in more than one; the
    # second one looked at in flight: its partition written and registered, not published
    load("('cn', 4), ('fr', 5)")
    seen = {}
    real_publish = catalog.publish_segment

    def publish(db, name, segment_id, **kw):
        seen["new"] = _count(spark, storage, f"dm_segment_id = '{segment_id}'")
        seen["view"] = _count(spark, view)
        return real_publish(db, name, segment_id, **kw)
    monkeypatch.setattr(catalog, "publish_segment", publish)
    before = _count(spark, view)
    load("('cn', 6), ('de', 7)")
    monkeypatch.setattr(catalog, "publish_segment", real_publish)
    assert seen == {"new": 2, "view": before}
    assert [s.id for s in _assert_live(spark, catalog, pipe_db)] == ["0", "1", "2"]

    # COMPACT within the grace period; a query rewritten just before it still answers
    q = f"SELECT country, sum(qty) AS s FROM {t} GROUP BY country"
    early = select(ctx, q)
    assert isinstance(early, Rewrite) and "agg_table_segments" in early.sql
    await run("ALTER DATAMAP agg COMPACT 'MAJOR'")
    visible = _assert_live(spark, catalog, pipe_db)
    assert len(visible) == 1 and _count(spark, storage) > _count(spark, view)
    assert _rows(spark, early.sql) == _rows(spark, q)

    # a refresh that fails after writing its partition: nothing of it shows
    real_append = maintenance.incremental_append

    def append_then_fail(*a, **k):
        real_append(*a, **k)
        raise RuntimeError("injected failure after the write")
    monkeypatch.setattr(maintenance, "incremental_append", append_then_fail)
    load("('cn', 100)")
    monkeypatch.setattr(maintenance, "incremental_append", real_append)
    failed = catalog.segments(pipe_db, "agg")[0]
    assert failed.status == "FAILED"
    assert _count(spark, storage, f"dm_segment_id = '{failed.id}'")    # written, never shown
    assert catalog.get_datamap(pipe_db, "agg").status == "DISABLED"
    _assert_live(spark, catalog, pipe_db)
    load("('us', 8)")     # the next load catches up
    assert catalog.get_datamap(pipe_db, "agg").status == "ENABLED"
    _assert_live(spark, catalog, pipe_db)
    assert _rows(spark, select(ctx, q).sql) == _rows(spark, q)

    # a rebuild (INSERT OVERWRITE) supersedes every segment, and replacing the view
    # fails: it keeps showing the whole previous set, whose partitions are never dropped
    # while it names them; recovery replaces it
    old = [s.id for s in catalog.visible_segments(pipe_db, "agg")]
    old_rows = sum(s.rows for s in catalog.visible_segments(pipe_db, "agg"))
    assert len(old) == 2

    def broken(*_a, **_k):
        raise RuntimeError("metastore unavailable")
    monkeypatch.setattr(live_view, "show_live", broken)
    load("('jp', 9), ('jp', 10)", overwrite=True)
    shown = _rows(spark, f"SELECT dm_segment_id FROM {view} GROUP BY dm_segment_id")
    assert [r[0] for r in shown] == old and len(catalog.visible_segments(pipe_db, "agg")) == 1
    svc.garbage_grace_s = 0
    rec = catalog.get_datamap(pipe_db, "agg")
    svc.garbage.drop(rec)
    assert _count(spark, storage, f"dm_segment_id IN ({', '.join(map(repr, old))})") == old_rows
    assert any(e.kind == "live-view-failed" for e in catalog.events(pipe_db, "agg"))
    monkeypatch.undo()
    svc.recover()
    _assert_live(spark, catalog, pipe_db)
    assert _rows(spark, f"SELECT country FROM {view}") == [("jp",)]
    assert _count(spark, storage) == _count(spark, view) == 1

    # a datamap table from before the view (the catalog's paths under it): recovery makes
    # it the storage table, files and recorded paths moved, and shows the view again
    at = catalog.visible_segments(pipe_db, "agg")[0].files[0].rsplit("/dm_segment_id=", 1)[0]
    spark.sql(f"DROP VIEW {view}")
    spark.sql(f"ALTER TABLE {storage} RENAME TO {view}")
    legacy = at.removesuffix("_segments")
    catalog.relocate_files(pipe_db, "agg", at, legacy)
    svc.recover()
    _assert_live(spark, catalog, pipe_db)
    files = [f for s in catalog.visible_segments(pipe_db, "agg") for f in s.files]
    assert files and all(f.startswith(at + "/") for f in files), (files, at)
    assert _rows(spark, select(ctx, q).sql) == _rows(spark, q)

    await run("DROP DATAMAP agg")
    assert not spark.catalog.tableExists(view) and not spark.catalog.tableExists(storage)
    catalog.close()
