"""Catalog store: CRUD, segments and publish, concurrency, restart, migration."""
from __future__ import annotations

import json
import sqlite3
import threading

import pytest

from proxy.datamaps.catalog import store as cat
from proxy.datamaps.catalog.records import format_time
from proxy.datamaps.catalog.store import Catalog, CatalogError
from proxy.datamaps.ddl.show import (SHOW_DATAMAP_COLUMNS, SHOW_SEGMENTS_COLUMNS, show_datamaps,
                                     show_segments)
from tests.support.catalog import DEFN, create_datamap as _create

@pytest.fixture
def catalog(catalog_location):
    c = Catalog(catalog_location)
    yield c
    c.close()


def test_create_get_list_drop(catalog):
    v0 = catalog.version()
    rec = _create(catalog)
    assert catalog.version() > v0
    assert rec.table == "db1.agg_table" and rec.qualified == "db1.agg"
    assert rec.status == cat.DatamapStatus.DISABLED
    assert rec.definition == DEFN and rec.compiled_version == 1
    assert catalog.get_datamap("db1", "agg") == rec
    assert catalog.get_datamap("db1", "nope") is None
    assert [r.name for r in catalog.list_datamaps()] == ["agg"]
    assert [r.name for r in catalog.list_datamaps(base_table="db1.sales")] == ["agg"]
    assert catalog.list_datamaps(base_table="db1.other") == []
    assert catalog.list_datamaps(db="db2") == []
    assert catalog.datamap_by_table("db1.agg_table").name == "agg"
    assert catalog.datamap_by_table("db1.sales") is None
    with pytest.raises(CatalogError) as e:
        _create(catalog)
    assert e.value.sqlstate == "42710" and "db1.agg already exists" in str(e.value)
    removed, segs = catalog.drop_datamap("db1", "agg")
    assert removed.name == "agg" and segs == []
    assert catalog.get_datamap("db1", "agg") is None
    with pytest.raises(CatalogError) as e:
        catalog.drop_datamap("db1", "agg")
    assert e.value.sqlstate == "42S02" and "db1.agg does not exist" in str(e.value)
    with pytest.raises(CatalogError) as e:
        catalog.set_status("db1", "agg", cat.DatamapStatus.ENABLED)
    assert e.value.sqlstate == "42S02"


def test_status_and_events(catalog):
    _create(catalog, lazy=True)
    assert "deferred" in catalog.get_datamap("db1", "agg").status_reason
    catalog.set_status("db1", "agg", cat.DatamapStatus.ENABLED)
    changed = catalog.disable_on_table_change("db1.sales", "db1.sales changed")
    assert [r.name for r in changed] == ["agg"]
    rec = catalog.get_datamap("db1", "agg")
    assert rec.status == cat.DatamapStatus.DISABLED and rec.status_reason == "db1.sales changed"
    assert [e.kind for e in catalog.events("db1", "agg")] == ["created", "enabled", "disabled"]


