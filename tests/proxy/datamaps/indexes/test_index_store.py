"""IndexStore on a real catalog file (no Spark): definitions, entries, the merged
per-file statistics the query side reads, and when its cache is dropped."""
import contextlib
import datetime
import decimal

import pytest

from proxy.datamaps.catalog.records import CatalogError
from proxy.datamaps.catalog.store import Catalog
from proxy.datamaps.ddl.index_providers import CreateIndexDatamap
from proxy.datamaps.ddl.parser import Name
from proxy.datamaps.indexes.commands import IndexService
from proxy.datamaps.indexes.entries import Entry, IndexStore
from rewriter.prune import bloom

TYPES = [("id", "bigint"), ("d", "date"), ("m", "decimal(10,2)"), ("s", "string")]


@pytest.fixture
def store(catalog_location):
    c = Catalog(catalog_location)
    yield IndexStore(c, version_max_age=0.0)
    c.close()


def _bloom(values, m=256, k=3):
    bits = bytearray(m // 8)
    for v in values:
        for p in bloom.probes(bloom.spark_hash(v, "bigint"), m, k):
            bits[p >> 3] |= 1 << (p & 7)
    return m, k, bloom.pack(bytes(bits), True)


def _setup(store):
    mm = store.create("db", "dm1", "DB.Fact", "minmax", TYPES, {}, enabled=True)
    bf = store.create("db", "dm2", "db.fact", "bloomfilter", TYPES[:1],
                      {"index_columns": "id"}, enabled=True)
    store.put(mm, [Entry("file:/a", 10, 111, 3, {"id": (1, 9, 0), "d": ("2024-01-02",
                                                   "2024-03-04", 1), "m": ("1.50", "2.25", 0),
                                                   "s": (None, None, 3)}),
                   Entry("file:/b", 20, 222, 0, {})], segment="0")
    store.put(bf, [Entry("file:/a", 10, 111, 3, {}, {"id": _bloom([1, 5, 9])})], segment="0")
    return mm, bf


def test_file_stats_merge_minmax_and_bloom_with_decoded_values(store):
    _setup(store)
    infos = store.indexes_on("db.fact")
    assert [(i.name, i.kind, i.columns, i.enabled) for i in infos] == [
        ("dm1", "minmax", ("id", "d", "m", "s"), True), ("dm2", "bloomfilter", ("id",), True)]
    stats = store.file_stats("db.fact")
    a = stats["file:/a"].columns
    assert stats["file:/a"].rows == 3 and stats["file:/b"].rows == 0
    assert (a["id"].low, a["id"].high, a["id"].nulls) == (1, 9, 0)
    assert a["d"].low == datetime.date(2024, 1, 2) and a["m"].high == decimal.Decimal("2.25")
    assert a["s"].low is None and a["s"].nulls == 3
    assert a["id"].bloom.might_contain(5) and not all(a["id"].bloom.might_contain(v)
                                                      for v in range(100, 140))
    assert store.file_identity("db.fact") == {"file:/a": (10, 111), "file:/b": (20, 222)}


def test_disabled_indexes_and_disagreeing_identities_are_left_out(store):
    mm, bf = _setup(store)
    store.put(bf, [Entry("file:/b", 21, 333, 0, {}, {"id": _bloom([])})])   # b was rewritten
    assert "file:/b" not in store.file_stats("db.fact")
    assert "file:/b" not in store.file_identity("db.fact")
    store.set_status("db", "dm1", False, "REBUILD failed: boom")
    stats = store.file_stats("db.fact")
    assert stats["file:/a"].columns["id"].low is None     # only the bloom is left
    assert store.file_stats("db.fact")["file:/a"].columns["id"].bloom is not None
    assert store.get("db", "dm1").status_reason == "REBUILD failed: boom"


def test_forget_remap_and_drop(store):
    mm, bf = _setup(store)
    store.forget("db.fact", ["file:/b"])
    assert store.files(mm) == {"file:/a"}
    assert store.remap_segments("db.fact", ["0"], "5") == 2
    assert store.segments(mm) == {"file:/a": "5"}
    store.drop("db", "dm2")
    assert [i.name for i in store.indexes_on("db.fact")] == ["dm1"]
    assert store.file_stats("db.fact")["file:/a"].columns["id"].bloom is None


def test_names_are_shared_with_mv_datamaps(store):
    _setup(store)
    with pytest.raises(CatalogError) as info:
        store.create("db", "dm1", "db.other", "minmax", TYPES, {})
    assert info.value.sqlstate == "42710"
    store.catalog.create_datamap("db", "mv1", provider="mv", select_sql="SELECT 1",
                                 base_tables=["db.fact"])
    with pytest.raises(CatalogError):
        store.create("db", "mv1", "db.fact", "minmax", TYPES, {})
    assert [r.name for r in store.catalog.list_datamaps()] == ["mv1"]   # no mv candidate


def test_cache_follows_other_processes(catalog_location):
    a = IndexStore(Catalog(catalog_location), version_max_age=0.0)
    b = IndexStore(Catalog(catalog_location), version_max_age=0.0)
    assert b.file_stats("db.fact") == {}
    _setup(a)
    assert set(b.file_stats("db.fact")) == {"file:/a", "file:/b"}
    first = b.file_stats("db.fact")["file:/a"]
    assert b.file_stats("db.fact")["file:/a"] is first        # cached while unchanged


def test_show_rows(store):
    _setup(store)
    service = IndexService(store.catalog, spark=None, locks=None)
    rows = service.rows("db.fact")
    assert [r[:3] + r[4:5] for r in rows] == [("dm1", "minmax", "db.fact", "ENABLED"),
                                              ("dm2", "bloomfilter", "db.fact", "ENABLED")]
    assert "'index_columns'='id'" in rows[1][3] and '"db.fact": "1 files"' in rows[1][5]


def test_bounds_python_cannot_hold_are_unknown():
    from proxy.datamaps.indexes.entries import decode
    assert decode("+12024-01-02", "date") is None
    assert decode("2021-03-04 05:06:07.1", "timestamp").microsecond == 100000
    assert decode("1.5", "decimal(3,1)") == decimal.Decimal("1.5")


def test_a_time_zone_change_disables_indexes_on_timestamp_columns(tmp_path):
    """TIMESTAMP bounds are wall-clock times of the zone they were built in: under another
    zone a literal means another instant, so the index waits for REBUILD."""
    from tests.support.datamaps import decision_service
    for svc in decision_service(tmp_path / "state", {}):
        store = svc.indexes.store
        svc.catalog.set_setting("time_zone", "UTC")
        store.create("db", "ts_mm", "db.fact", "minmax", [("ts", "timestamp"), ("id", "int")],
                     {}, enabled=True)
        store.create("db", "id_mm", "db.fact", "minmax", [("id", "int")], {}, enabled=True)
        store.create("db", "ntz_mm", "db.fact", "minmax", [("t", "timestamp_ntz")], {},
                     enabled=True)
        svc.adopt_time_zone("UTC", rebuild=False)
        assert all(i.enabled for i in store.all())
        svc.adopt_time_zone("Asia/Tokyo", rebuild=False)
        state = {i.name: (i.enabled, i.status_reason) for i in store.all()}
        assert state["id_mm"] == (True, "") and state["ntz_mm"] == (True, "")
        assert not state["ts_mm"][0] and "UTC to Asia/Tokyo" in state["ts_mm"][1]


def test_a_segment_id_used_again_after_a_crash_drops_the_entries_left_under_it(store,
                                                                              monkeypatch):
    """ADD SEGMENT indexes its files before the catalog records the segment; after a
    crash between the two, the next ADD SEGMENT takes the same id and link paths
    (seg_<id>/f00000_<name>) that may name other files: no entry of the lost attempt
    may survive under them."""
    from proxy.datamaps.locks import KeyedLocks
    service = IndexService(store.catalog, spark=None, locks=KeyedLocks())
    bf = store.create("db", "mm", "db.ext", "minmax", [("id", "bigint")], {}, enabled=True)
    lost = [Entry(f"file:/s/seg_4/f0000{i}_x.csv", 10, 111, 3, {"id": (1, 9, 0)})
            for i in range(2)]
    store.put(bf, lost, segment="4")                  # indexed, then the proxy died
    new = Entry("file:/s/seg_4/f00000_x.csv", 20, 222, 5, {"id": (50, 60, 0)})
    monkeypatch.setattr(service, "_entries", lambda infos, files, staged=None: {
        i.qualified: [new] for i in infos})
    assert service.on_segment_files("db.ext", 4, [("file:/s/.staging_4/f00000_x.csv",
                                                   "file:/s/seg_4/f00000_x.csv")]) == 5
    stats = store.file_stats("db.ext")
    assert set(stats) == {new.path} and stats[new.path].columns["id"].low == 50


def test_suspended_indexes_are_not_used_and_the_next_rebuild_takes_them(store, monkeypatch):
    """An external table's CHANGE type suspends its indexes before Spark reads the new
    types (the mv refresh that runs before the index rebuild can take minutes)."""
    service = IndexService(store.catalog, spark=None, locks=None)
    _setup(store)
    assert service.suspend("db.fact") == ["db.dm1", "db.dm2"]
    assert store.file_stats("db.fact") == {}
    assert all(not i.enabled and "rebuilding" in i.status_reason
               for i in store.indexes_on("db.fact"))
    built = []
    monkeypatch.setattr(service, "_locks", lambda key: contextlib.nullcontext())
    monkeypatch.setattr(service, "_build_all", lambda info: built.append(info.name) or
                        store.set_status(info.db, info.name, True))
    service.sync("db.fact", rebuild=True)
    assert built == ["dm1", "dm2"] and all(i.enabled for i in store.indexes_on("db.fact"))


def test_an_index_being_created_shows_in_building_on_every_replica(store, catalog_location,
                                                                   monkeypatch):
    """SHOW DATAMAP's Building names an index datamap's CREATE while its first build runs,
    read through another catalog over the same store (a replica), and is empty after."""
    service = IndexService(store.catalog, spark=None, locks=None)
    replica = Catalog(catalog_location)
    seen = []
    monkeypatch.setattr(service, "_locks", lambda key: contextlib.nullcontext())
    monkeypatch.setattr(service, "_target", lambda on, db: "db.fact")
    monkeypatch.setattr(service, "_columns", lambda stmt, table, subject: TYPES[:1])
    monkeypatch.setattr(service, "_build_all", lambda info: seen.extend(
        IndexService(replica, spark=None, locks=None).rows("db.fact")))
    try:
        service.create(CreateIndexDatamap(Name("dm3"), Name("fact", "db"), "minmax"), "db")
        assert [(r[0], r[9].split(" (")[0].startswith("being created since")) for r in seen
                ] == [("dm3", True)]
        assert [r[9] for r in IndexService(replica, spark=None, locks=None).rows("db.fact")
                ] == [""]
    finally:
        replica.close()
