"""The query side of index datamaps in the proxy (proxy/datamaps/indexes/pruning.py and its hook in
proxy/datamaps/handler.py), without Spark: a real catalog, schemas given as data, real
files on disk for the stat() check.

FakeStore hands the Pruner statistics as data (the pruning decisions are the subject
here); the real IndexStore behind the Pruner is exercised end to end, built by Spark, in
tests/e2e/test_external_scenario.py and tests/e2e/test_index_datamaps.py."""
from __future__ import annotations

import os

import pytest

from proxy.datamaps.handler import DatamapDdlHandler, DatamapSelectHandler
from proxy.datamaps.indexes.pruning import Pruner, TableShape
from proxy.routing.router import LocalResult, Rewrite, StatementContext
from proxy.routing.session_keys import BLOCKED_KEY
from rewriter.prune.filestats import ColumnStats, FileStats
from tests.support.datamaps import forwarded, decision_service
from tests.support.prune import FakeStore, Info

SCHEMAS = {"db1": {"events": {"id": "bigint", "kind": "string"}}}


@pytest.fixture
def files(tmp_path):
    """Four local files, ids [10i, 10i+9]; identity as recorded at index build time."""
    stats, identity = {}, {}
    for i in range(4):
        f = tmp_path / f"part-{i}.csv"
        f.write_text(f"{i}\n")
        path = f"file:{f}"
        stats[path] = FileStats(path, 10, {"id": ColumnStats(10 * i, 10 * i + 9, 0)})
        st = os.stat(f)
        identity[path] = (st.st_size, st.st_mtime_ns)
    return stats, identity


@pytest.fixture
def service(tmp_path):
    yield from decision_service(tmp_path / "state", SCHEMAS)


def pruner(files, indexes=None, shape=TableShape(SCHEMAS["db1"]["events"])):
    stats, identity = files
    indexes = indexes or [Info("db1", "ev_mm", "db1.events", "minmax", ("id",))]
    return Pruner(FakeStore(stats, identity, indexes), lambda t: shape)


def ctx(**conf):
    return StatementContext("s1", "me", "db1", dict(conf), 10)


NEEDLE = "SELECT kind FROM events WHERE id = 25"


def test_a_query_on_an_indexed_table_is_sent_pruned(service, files):
    d = DatamapSelectHandler(service, pruner=pruner(files))(ctx(), NEEDLE)
    assert isinstance(d, Rewrite) and d.note == "pruned:ev_mm=1/4"
    assert d.log == ("Pruned by index datamap ev_mm: 1 of 4 files",)
    skipped = sorted(p for p in files[0] if "part-2" not in p)
    assert d.sql == ("SELECT kind FROM (SELECT * FROM `db1`.`events` WHERE NOT "
                     "_metadata.file_path IN (" + ", ".join(f"'{p}'" for p in skipped)
                     + ")) AS `events` WHERE id = 25")


@pytest.mark.parametrize("conf", [{"datamap.prune.enabled": "false"},
                                  {"datamap.rewrite.enabled": "false"},
                                  {BLOCKED_KEY: "the session changed its time zone"}])
def test_switched_off(service, files, conf):
    assert forwarded(DatamapSelectHandler(service, pruner=pruner(files))(ctx(**conf), NEEDLE))


def test_a_file_rewritten_in_place_is_read(service, files):
    stats, identity = files
    changed = next(p for p in stats if "part-0" in p)
    with open(changed[len("file:"):], "a") as f:
        f.write("more\n")
    d = DatamapSelectHandler(service, pruner=pruner(files))(ctx(), NEEDLE)
    assert changed not in d.sql and d.note == "pruned:ev_mm=1/4"   # counts: by statistics
    assert d.sql.count("file:") == 2


def test_files_that_cannot_be_checked_are_read(service, files):
    stats, identity = files
    gone = next(p for p in stats if "part-0" in p)
    os.remove(gone[len("file:"):])
    remote = {p.replace("file:", "hdfs://nn"): s for p, s in stats.items()}
    remote_identity = {p.replace("file:", "hdfs://nn"): v for p, v in identity.items()}
    assert gone not in DatamapSelectHandler(service, pruner=pruner(files))(ctx(), NEEDLE).sql
    assert DatamapSelectHandler(service, pruner=pruner((remote, remote_identity)))(
        ctx(), NEEDLE) is None


def test_no_pruning_without_an_enabled_index_or_a_known_shape(service, files):
    off = [Info("db1", "ev_mm", "db1.events", "minmax", ("id",), enabled=False)]
    assert DatamapSelectHandler(service, pruner=pruner(files, off))(ctx(), NEEDLE) is None
    assert DatamapSelectHandler(service, pruner=pruner(files, shape=None))(ctx(), NEEDLE) is None
    hive = TableShape(SCHEMAS["db1"]["events"], by_path=False)
    assert DatamapSelectHandler(service, pruner=pruner(files, shape=hive))(ctx(), NEEDLE) is None


