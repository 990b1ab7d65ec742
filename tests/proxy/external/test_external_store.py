"""ExternalStore's catalog rows on both catalog backends (SQLite, PostgreSQL). No Spark."""
from __future__ import annotations

from proxy.datamaps.catalog.store import Catalog
from proxy.external.store import (
    COMPACTED, DELETED, LIVE, ExternalSegment, ExternalStore, ExternalTable, MappedFile,
)


def _segment(sid: int, status: str = LIVE) -> ExternalSegment:
    return ExternalSegment("db.t", sid, status, (f"/in/{sid}.csv",),
                           (MappedFile(f"file:/loc/seg_{sid}/a.csv", f"/in/{sid}.csv", 10),),
                           10, 3, 1.0, 0.5)


def test_tables_and_segments_round_trip(catalog_location):
    catalog = Catalog(catalog_location)
    store = ExternalStore(catalog)
    t = ExternalTable("db.t", "db.__t_csv", "/loc", (("a", "int"),), ("a",), {"format": "csv"})
    store.add(t)
    assert store.get("db.t") == t and store.owner_of_source("db.__t_csv") == "db.t"
    assert store.next_id("db.t") == 0
    store.add_segment(_segment(0)), store.add_segment(_segment(1))
    store.add_segment(_segment(2), replaces=(0, 1))
    assert [(s.id, s.status, s.merged_into) for s in store.segments("db.t")] == [
        (2, LIVE, None), (1, COMPACTED, 2), (0, COMPACTED, 2)]
    store.mark_deleted("db.t", [2])
    assert store.segments("db.t", live_only=True) == [] and store.next_id("db.t") == 3
    assert store.segments("db.t")[0].status == DELETED
    store.update(ExternalTable("db.u", "db.__t_csv", "/loc", (("a", "int"),), ("a",), {}),
                 old_name="db.t")
    assert store.names() == ["db.u"] and len(store.segments("db.u")) == 3
    store.remove("db.u")
    assert store.names() == []
    catalog.close()
