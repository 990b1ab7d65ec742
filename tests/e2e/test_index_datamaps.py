"""Index datamaps through the proxy with PyHive, on the shared embedded `serve`
(tests/e2e/conftest.py): docs/indexes.md's statements run as written; the stored entries
equal Spark's per-file min/max and their bloom filters hold every value; loads index the
new files; REBUILD, the errors, an index on an mv datamap, DROP DATAMAP and DROP TABLE.
The entries are read back with IndexStore from the server's catalog (another process
may open it: WAL)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from proxy.datamaps.catalog.store import Catalog
from proxy.datamaps.indexes.entries import IndexStore
from tests.support.e2e import Conn, doc_blocks

pytestmark = [pytest.mark.spark, pytest.mark.timeout(400)]

DOC = Path(__file__).resolve().parents[2] / "docs" / "indexes.md"


@pytest.fixture(scope="module")
def conn(shared_serve):
    c = Conn(shared_serve.port)
    yield c
    c.run("DROP DATABASE IF EXISTS idx_doc CASCADE")
    c.close()


@pytest.fixture(scope="module")
def store(shared_serve):
    catalog = Catalog.in_state_dir(shared_serve.state)
    yield IndexStore(catalog, version_max_age=0.0)
    catalog.close()


def _show(conn, table="idx_doc.sales"):
    return {r[0]: r for r in conn.run(f"SHOW DATAMAP ON TABLE {table}").rows}


# Spark's own per-file figures, to compare the stored entries with
TRUTH = ("SELECT regexp_replace(_metadata.file_path, '^file://(localhost)?/', 'file:/'), "
         "count(*), min(id), max(id), CAST(min(day) AS STRING), to_json(collect_list(city)) "
         "FROM idx_doc.sales GROUP BY 1")


def _check_entries(conn, store):
    stats = store.file_stats("idx_doc.sales")
    truth = conn.run(TRUTH).rows
    assert {r[0] for r in truth} == set(stats)
    for path, n, lo, hi, day, cities in truth:
        f = stats[path]
        assert f.rows == n and (f.columns["id"].low, f.columns["id"].high) == (lo, hi)
        assert str(f.columns["day"].low) == day
        assert all(f.columns["city"].bloom.might_contain(c) for c in json.loads(cities))
    return stats


def test_create_show_load_rebuild_drop(conn, store):
    create, maintain = doc_blocks(DOC)[:2]
    for stmt, _ in create:
        conn.run(stmt)
    shown = _show(conn)
    assert {k: (r[1], r[2], r[4]) for k, r in shown.items()} == {
        "sales_mm": ("minmax", "idx_doc.sales", "ENABLED"),
        "sales_bf": ("bloomfilter", "idx_doc.sales", "ENABLED")}
    assert "'bloom_fpp'='0.001'" in shown["sales_bf"][3]
    n = len(_check_entries(conn, store))
    assert json.loads(shown["sales_bf"][5])["idx_doc.sales"] == f"{n} files"

    conn.run(maintain[0][0])                              # INSERT: one more file
    assert json.loads(_show(conn)["sales_mm"][5])["idx_doc.sales"] == f"{n + 1} files"
    assert len(_check_entries(conn, store)) == n + 1
    assert conn.rows("SELECT id FROM idx_doc.sales WHERE city = 'Lima'") == [(3,)]

    conn.run(maintain[1][0])                              # REBUILD DATAMAP sales_bf
    assert _show(conn)["sales_bf"][4] == "ENABLED"
    assert conn.run("SHOW MATERIALIZED VIEWS").rows == [] or all(
        r[1] == "mv" for r in conn.run("SHOW MATERIALIZED VIEWS").rows)

    conn.run(maintain[2][0])                              # DROP DATAMAP sales_bf ON TABLE
    assert set(_show(conn)) == {"sales_mm"}

    # the Queries section: sales_mm (on id) skips the files that cannot hold id 3
    queries = doc_blocks(DOC)[2]
    explain, off, explain_off, on = (stmt for stmt, _ in queries)
    plan = conn.explain_until(explain, f"Pruned by index datamap idx_doc.sales_mm: 1 of {n + 1} files")
    assert f"Pruned by index datamap idx_doc.sales_mm: 1 of {n + 1} files" in plan, plan
    assert conn.rows("SELECT id, city FROM idx_doc.sales WHERE id = 3") == [(3, "Lima")]
    conn.run(off)
    assert "Pruned by index datamap" not in conn.run(explain_off).rows[0][0]
    conn.run(on)
    assert store.file_stats("idx_doc.sales")
    assert all(c.bloom is None for f in store.file_stats("idx_doc.sales").values()
               for c in f.columns.values())


@pytest.mark.parametrize("sql, state, words", [
    ("CREATE DATAMAP e1 ON TABLE idx_doc.nope USING 'minmax'", "42S02", "idx_doc.nope"),
    ("CREATE DATAMAP e2 ON TABLE idx_doc.sales USING 'minmax' "
     "DMPROPERTIES('INDEX_COLUMNS'='id,zip')", "42703", "zip"),
    ("CREATE DATAMAP sales_mm ON TABLE idx_doc.sales USING 'minmax'", "42710", "sales_mm"),
    ("CREATE DATAMAP e3 ON TABLE idx_doc.sales USING 'bloomfilter' DMPROPERTIES("
     "'INDEX_COLUMNS'='id', 'BLOOM_SIZE'='100000000')", "42000", "max_bloom_bytes"),
    ("CREATE DATAMAP e4 ON TABLE idx_doc.sales USING 'bloomfilter' DMPROPERTIES("
     "'INDEX_COLUMNS'='id', 'BLOOM_COLOR'='red')", "42000", "bloom_color"),
])
def test_errors(conn, sql, state, words):
    e = conn.error(sql)
    assert e.sqlstate == state and words in e.message, e


def test_an_index_on_an_mv_datamap_follows_its_refreshes(conn, store):
    conn.run("CREATE DATAMAP by_city ON TABLE idx_doc.sales AS "
             "SELECT city, sum(amount) AS total FROM idx_doc.sales GROUP BY city")
    conn.run("CREATE DATAMAP by_city_bf ON TABLE idx_doc.by_city USING 'bloomfilter' "
             "DMPROPERTIES('INDEX_COLUMNS'='city', 'BLOOM_SIZE'='1000')")
    row = _show(conn, "idx_doc.by_city_table")["by_city_bf"]
    assert _show(conn, "idx_doc.by_city")["by_city_bf"] == row
    assert row[2] == "idx_doc.by_city_table" and row[4] == "ENABLED"
    before = set(store.file_stats("idx_doc.by_city_table"))
    assert before
    conn.run("INSERT INTO idx_doc.sales VALUES (4, 'Kyiv', 40, DATE'2024-03-01')")
    after = store.file_stats("idx_doc.by_city_table")
    assert set(after) - before                            # the refresh's new segment
    assert any(f.columns["city"].bloom.might_contain("Kyiv") for f in after.values())
    conn.run("DROP DATAMAP idx_doc.by_city")                    # the index on it goes too
    assert "by_city_bf" not in {r[0] for r in conn.run("SHOW DATAMAP").rows}


def test_drop_table_drops_its_index_datamaps(conn, store):
    conn.run("CREATE TABLE idx_doc.gone (a INT) USING parquet")
    conn.run("INSERT INTO idx_doc.gone VALUES (1)")
    conn.run("CREATE DATAMAP gone_mm ON TABLE idx_doc.gone USING 'minmax'")
    assert store.indexes_on("idx_doc.gone")
    conn.run("DROP TABLE idx_doc.gone")
    assert store.indexes_on("idx_doc.gone") == []


def test_a_hive_format_table_with_a_space_in_its_partition_path(conn, store):
    """A Hive scan (no _metadata; input_file_name() decodes `%20`): entries are still
    keyed by the encoded path list_files gives."""
    conn.run("CREATE TABLE idx_doc.hv (a INT, s STRING) PARTITIONED BY (p STRING) "
             "STORED AS TEXTFILE")
    conn.run("INSERT INTO idx_doc.hv PARTITION (p='x y') VALUES (1, 'q'), (5, 'r')")
    conn.run("CREATE DATAMAP hv_mm ON TABLE idx_doc.hv USING 'minmax' "
             "DMPROPERTIES('INDEX_COLUMNS'='a')")
    stats = store.file_stats("idx_doc.hv")
    assert stats and all("%20" in path for path in stats)
    assert sum(f.rows for f in stats.values()) == 2
    assert min(f.columns["a"].low for f in stats.values() if f.rows) == 1