def test_a_broken_store_forwards_the_statement(service, files):
    class Broken(FakeStore):
        def file_stats(self, table):
            raise RuntimeError("catalog gone")
    p = Pruner(Broken(*files, [Info("db1", "ev_mm", "db1.events", "minmax", ("id",))]),
               lambda t: TableShape(SCHEMAS["db1"]["events"]))
    assert DatamapSelectHandler(service, pruner=p)(ctx(), NEEDLE) is None


def test_an_external_table_reads_its_source_table(service, files):
    shape = TableShape(SCHEMAS["db1"]["events"], read_from="db1.events__csv")
    d = DatamapSelectHandler(service, pruner=pruner(files, shape=shape))(ctx(), NEEDLE)
    assert "FROM `db1`.`events__csv` WHERE NOT _metadata.file_path IN (" in d.sql


async def test_explain_prints_the_pruning_and_the_sql_sent(service, files):
    sent = []

    async def upstream(sql):
        sent.append(sql)
        return LocalResult((("plan", "string"),), [("== Physical Plan ==",)])
    h = DatamapDdlHandler(service, pruner=pruner(files))
    text = (await h(ctx(), f"EXPLAIN {NEEDLE}").runner(upstream)).rows[0][0]
    lines = text.split("\n")
    assert lines[:2] == ["== Datamap Rewrite ==", "No datamap hit"]
    assert lines[2] == f"Rewritten SQL: {sent[0][len('EXPLAIN '):]}" and "NOT _metadata" in lines[2]
    assert "Pruned by index datamap ev_mm: 1 of 4 files" in lines
    assert lines.index("Pruned by index datamap ev_mm: 1 of 4 files") < lines.index("")
    text = (await h(ctx(**{"datamap.prune.enabled": "false"}), f"EXPLAIN {NEEDLE}")
            .runner(upstream)).rows[0][0]
    assert "Pruned by" not in text and sent[-1] == f"EXPLAIN {NEEDLE}"


def test_service_shapes_load_in_the_background_then_answer(service, monkeypatch):
    from proxy.datamaps.indexes import pruning
    monkeypatch.setattr(pruning, "read_kind", lambda spark, t: ("db1.events__csv", True))
    shapes = pruning.ServiceShapes(service.schema_cache, spark=lambda: "the pipeline session")
    try:
        assert shapes("db1.events") is None           # never waits: loads on a worker
        shapes._loader.submit(lambda: None).result(timeout=10)
        assert shapes("db1.events") == TableShape(SCHEMAS["db1"]["events"], "db1.events__csv")
        shapes.invalidate("db1.events")
        assert shapes("db1.events") is None
        shapes._loader.submit(lambda: None).result(timeout=10)
        monkeypatch.setattr(pruning, "read_kind", lambda spark, t: (None, False))
        service.invalidate_schemas("db1.events")      # as ALTER / DROP TABLE do
        assert shapes("db1.events") is None
        shapes._loader.submit(lambda: None).result(timeout=10)
        assert shapes("db1.events").by_path is False  # re-created as a Hive-serde table
    finally:
        shapes.close()


def test_a_store_listing_its_tables_spares_the_parse_of_other_statements(files, monkeypatch):
    from proxy.datamaps.indexes import pruning

    class Listing(FakeStore):
        def indexed_tables(self):
            return {"db1.events"}
    p = Pruner(Listing(*files, [Info("db1", "ev_mm", "db1.events", "minmax", ("id",))]),
               lambda t: TableShape(SCHEMAS["db1"]["events"]))
    assert p.prune(NEEDLE, "db1") is not None
    monkeypatch.setattr(pruning, "parse", lambda sql: pytest.fail("parsed"))
    assert p.prune("SELECT * FROM sales WHERE id = 25", "db1") is None


async def test_set_datamap_prune_enabled_through_the_router(service, files):
    from proxy.routing import statements
    from proxy.routing.router import Local, PassThrough, Router
    router = Router()
    statements.install(router)
    router.handlers.append(DatamapSelectHandler(service, pruner=pruner(files)))
    off = router.decide(ctx(), "SET datamap.prune.enabled = false")
    assert isinstance(off, Local) and off.settings == (("datamap.prune.enabled", "false"),)
    shown = await router.decide(ctx(), "SET datamap.prune.enabled").runner(None)
    assert shown.rows == [("datamap.prune.enabled", "true")]
    assert isinstance(router.decide(ctx(), NEEDLE), Rewrite)
    assert isinstance(router.decide(ctx(**dict(off.settings)), NEEDLE), PassThrough)
    bad = router.decide(ctx(), "SET datamap.prune.enabled = maybe")
    assert bad.sqlstate == "42000" and "datamap.prune.enabled" in bad.message


