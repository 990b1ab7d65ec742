"""The rewrite index warms in the background: no statement waits on a large update or on
compiling definitions. After a restart the datamaps not compiled yet are left out (their
queries go to Spark, EXPLAIN says why) and come in as the warm-up thread compiles them; a
change of more datamaps than a statement makes itself leaves the rest out until their new
entries are made, never offered with their old segments."""
from __future__ import annotations

import re
import threading
import time

import pytest

from proxy.datamaps.catalog.store import Catalog
from proxy.datamaps.explain import add_unavailable, explain_header
from proxy.datamaps.handler import DatamapSelectHandler
from proxy.datamaps.rewrite import candidates
from proxy.datamaps.service import READING, DatamapService
from proxy.routing.router import PassThrough, Rewrite
from rewriter import DatamapIndex
from rewriter import compiled as compiled_mod
from rewriter.api import RewriteResult
from rewriter.compiled import CompiledForms
from tests.support.datamaps import add_datamap, no_spark, schemas_of, statement_ctx

SCHEMAS = {"db1": {"sales": {"country": "string", "city": "string", "qty": "int"}}}
Q = "SELECT country, sum(qty) FROM sales GROUP BY country"
COUNT = 6


def _sql(i: int) -> str:
    # each answers Q; dm0 has the fewest rows
    return f"SELECT country, city, sum(qty) AS q{i} FROM sales GROUP BY country, city"


@pytest.fixture
def forms(monkeypatch):
    forms = CompiledForms()
    monkeypatch.setattr(DatamapIndex, "compiled_forms", forms)
    monkeypatch.setattr(candidates, "INLINE_ENTRIES", 2)
    monkeypatch.setattr(candidates, "INLINE_COMPILES", 1)
    monkeypatch.setattr(candidates, "WORKER_ENTRIES", 2)
    return forms


@pytest.fixture
def catalog(tmp_path, forms):
    """A catalog of COUNT datamaps over db1.sales, each with one built segment."""
    c = Catalog.in_state_dir(tmp_path)
    svc = DatamapService(c, no_spark, schemas_provider=schemas_of(SCHEMAS))
    for i in range(COUNT):
        add_datamap(svc, SCHEMAS, "db1", f"dm{i}", _sql(i), rows=10 + i)
    svc.close()
    yield c
    c.close()


def _restart(catalog, monkeypatch) -> DatamapService:
    """A new service over the same catalog with nothing compiled: a process restart."""
    monkeypatch.setattr(DatamapIndex, "compiled_forms", CompiledForms())
    return DatamapService(catalog, no_spark, schemas_provider=schemas_of(SCHEMAS))


def _hold_warm_up(provider, monkeypatch) -> threading.Lock:
    """A held lock the warm-up thread waits on at its next turn (release it to go on)."""
    gate = threading.Lock()
    gate.acquire()
    refresh = provider._refresh

    def held(limit, compiles=0):
        if threading.current_thread().name == "datamap-index-warm":
            with gate:
                pass
        return refresh(limit, compiles)

    monkeypatch.setattr(provider, "_refresh", held)
    return gate


def test_after_a_restart_queries_go_to_spark_until_their_datamaps_are_compiled(
        catalog, monkeypatch):
    release = threading.Event()
    compile_internal = compiled_mod.compile_internal

    def slow(definition, schemas):
        if definition.name != "dm0":
            release.wait(30)       # the warm-up thread is busy compiling meanwhile
        return compile_internal(definition, schemas)

    monkeypatch.setattr(compiled_mod, "compile_internal", slow)
    svc = _restart(catalog, monkeypatch)
    try:
        t0 = time.monotonic()
        index = svc.index()                    # a statement: nothing waits on the others
        assert time.monotonic() - t0 < 10
        assert list(index.candidates) == ["db1.dm0"]          # the one compile it may do
        res = index.rewrite(Q, "db1")
        assert res.used == ["db1.dm0"]
        why = svc.unavailable(["db1.sales"])
        assert set(why) == {f"db1.dm{i}" for i in range(1, COUNT)}
        assert all(re.fullmatch(r"rewrite index warming: \d of 6 datamaps compiled", r)
                   for r in why.values()), why
        assert not svc.rewrite_index.warmed(timeout=0.2)
        release.set()
        assert svc.rewrite_index.warmed(timeout=60)
        index = svc.index()
        assert len(index.candidates) == COUNT and not svc.unavailable(["db1.sales"])
        assert index.rewrite(Q, "db1").used == ["db1.dm0"]
    finally:
        release.set()
        svc.close()


