"""DatamapLoadHandler's decisions for the statement forms that change a base table but are not
plain loads: writes whose targets cannot be told (MAYBE_WRITE), renames, CREATE TABLE over
a base table's name. No Spark: a real catalog; after_load is recorded, not run."""
from __future__ import annotations

import pytest

from proxy.datamaps.loads import DatamapLoadHandler
from proxy.routing.router import PassThrough, Reject, StatementContext
from tests.support.datamaps import add_datamap, decision_service

SCHEMAS = {"db1": {"sales": {"k": "string", "v": "int"}, "src": {"k": "string", "v": "int"},
                   "dims": {"k": "string", "name": "string"}}}
AGG = "SELECT k, sum(v) FROM db1.sales GROUP BY k"
JOIN = "SELECT s.k, d.name, sum(s.v) FROM db1.sales s JOIN db1.dims d ON s.k = d.k " \
       "GROUP BY s.k, d.name"


@pytest.fixture
def handler(tmp_path):
    for svc in decision_service(tmp_path, SCHEMAS):
        add_datamap(svc, SCHEMAS, "db1", "agg", AGG, build=False)
        add_datamap(svc, SCHEMAS, "db1", "joined", JOIN, build=False)
        yield DatamapLoadHandler(svc, max_sql_bytes=200)


def _ctx():
    return StatementContext("s1", "me", "db1", {}, 10)


async def _resynced(handler, monkeypatch, sql) -> list[tuple[str, bool]]:
    d = handler(_ctx(), sql)
    assert isinstance(d, PassThrough) and d.after is not None, d
    calls = []
    monkeypatch.setattr(handler.service, "after_load",
                        lambda table, overwrite=False, started=None:
                        calls.append((table, overwrite)))
    await d.after(None)
    return calls


LONG = " ".join(f"c{i}" for i in range(60))


@pytest.mark.parametrize("sql,want", [
    # over the parse limit (200 bytes): every base table of a datamap that the text names
    (f"WITH c AS (SELECT '{LONG}' AS k, 1 AS v) INSERT INTO sales SELECT * FROM c",
     [("db1.sales", False)]),
    (f"FROM `DB1`.`Dims` d INSERT INTO db1.sales SELECT d.k, 1 WHERE d.name <> '{LONG}'",
     [("db1.sales", False), ("db1.dims", False)]),
    # does not parse, but may write
    ("WITH c AS (SELECT FROM FROM () INSERT INTO sales SELECT 1", [("db1.sales", False)]),
    ("INSERT INTO (SELECT * FROM sales) VALUES (1)", [("db1.sales", False)]),
], ids=["CTE insert over the limit", "multi-insert over the limit, two base tables",
        "unparseable CTE insert", "an insert no form matches"])
async def test_a_write_whose_targets_are_unknown_resyncs_the_tables_it_names(
        handler, monkeypatch, sql, want):
    assert sorted(await _resynced(handler, monkeypatch, sql)) == sorted(want)


@pytest.mark.parametrize("sql", [
    f"WITH c AS (SELECT '{LONG}' AS k) INSERT INTO other SELECT * FROM c",
    f"WITH c AS (SELECT '{LONG}' AS k) SELECT * FROM sales",      # no INSERT: a query
    "WITH c AS (SELECT 1) INSERT OVERWRITE DIRECTORY '/tmp/x' SELECT * FROM sales",
])
def test_nothing_to_resync(handler, sql):
    assert handler(_ctx(), sql) is None


def test_renaming_a_base_table_is_refused(handler):
    rej = handler(_ctx(), "ALTER TABLE sales RENAME TO sales_old")
    assert isinstance(rej, Reject) and rej.sqlstate == "0A000"
    assert "db1.sales" in rej.message and "db1.agg" in rej.message \
        and "db1.joined" in rej.message and "DROP DATAMAP" in rej.message


def test_renaming_a_datamap_table_is_refused(handler):
    rej = handler(_ctx(), "ALTER TABLE db1.agg_table RENAME TO x")
    assert isinstance(rej, Reject) and rej.sqlstate == "0A000" and "db1.agg_table" in rej.message


async def test_a_table_renamed_to_a_base_table_name_is_resynced(handler, monkeypatch):
    assert await _resynced(handler, monkeypatch, "ALTER TABLE staged RENAME TO sales") == \
        [("db1.sales", True)]
    assert handler(_ctx(), "ALTER TABLE a RENAME TO b") is None


@pytest.mark.parametrize("sql,want", [
    ("CREATE TABLE IF NOT EXISTS sales LIKE src", [("db1.sales", False)]),
    # created again after an outside DROP, maybe over the same files read another way
    # (columns in another order): datamaps and index entries are rebuilt, not appended to
    ("CREATE TABLE sales (v int, k string) USING csv LOCATION '/w/sales'",
     [("db1.sales", True)]),
    ("create table if not exists sales (v int, k string)", [("db1.sales", False)]),
    ("CREATE OR REPLACE TABLE db1.sales USING delta AS SELECT * FROM src", [("db1.sales", True)]),
    ("TRUNCATE TABLE sales PARTITION (p='x')", [("db1.sales", False)]),
    ("INSERT INTO TABLE sales PARTITION (p) (k, v, p) SELECT k, v, 'x' FROM src",
     [("db1.sales", False)]),
    ("INSERT INTO sales REPLACE WHERE k = 'a' SELECT * FROM src", [("db1.sales", True)]),
])
async def test_other_forms_resync(handler, monkeypatch, sql, want):
    assert await _resynced(handler, monkeypatch, sql) == want


def test_create_table_over_a_datamap_table_is_refused(handler):
    rej = handler(_ctx(), "CREATE OR REPLACE TABLE agg_table AS SELECT 1")
    assert isinstance(rej, Reject) and rej.sqlstate == "0A000"


def test_renaming_a_table_with_index_datamaps_is_refused(handler):
    """Their entries name the table's files, which a rename moves (and the old name could
    be taken by another table)."""
    handler.service.indexes.store.create("db1", "src_mm", "db1.src", "minmax",
                                         [("k", "int")], {}, enabled=True)
    rej = handler(_ctx(), "ALTER TABLE src RENAME TO src_old")
    assert isinstance(rej, Reject) and rej.sqlstate == "0A000"
    assert "db1.src_mm" in rej.message and "DROP DATAMAP" in rej.message