def test_segments_publish_and_sync(catalog):
    _create(catalog)
    assert catalog.sync_status("db1", "agg") is None
    b0 = catalog.add_base_segment("db1.sales", ["file:/w/b.parquet", "file:/w/a.parquet"],
                                  rows=10, load_seconds=0.5)
    b1 = catalog.add_base_segment("db1.sales", ["file:/w/c.parquet"], source="discovered")
    assert (b0.id, b1.id) == ("0", "1") and b0.files == ("file:/w/a.parquet", "file:/w/b.parquet")
    assert catalog.base_files("db1.sales") == {"file:/w/a.parquet", "file:/w/b.parquet",
                                               "file:/w/c.parquet"}
    assert [s.id for s in catalog.pending_base_segments("db1", "agg")["db1.sales"]] == ["0", "1"]
    assert not catalog.is_in_sync("db1", "agg")

    s0 = catalog.begin_segment("db1", "agg", {"db1.sales": ["0", "1"]})
    assert catalog.visible_segments("db1", "agg") == []
    v = catalog.version()
    catalog.publish_segment("db1", "agg", s0, rows=3, files=["p0"], seconds=1.25, kind="built")
    assert catalog.version() > v
    assert catalog.get_datamap("db1", "agg").status == cat.DatamapStatus.ENABLED
    assert catalog.is_in_sync("db1", "agg")
    sync = catalog.sync_status("db1", "agg")
    assert sync["db1.sales"] == "1" and "loadEndTime" in sync

    b2 = catalog.add_base_segment("db1.sales", ["file:/w/d.parquet"])
    assert not catalog.is_in_sync("db1", "agg")
    s1 = catalog.begin_segment("db1", "agg", {"db1.sales": [b2.id]})
    catalog.publish_segment("db1", "agg", s1, rows=2, kind="refreshed")
    assert [s.id for s in catalog.visible_segments("db1", "agg")] == ["0", "1"]
    assert catalog.is_in_sync("db1", "agg")

    # compaction: one commit swaps the visible set
    s2 = catalog.begin_segment("db1", "agg", {"db1.sales": ["0", "1", "2"]})
    catalog.publish_segment("db1", "agg", s2, rows=4, supersedes=[s0, s1], kind="compacted")
    assert [s.id for s in catalog.visible_segments("db1", "agg")] == ["2"]
    assert {s.id for s in catalog.garbage_segments("db1", "agg")} == {"0", "1"}
    catalog.mark_dropped("db1", "agg", ["0", "1"])
    assert catalog.garbage_segments("db1", "agg") == []
    assert catalog.is_in_sync("db1", "agg")

    # a failed refresh never becomes visible and disables the datamap
    catalog.add_base_segment("db1.sales", ["file:/w/e.parquet"])
    s3 = catalog.begin_segment("db1", "agg", {"db1.sales": ["3"]})
    catalog.fail_segment("db1", "agg", s3, "executor lost")
    rec = catalog.get_datamap("db1", "agg")
    assert rec.status == cat.DatamapStatus.DISABLED and rec.status_reason == "executor lost"
    assert [s.id for s in catalog.visible_segments("db1", "agg")] == ["2"]
    with pytest.raises(CatalogError):
        catalog.publish_segment("db1", "agg", s3, rows=1)
    kinds = [e.kind for e in catalog.events("db1", "agg")]
    assert kinds == ["created", "built", "refreshed", "compacted", "failed"]

    # overwrite: all live base segments go
    assert catalog.mark_base_deleted("db1.sales") == 4
    assert catalog.base_segments("db1.sales") == []
    assert len(catalog.base_segments("db1.sales", live_only=False)) == 4
    nxt = catalog.add_base_segment("db1.sales", ["file:/w/f.parquet"])
    assert nxt.id == "4"   # ids are never reused

    _, segs = catalog.drop_datamap("db1", "agg")
    assert [s.id for s in segs] == ["0", "1", "2", "3"]
    _create(catalog)
    assert catalog.begin_segment("db1", "agg", {}) == "0"
    catalog.forget_base_table("db1.sales")
    assert catalog.base_segments("db1.sales", live_only=False) == []


def test_begin_segment_unknown_datamap(catalog):
    with pytest.raises(CatalogError) as e:
        catalog.begin_segment("db1", "ghost", {})
    assert e.value.sqlstate == "42S02" and "db1.ghost" in str(e.value)


def test_show_rows(catalog):
    _create(catalog)
    res = show_datamaps(catalog, catalog.list_datamaps())
    assert [c for c, _ in res.columns] == ["DataMapName", "ClassName", "Associated Table",
                                            "DataMap Properties", "DataMap Status", "Sync Status",
                                            "Status Reason", "Depends On", "Rewrite", "Building",
                                            "Refresh Mode", "Refresh Reason"]
    assert res.columns == SHOW_DATAMAP_COLUMNS
    assert res.rows == [("agg", "mv", "db1.agg_table",
                         "'sort_columns'='country', 'table_blocksize'='64'", "DISABLED", "NA",
                         "not built yet", "", "true", "", *res.rows[0][10:])]
    assert res.rows[0][10] in ("incremental", "NA")
    catalog.add_base_segment("db1.sales", ["a"], rows=5, load_seconds=0.25)
    sid = catalog.begin_segment("db1", "agg", {"db1.sales": ["0"]})
    # a build writing its segment shows, and since when
    [writing] = [s for s in catalog.segments("db1", "agg") if s.id == sid]
    building = show_datamaps(catalog, catalog.list_datamaps()).rows[0][9]
    assert building.startswith(f"segment {sid} since {format_time(writing.load_start)} (")
    catalog.publish_segment("db1", "agg", sid, rows=2, files=["x", "y"], seconds=2.0, kind="built")
    row = show_datamaps(catalog, catalog.list_datamaps()).rows[0]
    assert row[9] == ""
    assert row[4] == "ENABLED" and row[6] == ""
    sync = json.loads(row[5])
    assert list(sync) == ["db1.sales", "loadEndTime"] and sync["db1.sales"] == "0"

    segs = show_segments(catalog, "db1.agg_table")
    assert [c for c, _ in segs.columns] == ["SegmentSequenceId", "Status", "Load Start Time",
                                             "Load Time Taken", "Rows", "Files", "Extra Info"]
    assert segs.columns == SHOW_SEGMENTS_COLUMNS
    (sid_, status, start, took, rows, files, extra), = segs.rows
    assert (sid_, status, took, rows, files) == ("0", "Success", "2.000s", 2, 2)
    assert json.loads(extra) == {"db1.sales": ["0"]} and len(start) == 23
    base = show_segments(catalog, "db1.sales")
    assert base.rows[0][:2] == ("0", "Success") and base.rows[0][4:] == (5, 1, "")
    assert show_segments(catalog, "db1.unknown") is None