def test_a_change_of_more_datamaps_than_a_statement_makes_leaves_the_rest_out(
        catalog, monkeypatch):
    svc = DatamapService(catalog, no_spark, schemas_provider=schemas_of(SCHEMAS))
    provider = svc.rewrite_index
    try:
        assert provider.warmed(timeout=60)
        before = svc.index()
        assert len(before.candidates) == COUNT
        gate = _hold_warm_up(provider, monkeypatch)
        new = {}
        for i in range(COUNT):
            sid = catalog.begin_segment("db1", f"dm{i}", {"db1.sales": ["0"]})
            new[f"db1.dm{i}"] = sid
        for i in range(COUNT):
            catalog.publish_segment("db1", f"dm{i}", new[f"db1.dm{i}"], rows=10 + i,
                                    supersedes=["0"], kind="compacted")
        after = svc.index()
        made = set(provider.last_changed)
        assert len(made) == 2
        for n in before.candidates:
            if n in made:
                assert after.candidates[n].segments == (new[n],)
            else:                              # never offered with its old segment
                assert n not in after.candidates
                assert svc.unavailable(["db1.sales"])[n].startswith("rewrite index warming")
        gate.release()
        assert provider.warmed(timeout=60)
        final = svc.index()
        assert {n: c.segments for n, c in final.candidates.items()} == \
            {n: (sid,) for n, sid in new.items()}
    finally:
        svc.close()


def _spark_like(tables) -> tuple[object, list[str]]:
    """A schemas provider standing for Spark (the service must not read it on a
    statement's path) and the names of the threads that read it."""
    give, read_by = schemas_of(tables), []

    def provider(wanted):
        read_by.append(threading.current_thread().name)
        return give(wanted)
    return provider, read_by


def test_the_first_index_reads_no_schema_on_the_statement_path(catalog):
    """After a restart the first statement finds an empty index (Spark answers): the
    warm-up thread reads the catalog's marks and the schemas, and EXPLAIN says why the
    datamaps wait meanwhile."""
    provider, read_by = _spark_like(SCHEMAS)
    spark = threading.Event()                  # Spark answers the schema read when set

    def slow(wanted):
        assert spark.wait(30)
        return provider(wanted)
    svc = DatamapService(catalog, no_spark, schemas_provider=slow)
    svc.schema_cache.local = False
    try:
        index = svc.index()                    # the first statement after a restart
        assert not index.rewrite(Q, "db1").rewritten          # Spark answers meanwhile
        deadline = time.monotonic() + 30
        while len(svc.unavailable(["db1.sales"])) < COUNT and time.monotonic() < deadline:
            time.sleep(0.01)                   # the marks are read in the background
        why = svc.unavailable(["db1.sales"])
        assert len(why) == COUNT and all(r.startswith("rewrite index warming") for r in
                                         why.values()), why
        assert not svc.index().candidates
        spark.set()
        assert svc.rewrite_index.warmed(timeout=60)
        assert set(read_by) == {"datamap-index-warm"}
        assert svc.index().rewrite(Q, "db1").used == ["db1.dm0"]
    finally:
        spark.set()
        svc.close()


def test_a_query_before_the_first_read_of_the_catalog_says_why_in_its_decision(
        catalog, monkeypatch):
    """The first statements after a restart come before the warm-up thread has read the
    catalog: no datamap is known by name yet, and the decision (what the query log
    records) carries the reason EXPLAIN gives, not none."""
    read = threading.Event()               # the warm-up thread reads the catalog when set

    class HeldMarks(candidates.Marks):
        def advance(self, c):
            if threading.current_thread().name == "datamap-index-warm":
                assert read.wait(30)
            return super().advance(c)
    monkeypatch.setattr(candidates, "Marks", HeldMarks)
    provider, _ = _spark_like(SCHEMAS)
    svc = DatamapService(catalog, no_spark, schemas_provider=provider)
    svc.schema_cache.local = False
    handler = DatamapSelectHandler(svc)
    try:
        decision = handler(statement_ctx(), Q)
        assert isinstance(decision, PassThrough) and decision.why_not == (("", READING),)
        explained = RewriteResult(Q, False)
        add_unavailable(svc, explained, Q, "db1")
        assert f"\nSkipped: {READING}\n" in explain_header(explained, "db1")
        read.set()
        assert svc.rewrite_index.warmed(timeout=60)
        decision = handler(statement_ctx(), Q)
        assert isinstance(decision, Rewrite) and decision.datamaps == ("db1.dm0",)
    finally:
        read.set()
        handler.close()
        svc.close()


