"""The rewrite index over 2,000 datamaps (decisions only: a real catalog, schemas given as
data standing for Spark's, no Spark): a publish of one datamap updates that datamap's
entry and nothing else, a query right after the publish reads the new segments, never the
old ones, and a schema change makes no statement read a schema or build an index."""
from __future__ import annotations

import dataclasses
import re
import threading

import pytest

from rewriter import DatamapIndex
from rewriter.compiled import CompiledForms, tables_schema
from rewriter.layout import schema_key
from proxy.datamaps.catalog.store import Catalog
from proxy.datamaps.service import DatamapService
from tests.support.datamaps import add_datamap, decision_service, no_spark, schemas_of

SCHEMAS = {"db1": {"sales": {"country": "string", "city": "string", "qty": "int"}}}
ITEMS = {"db1": {"items": {"id": "int", "kind": "string"}}}
AGG = "SELECT country, city, sum(qty) AS q FROM sales GROUP BY country, city"
Q = "SELECT country, sum(qty) FROM sales GROUP BY country"
COUNT = 2000


@pytest.fixture
def forms(monkeypatch):
    forms = CompiledForms()
    monkeypatch.setattr(DatamapIndex, "compiled_forms", forms)
    return forms


@pytest.fixture
def service(tmp_path, forms):
    yield from decision_service(tmp_path, SCHEMAS)


@pytest.fixture
def spark_like(tmp_path, forms):
    """A service whose schemas stand for Spark's (never read on a statement's path), the
    tables they are read from, the names of the threads that read them and an event
    that holds a read while it is clear."""
    tables = {"db1": {**SCHEMAS["db1"], **ITEMS["db1"]}}
    give, read_by, spark = schemas_of(tables), [], threading.Event()
    spark.set()

    def provider(wanted):
        read_by.append(threading.current_thread().name)
        assert spark.wait(30)
        return give(wanted)
    catalog = Catalog.in_state_dir(tmp_path)
    svc = DatamapService(catalog, no_spark, schemas_provider=provider)
    svc.schema_cache.local = False
    yield svc, tables, read_by, spark
    spark.set()
    svc.close()
    catalog.close()


def _clone(service, forms, count: int) -> None:
    """Datamaps dm1..dm<count-1>: copies of db1.agg's catalog rows (definition, one built
    segment) with more rows each, written in one transaction, and their compiled forms put
    in the cache: compiling 2,000 definitions would take the test's whole budget, and the
    provider gives each copy its catalog name as it does any definition."""
    c = service.catalog
    with c._tx() as tx:
        cols = [r[1] for r in tx.execute("PRAGMA table_info(datamaps)").fetchall()]
        seg_cols = [r[1] for r in tx.execute("PRAGMA table_info(dm_segments)").fetchall()]
        for i in range(1, count):
            tx.execute(f"INSERT INTO datamaps ({', '.join(cols)}) SELECT "
                       + ", ".join("?" if k == "name" else k for k in cols)
                       + " FROM datamaps WHERE db = 'db1' AND name = 'agg'", (f"dm{i}",))
            tx.execute(f"INSERT INTO dm_segments ({', '.join(seg_cols)}) SELECT "
                       + ", ".join("?" if k == "name" else k for k in seg_cols)
                       + " FROM dm_segments WHERE db = 'db1' AND name = 'agg'", (f"dm{i}",))
        tx.execute("UPDATE dm_segments SET rows = 1000 + CAST(substr(name, 3) AS INTEGER) "
                   "WHERE name <> 'agg'")
    comp = forms.entries[next(k for k in forms.entries if k[0] == "agg")]
    skey = schema_key(tables_schema(SCHEMAS, comp.definition.base_tables))
    for i in range(1, count):
        d = dataclasses.replace(comp.definition, name=f"dm{i}", table=f"db1.dm{i}_table")
        forms.remember(dataclasses.replace(comp, definition=d, keyed={}), skey)