def test_concurrent_threads(catalog_location):
    """Two threads (each like an asyncio worker thread) and a second connection to the
    same file: no lost updates, ids unique, version bumped once per change."""
    a = Catalog(catalog_location)
    b = Catalog(catalog_location)   # another process/replica on the same file
    _create(a)
    v0 = a.version()
    ids: list[str] = []
    errors: list[BaseException] = []

    def work(c: Catalog, n: int):
        try:
            for i in range(n):
                seg = c.add_base_segment("db1.sales", [f"f{threading.get_ident()}-{i}"])
                ids.append(seg.id)
                sid = c.begin_segment("db1", "agg", {"db1.sales": [seg.id]})
                c.publish_segment("db1", "agg", sid, rows=1)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(c, 40)) for c in (a, a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(map(int, ids)) == list(range(120))
    assert len(a.visible_segments("db1", "agg")) == 120
    assert a.is_in_sync("db1", "agg") and b.is_in_sync("db1", "agg")
    assert a.version() == v0 + 120 * 3
    a.close(), b.close()


def test_restart_keeps_everything(catalog_location):
    c = Catalog(catalog_location)
    _create(c)
    c.add_base_segment("db1.sales", ["f1"])
    sid = c.begin_segment("db1", "agg", {"db1.sales": ["0"]})
    c.publish_segment("db1", "agg", sid, rows=7, kind="built")
    version = c.version()
    c.close()
    c = Catalog(catalog_location)
    assert c.version() == version
    rec = c.get_datamap("db1", "agg")
    assert rec.status == cat.DatamapStatus.ENABLED and rec.definition == DEFN
    assert c.visible_segments("db1", "agg")[0].rows == 7
    assert c.add_base_segment("db1.sales", ["f2"]).id == "1"
    c.close()


def test_migration_from_version_0(tmp_path):
    path = tmp_path / "catalog.db"
    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA user_version").fetchone()[0] == 0
    raw.execute("CREATE TABLE unrelated (x)")   # a version-0 file may hold anything else
    raw.commit(), raw.close()
    c = Catalog(path)
    assert c.schema_version() == cat.SCHEMA_VERSION >= 1
    assert c.version() == 0
    _create(c)
    c.close()
    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    raw.execute(f"PRAGMA user_version = {cat.SCHEMA_VERSION + 1}")
    raw.commit(), raw.close()
    with pytest.raises(CatalogError) as e:
        Catalog(path)
    assert "newer than this program supports" in str(e.value)


def test_migration_1_to_2_backfills_segment_kinds_from_the_history(tmp_path):
    """Schema 2 records how each datamap segment was made; a version-1 file gets the kinds
    its history wrote ("segment <id>[ replaces ...]")."""
    path = tmp_path / "catalog.db"
    c = Catalog(path)
    _create(c)
    for kind, supersedes in (("built", ()), ("refreshed", ()), ("refreshed", ()),
                             ("compacted", ("1", "2"))):
        sid = c.begin_segment("db1", "agg", {"db1.sales": ["0"]})
        c.publish_segment("db1", "agg", sid, rows=1, kind=kind, supersedes=supersedes)
    sid = c.begin_segment("db1", "agg", {"db1.sales": ["0"]})   # never published
    c.close()
    raw = sqlite3.connect(path)          # the same file as version 1 wrote it
    raw.execute("ALTER TABLE dm_segments DROP COLUMN kind")
    raw.execute("DROP TABLE query_log")  # a later version's table (its columns added later still)
    raw.execute("DROP INDEX datamaps_by_change")                   # added by a later version
    raw.execute("ALTER TABLE datamaps DROP COLUMN changed")
    raw.execute("PRAGMA user_version = 1")
    raw.commit(), raw.close()
    c = Catalog(path)
    assert c.schema_version() == cat.SCHEMA_VERSION >= 2
    assert c.segment_kinds("db1", "agg") == {"0": "built", "1": "refreshed", "2": "refreshed",
                                             "3": "compacted"}
    assert [(s.id, s.kind) for s in c.visible_segments("db1", "agg")] == [
        ("0", "built"), ("3", "compacted")]
    c.close()


def test_failed_migration_rolls_back(tmp_path, monkeypatch):
    from proxy.datamaps.catalog import schema
    monkeypatch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS + ["CREATE TABLE broken (;"])
    monkeypatch.setattr(schema, "SCHEMA_VERSION", len(schema.MIGRATIONS))
    with pytest.raises(sqlite3.Error):
        Catalog(tmp_path / "c.db")
    raw = sqlite3.connect(tmp_path / "c.db")
    assert raw.execute("PRAGMA user_version").fetchone()[0] == 0
    assert raw.execute("SELECT count(*) FROM sqlite_master WHERE name = 'datamaps'").fetchone()[0] == 0