def test_a_statement_too_large_to_parse_on_the_decision_path_is_sent_unpruned(files, monkeypatch):
    from proxy.datamaps.indexes import pruning
    p = pruner(files)
    monkeypatch.setattr(pruning, "parse", lambda sql: pytest.fail("parsed"))
    padded = NEEDLE + " OR kind IN (" + ", ".join(["'x'"] * 20000) + ")"
    assert len(padded) >= pruning.MAX_SQL_BYTES and p.prune(padded, "db1") is None


class _Store:
    """The index store's query interface, as data: indexes kept under `db.x_table`."""

    def __init__(self, tables):
        self.tables_ = tables
        self.asked: list[str] = []
        self.v = 1

    def version(self):
        return self.v

    def tables(self):
        return set(self.tables_)

    def indexes_on(self, table):
        self.asked.append(table)
        return ["idx"] if table in self.tables_ else []

    def file_stats(self, table):
        return {"f": table} if table in self.tables_ else {}

    def file_identity(self, table):
        return {"f": (1, 1)} if table in self.tables_ else {}


def test_an_mv_datamaps_storage_table_is_asked_as_its_indexed_table():
    from proxy.datamaps.indexes.pruning import StoreForQueries
    store = _Store({"db.mv_table", "db.plain_table"})
    storages = {"db.mv_table_segments"}         # plain_table_segments: a user's own table
    warmed = []
    view = StoreForQueries(store, lambda t: t in storages, warmed.extend)
    assert view.indexes_on("db.mv_table_segments") == ["idx"]
    assert view.file_stats("db.mv_table_segments") == {"f": "db.mv_table"}
    assert view.file_identity("db.mv_table_segments") == {"f": (1, 1)}
    assert view.indexes_on("db.plain_table_segments") == []     # never plain_table's stats
    assert view.read_as("db.mv_table") == ["db.mv_table", "db.mv_table_segments"]
    assert view.read_as("db.plain_table") == ["db.plain_table"]
    assert view.indexed_tables() == {"db.mv_table", "db.plain_table", "db.mv_table_segments"}
    assert sorted(warmed) == ["db.mv_table", "db.mv_table_segments", "db.plain_table"]
    store.tables_.add("db.other")
    assert "db.other" not in view.indexed_tables()       # same version: the cached set
    store.v = 2
    assert "db.other" in view.indexed_tables()


@pytest.mark.parametrize("create", [
    "CREATE TEMPORARY VIEW events AS SELECT 25L AS id, 'x' AS kind",
    "create or replace temp view `Events` as select 25L as id, 'x' as kind",
    "CACHE LAZY TABLE events AS SELECT 25L AS id, 'x' AS kind"])
def test_a_temporary_view_shadowing_the_table_is_not_pruned(service, files, create):
    """Spark reads the session's temporary view `events` for an unqualified `events`; the
    pruned SQL would read db1.events instead. A qualified name still reads the table."""
    from proxy.datamaps.indexes.pruning import watch_temp_views
    from proxy.routing.router import Router
    router = Router([watch_temp_views, DatamapSelectHandler(service, pruner=pruner(files))])
    d = router.decide(ctx(), create)
    assert dict(d.settings) == {"datamap.session.temp_views": "events"}
    after = ctx(**dict(d.settings))
    assert not isinstance(router.decide(after, NEEDLE), Rewrite)
    assert isinstance(router.decide(after, "SELECT kind FROM db1.events WHERE id = 25"),
                      Rewrite)
    other = router.decide(after, "CREATE GLOBAL TEMPORARY VIEW v AS SELECT 1")
    assert "datamap.session.temp_views" not in dict(other.settings)
    assert router.decide(after, "CACHE TABLE events").settings == ()


def test_entries_not_loaded_yet_are_loaded_off_the_decision_path():
    """A store whose entries of a table are not current: nothing is pruned now, and a
    worker thread loads them; the next statement finds them."""
    import threading
    from proxy.datamaps.indexes.pruning import StoreForQueries
    loaded = threading.Event()

    class Slow(_Store):
        fresh_ = False

        def fresh(self, table):
            return self.fresh_

        def indexes_on(self, table):
            got = super().indexes_on(table)
            self.fresh_ = True
            loaded.set()
            return got

    store = Slow({"db.t"})
    view = StoreForQueries(store, lambda t: False)
    try:
        assert view.indexes_on("db.t") == []          # not loaded: unpruned this time
        assert loaded.wait(5)
        assert view.indexes_on("db.t") == ["idx"]
    finally:
        view.close()
