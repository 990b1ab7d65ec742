"""ALTER DATAMAP ... ENABLE | DISABLE QUERY REWRITE without Spark: the statement through the
DDL handler, the rewriter index leaving the datamap out (EXPLAIN says why), SHOW DATAMAP's
Rewrite column, the history event, and a dropped and re-created datamap starting on."""
from __future__ import annotations

import pytest

from proxy.datamaps.handler import DatamapDdlHandler, DatamapSelectHandler
from proxy.errors import ClientError
from proxy.routing.router import Rewrite, StatementContext
from tests.support.datamaps import add_datamap, decision_service, forwarded

SCHEMAS = {"db1": {"sales": {"id": "int", "country": "string", "qty": "int"}}}
AGG = "SELECT country, sum(qty) FROM db1.sales GROUP BY country"
QUERY = "SELECT country, sum(qty) FROM sales GROUP BY country"


@pytest.fixture
def service(tmp_path):
    yield from decision_service(tmp_path, SCHEMAS)


def _ctx():
    return StatementContext("s1", "ann", "db1", {}, 10)


async def _run(service, sql):
    return await DatamapDdlHandler(service)(_ctx(), sql).runner(None)


async def test_switch_off_and_on(service):
    add_datamap(service, SCHEMAS, "db1", "agg", AGG)
    select = DatamapSelectHandler(service)
    assert isinstance(select(_ctx(), QUERY), Rewrite)

    await _run(service, "ALTER DATAMAP agg DISABLE QUERY REWRITE")
    off = select(_ctx(), QUERY)
    assert forwarded(off) and "query rewrite disabled" in dict(off.why_not)["db1.agg"]
    assert "query rewrite disabled" in service.unavailable(["db1.sales"])["db1.agg"]
    (row,) = (await _run(service, "SHOW DATAMAP")).rows
    assert row[4] == "ENABLED" and row[8] == "false"      # still maintained
    events = service.catalog.events("db1", "agg")
    assert events[-1].kind == "rewrite_disabled" and events[-1].detail == "by ann"

    n = len(events)
    await _run(service, "ALTER DATAMAP db1.agg DISABLE QUERY REWRITE")   # no change, no event
    assert len(service.catalog.events("db1", "agg")) == n

    await _run(service, "alter datamap agg enable query rewrite")
    assert isinstance(select(_ctx(), QUERY), Rewrite)
    assert (await _run(service, "SHOW DATAMAP")).rows[0][8] == "true"
    assert service.catalog.events("db1", "agg")[-1].kind == "rewrite_enabled"


async def test_a_recreated_datamap_starts_with_rewrite_on(service):
    add_datamap(service, SCHEMAS, "db1", "agg", AGG)
    await _run(service, "ALTER DATAMAP agg DISABLE QUERY REWRITE")
    service.catalog.drop_datamap("db1", "agg")
    assert service.catalog.rewrite_off() == frozenset()
    add_datamap(service, SCHEMAS, "db1", "agg", AGG)
    assert isinstance(DatamapSelectHandler(service)(_ctx(), QUERY), Rewrite)


async def test_unknown_datamap_is_42S02(service):
    with pytest.raises(ClientError) as e:
        await _run(service, "ALTER DATAMAP ghost ENABLE QUERY REWRITE")
    assert e.value.sqlstate == "42S02" and "db1.ghost" in str(e.value)
