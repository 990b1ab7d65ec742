"""Statements that change a base table's files without being an INSERT: partition DDL,
MSCK REPAIR, and overwrites whose file names may repeat. No Spark: a real catalog and a
Spark provider that fails if a decision needed Spark."""
from __future__ import annotations

import pytest

from proxy.datamaps.handler import DatamapLoadHandler
from proxy.routing.router import PassThrough, Reject, StatementContext
from tests.support.datamaps import add_datamap, decision_service

SCHEMAS = {"db1": {"sales": {"k": "string", "v": "int", "p": "string"}}}
AGG = "SELECT k, sum(v) FROM db1.sales GROUP BY k"


@pytest.fixture
def service(tmp_path):
    for svc in decision_service(tmp_path, SCHEMAS):
        add_datamap(svc, SCHEMAS, "db1", "agg", AGG, build=False)
        yield svc


def _ctx():
    return StatementContext("s1", "me", "db1", {}, 10)


@pytest.mark.parametrize("sql,overwrite", [
    ("ALTER TABLE sales DROP PARTITION (p='x')", False),
    ("MSCK REPAIR TABLE sales", False),
    ("INSERT INTO sales PARTITION (p='x') VALUES ('a', 1)", False),
    ("INSERT OVERWRITE TABLE sales PARTITION (p='x') VALUES ('a', 1)", True),
    ("insert overwrite sales select * from other", True),
    ("LOAD DATA LOCAL INPATH '/tmp/a.csv' OVERWRITE INTO TABLE sales", True),
    ("LOAD DATA LOCAL INPATH '/tmp/a.csv' INTO TABLE sales", False),
    ("REFRESH TABLE sales", False),
    ("DELETE FROM sales WHERE id = 1", True),
    ("UPDATE sales SET qty = 0", True),
    ("MERGE INTO sales USING upd ON sales.id = upd.id WHEN MATCHED THEN DELETE", True),
])
async def test_file_changing_statements_resync_the_base_table(service, monkeypatch, sql,
                                                              overwrite):
    d = DatamapLoadHandler(service)(_ctx(), sql)
    assert isinstance(d, PassThrough) and d.after is not None
    calls = []
    monkeypatch.setattr(service, "after_load",
                        lambda table, overwrite=False, started=None:
                        calls.append((table, overwrite)))
    await d.after(None)
    assert calls == [("db1.sales", overwrite)]


def test_partition_ddl_on_a_datamap_table_is_refused(service):
    rej = DatamapLoadHandler(service)(_ctx(), "ALTER TABLE agg_table DROP PARTITION "
                                              "(dm_segment_id='0')")
    assert isinstance(rej, Reject) and rej.sqlstate == "0A000" and "db1.agg_table" in rej.message


def test_overwrite_with_the_same_file_names_forces_a_rebuild(service, monkeypatch):
    """A listing diff cannot see LOAD DATA ... OVERWRITE of a file of the same name: the
    statement's word for it marks every known segment deleted."""
    from proxy.datamaps.upkeep import maintenance
    files = ["file:/w/sales/a.csv"]
    monkeypatch.setattr(maintenance, "list_files", lambda spark, table: tuple(files))
    monkeypatch.setattr(service, "spark_provider", lambda: None)
    assert service.sync_base_files("db1.sales") is False          # first listing: segment 0
    assert service.sync_base_files("db1.sales") is False          # nothing changed
    assert service.sync_base_files("db1.sales", rewritten=True) is True
    live = service.catalog.base_segments("db1.sales")
    assert [s.id for s in live] == ["1"] and list(live[0].files) == files
    assert [s.id for s in service.catalog.base_segments("db1.sales", live_only=False)] == \
        ["0", "1"]