def test_a_schema_change_takes_out_only_the_datamaps_over_its_table(
        catalog, forms, monkeypatch):
    """ALTER TABLE drops a table's cached schema: the statement after it reads no schema
    and builds nothing; the datamaps over that table wait out of the index (their queries
    go to Spark) until the warm-up thread has read the schema again and compiled them
    under it; the others answer on from the same entries."""
    tables = {"db1": {**SCHEMAS["db1"], "items": {"id": "int", "kind": "string"}}}
    provider, read_by = _spark_like(tables)
    svc = DatamapService(catalog, no_spark, schemas_provider=provider)
    svc.schema_cache.local = False
    rewrite_index = svc.rewrite_index
    try:
        add_datamap(svc, tables, "db1", "kinds",
                    "SELECT kind, count(*) AS c FROM items GROUP BY kind")
        assert rewrite_index.warmed(timeout=60)
        before = svc.index()
        builds, compiles = rewrite_index.builds, forms.compiles
        gate = _hold_warm_up(rewrite_index, monkeypatch)
        tables["db1"]["sales"] = {**tables["db1"]["sales"], "note": "string"}
        svc.invalidate_schemas("db1.sales")
        read_by.clear()
        index = svc.index()
        assert read_by == [] and rewrite_index.builds == builds
        assert forms.compiles == compiles
        assert list(index.candidates) == ["db1.kinds"]
        assert index.compiled["db1.kinds"] is before.compiled["db1.kinds"]
        assert index.rewrite("SELECT kind, count(*) FROM items GROUP BY kind", "db1").used \
            == ["db1.kinds"]
        assert not index.rewrite(Q, "db1").rewritten          # Spark answers meanwhile
        assert svc.unavailable(["db1.sales"])["db1.dm0"].startswith("rewrite index warming")
        gate.release()
        assert rewrite_index.warmed(timeout=60)
        assert set(read_by) == {"datamap-index-warm"}
        assert rewrite_index.builds == builds and forms.compiles == compiles + COUNT
        after = svc.index()
        assert len(after.candidates) == COUNT + 1
        assert after.schemas["db1"]["sales"]["note"] == "string"
        assert after.rewrite(Q, "db1").used == ["db1.dm0"]
    finally:
        svc.close()


def test_a_table_spark_has_no_schema_for_is_not_read_again_at_once(catalog):
    """A base table Spark gives no schema for: the warm-up thread reads it once, its
    datamaps stay out (their queries go to Spark) and the thread ends, not spinning on it."""
    provider, read_by = _spark_like({"db1": {}})
    svc = DatamapService(catalog, no_spark, schemas_provider=provider)
    svc.schema_cache.local = False
    try:
        svc.index()
        t0 = time.monotonic()
        while svc.rewrite_index._worker is not None or not read_by:
            assert time.monotonic() - t0 < 30, "the warm-up thread did not end"
            time.sleep(0.01)
        assert read_by == ["datamap-index-warm"]
        assert not svc.index().candidates and len(svc.unavailable(["db1.sales"])) == COUNT
    finally:
        svc.close()


def test_a_schema_read_again_unchanged_keeps_every_datamap(catalog, forms):
    """A sync found files written around the proxy and read the table's schema again (in
    its own thread): the same columns change nothing the index offers."""
    provider, read_by = _spark_like(SCHEMAS)
    svc = DatamapService(catalog, no_spark, schemas_provider=provider)
    svc.schema_cache.local = False
    try:
        assert svc.rewrite_index.warmed(timeout=60)
        before = svc.index()
        assert len(before.candidates) == COUNT
        svc.schema_cache.reread("db1.sales")          # as the sync does
        after = svc.index()
        assert after is not before and len(after.candidates) == COUNT
        assert after.rewrite(Q, "db1").used == ["db1.dm0"]
    finally:
        svc.close()