def test_a_publish_of_one_of_2000_datamaps_updates_only_its_entry(service, forms):
    add_datamap(service, SCHEMAS, "db1", "agg", AGG, rows=5)
    _clone(service, forms, COUNT)
    provider, c = service.rewrite_index, service.catalog
    first = service.index()            # what a statement makes itself; the rest in the background
    assert len(first.candidates) <= 64
    assert provider.warmed(timeout=120)
    before = service.index()
    assert len(before.candidates) == COUNT and not before.broken
    assert provider.builds == 1
    builds, updates = provider.builds, provider.updates
    compiles = forms.compiles
    assert compiles <= 1                          # the copies were not compiled
    res = before.rewrite(Q, "db1")
    assert res.used == ["db1.agg"]                # the fewest rows
    assert re.search(r"dm_segment_id\W+IN \('0'\)", res.sql), res.sql

    # a compaction of db1.agg: segment 1 replaces segment 0 in one commit
    sid = c.begin_segment("db1", "agg", {"db1.sales": ["0"]})
    c.publish_segment("db1", "agg", sid, rows=4, supersedes=["0"], kind="compacted")
    after = service.index()                       # the next statement's index
    assert after is not before and after.version == c.version()
    assert (provider.builds, provider.updates) == (builds, updates + 1)
    assert provider.last_changed == ("db1.agg",)
    assert forms.compiles == compiles
    assert after.candidates["db1.agg"].segments == (sid,)
    assert all(after.candidates[n] is before.candidates[n] and
               after.compiled[n] is before.compiled[n]
               for n in before.candidates if n != "db1.agg")
    res = after.rewrite(Q, "db1")
    assert res.used == ["db1.agg"]
    assert re.search(rf"dm_segment_id\W+IN \('{sid}'\)", res.sql), res.sql
    assert provider.freshness("db1.agg")[0] == (sid,)
    # the index that rewrote a statement still judges it by what it read
    assert provider.covered("db1.agg", before) is not provider.covered("db1.agg", after)

    # disabling one datamap takes it out; dropping another removes its entry
    c.set_status("db1", "agg", "DISABLED", "test")
    c.drop_datamap("db1", "dm7")
    later = service.index()
    assert "db1.agg" not in later.candidates and "db1.dm7" not in later.candidates
    assert len(later.candidates) == COUNT - 2 and provider.builds == 1
    assert "DISABLED" in provider.unavailable(["db1.sales"])["db1.agg"]
    assert later.rewrite(Q, "db1").used == ["db1.dm1"]


def test_an_entry_read_while_the_catalog_changed_is_made_again(service, monkeypatch):
    """A datamap's entry is read after the marks that said it changed: when the catalog
    changed in between, its marks may be older than what the entry holds, so the next
    index makes it again rather than keep it while the marks compare equal."""
    add_datamap(service, SCHEMAS, "db1", "agg", AGG, rows=5)
    provider, c = service.rewrite_index, service.catalog
    assert "db1.agg" in service.index().candidates
    c.set_status("db1", "agg", "DISABLED", "base table changed")
    made = provider._entry

    def enabled_meanwhile(rec, *args):
        if rec.qualified == "db1.agg" and not calls:
            calls.append(1)
            c.set_status("db1", "agg", "ENABLED")     # another writer, between the reads
        return made(rec, *args)

    calls: list[int] = []
    monkeypatch.setattr(provider, "_entry", enabled_meanwhile)
    service.index()                                    # the entry as read before the write
    assert provider._entries["db1.agg"].mark is None   # not trusted: made again next time
    assert "db1.agg" in service.index().candidates     # as the catalog is now
    c.set_status("db1", "agg", "DISABLED", "base table changed")   # the marks read before
    assert "db1.agg" not in service.index().candidates
    assert "DISABLED" in provider.unavailable(["db1.sales"])["db1.agg"]


def test_a_schema_change_makes_no_statement_read_a_schema_or_build(spark_like, forms):
    """ALTER TABLE of a table one datamap reads: the statement after it reads no schema,
    compiles nothing and builds no index; the 2,000 datamaps over the other table answer
    on from the same entries, the one over the changed table waits out of the index until
    the warm-up thread has read the schema again and compiled it under the new schema."""
    service, tables, read_by, spark = spark_like
    add_datamap(service, SCHEMAS, "db1", "agg", AGG, rows=5)
    add_datamap(service, ITEMS, "db1", "kinds",
                "SELECT kind, count(*) AS c FROM items GROUP BY kind")
    _clone(service, forms, COUNT)
    provider = service.rewrite_index
    assert not service.index().candidates     # the first statement: schemas not read yet
    assert "MainThread" not in read_by
    assert provider.warmed(timeout=120)
    before = service.index()
    assert len(before.candidates) == COUNT + 1
    builds, compiles = provider.builds, forms.compiles
    tables["db1"]["items"] = {**tables["db1"]["items"], "note": "string"}
    spark.clear()                             # the warm-up thread's read waits meanwhile
    service.invalidate_schemas("db1.items")
    read_by.clear()
    after = service.index()                   # the next statement
    assert "MainThread" not in read_by
    assert forms.compiles == compiles and provider.builds == builds
    assert "db1.kinds" not in after.candidates and len(after.candidates) == COUNT
    assert all(after.compiled[n] is before.compiled[n] for n in after.candidates)
    assert after.rewrite(Q, "db1").used == ["db1.agg"]
    assert service.unavailable(["db1.items"])["db1.kinds"].startswith("rewrite index warming")
    spark.set()
    assert provider.warmed(timeout=120)
    assert set(read_by) == {"datamap-index-warm"} and forms.compiles == compiles + 1
    final = service.index()
    assert "db1.kinds" in final.candidates and provider.builds == builds
    assert final.schemas["db1"]["items"]["note"] == "string"