def test_overwritten_base_segments_make_a_datamap_stale(catalog):
    _create(catalog)
    catalog.add_base_segment("db1.sales", ["a"])
    sid = catalog.begin_segment("db1", "agg", {"db1.sales": ["0"]})
    catalog.publish_segment("db1", "agg", sid, rows=1, kind="built")
    assert catalog.is_in_sync("db1", "agg")
    assert not catalog.covers_deleted_base_segments("db1", "agg")
    catalog.mark_base_deleted("db1.sales")
    assert catalog.covers_deleted_base_segments("db1", "agg")
    assert not catalog.is_in_sync("db1", "agg")   # nothing pending, but stale


def test_recent_version_sees_own_changes_at_once_and_others_within_max_age(catalog_location):
    a = Catalog(catalog_location)
    b = Catalog(catalog_location)
    v0 = a.recent_version()
    _create(a)                                   # our own write: visible at once
    v1 = a.recent_version()
    assert v1 > v0 and v1 == a.version()
    b.add_base_segment("db1.sales", ["f-other"])   # another replica's write
    assert a.recent_version(max_age=3600) == v1    # served from memory
    assert a.recent_version(max_age=0) == v1 + 1   # re-read once the reading is old
    a.close(), b.close()


def test_compaction_of_segments_hidden_meanwhile_is_refused(catalog):
    """A compaction publishes only over segments still visible: if the datamap was
    invalidated (or rebuilt) while it ran, its merged rows are stale and stay hidden."""
    _create(catalog)
    for kind in ("built", "refreshed"):
        sid = catalog.begin_segment("db1", "agg", {"db1.sales": ["0"]})
        catalog.publish_segment("db1", "agg", sid, rows=1, kind=kind)
    sid = catalog.begin_segment("db1", "agg", {"db1.sales": ["0"]})
    assert catalog.invalidate_datamap("db1", "agg", "zone changed") == ["0", "1"]
    with pytest.raises(CatalogError) as e:
        catalog.publish_segment("db1", "agg", sid, rows=1, supersedes=["0", "1"],
                                kind="compacted")
    assert "0, 1" in str(e.value) and "db1.agg" in str(e.value)
    assert catalog.visible_segments("db1", "agg") == []
    rec = catalog.get_datamap("db1", "agg")
    assert rec.status == cat.DatamapStatus.DISABLED and rec.status_reason == "zone changed"


def test_base_rows_of_tables_together(catalog):
    """What the query log scales its time-saved estimate by: the live segments' rows."""
    catalog.add_base_segment("db1.sales", ["a"], rows=5)
    catalog.add_base_segment("db1.sales", ["b"], rows=7)
    catalog.add_base_segment("db1.items", ["c"], rows=3)
    assert catalog.base_rows(["db1.sales"]) == 12
    assert catalog.base_rows(["db1.sales", "db1.items", "db1.sales"]) == 15
    catalog.mark_base_deleted("db1.sales", ["0"])
    assert catalog.base_rows(["db1.sales"]) == 7
    catalog.add_base_segment("db1.csv", ["d"], rows=None)
    for unknown in (["db1.csv"], ["db1.sales", "db1.untracked"], []):
        assert catalog.base_rows(unknown) is None


def test_a_full_refresh_definition_survives_the_catalog():
    from proxy.datamaps.catalog.records import definition_from_json, definition_to_json
    from rewriter import compile_datamap
    from tests.support.rewriter_cases import SCHEMA
    d = compile_datamap("u", "SELECT country FROM sales UNION SELECT region FROM store",
                        SCHEMA, "default")
    back = definition_from_json(definition_to_json(d))
    assert back == d and back.refresh == "full" and back.refresh_reason.startswith("UNION ")
