"""Statements nested too deeply for Python's recursion limit (5,000 parentheses) are the
client's input, not a proxy bug (issue 10, defect 7): datamap DDL fails with 54001
"statement too complex", a query is forwarded unchanged, and neither logs an ERROR or a
traceback. No Spark: a real catalog, schemas given as data."""
from __future__ import annotations

import logging

import pytest

from proxy.datamaps.handler import DatamapDdlHandler, DatamapSelectHandler
from proxy.errors import ClientError
from proxy.router import Local, Reject, StatementContext
from tests.datamaps.support import add_datamap, decision_service

SCHEMAS = {"db1": {"sales": {"id": "int", "country": "string", "qty": "int",
                             "ts": "timestamp"}}}
AGG = "SELECT country, sum(qty) FROM db1.sales GROUP BY country"
DEEP = "(" * 5000 + "qty" + ")" * 5000


@pytest.fixture
def service(tmp_path):
    yield from decision_service(tmp_path, SCHEMAS)


def _ctx():
    return StatementContext("s1", "me", "db1", {}, 10)


def _no_errors(caplog):
    bad = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert not bad, [r.getMessage() for r in bad]


async def test_create_datamap_nested_too_deeply_is_54001_statement_too_complex(service, caplog):
    decision = DatamapDdlHandler(service)(
        _ctx(), f"CREATE DATAMAP d USING 'mv' AS SELECT country, sum({DEEP}) FROM sales "
                "GROUP BY country")
    assert isinstance(decision, Local)
    with pytest.raises(ClientError) as err:
        await decision.runner(None)
    assert err.value.sqlstate == "54001" and "too complex" in str(err.value)
    assert service.catalog.list_datamaps() == []
    _no_errors(caplog)


def test_legacy_datamap_nested_too_deeply_is_rejected_54001(service, caplog):
    rej = DatamapDdlHandler(service)(
        _ctx(), f"CREATE DATAMAP d ON TABLE sales USING 'preaggregate' AS "
                f"SELECT country, sum({DEEP}) FROM sales GROUP BY country")
    assert isinstance(rej, Reject) and rej.sqlstate == "54001"
    _no_errors(caplog)


def test_a_query_nested_too_deeply_is_forwarded_with_one_warning(service, caplog):
    add_datamap(service, SCHEMAS, "db1", "agg", AGG)
    caplog.set_level(logging.INFO)
    h = DatamapSelectHandler(service)
    assert h(_ctx(), f"SELECT country, sum({DEEP}) FROM sales GROUP BY country") is None
    assert h(_ctx(), f"SELECT timeseries(ts, 'hour'), {DEEP} FROM sales") is None
    _no_errors(caplog)
    assert any(r.levelno == logging.WARNING and "too deeply" in r.getMessage()
               for r in caplog.records)


def test_unterminated_string_is_forwarded_without_a_traceback(service, caplog):
    add_datamap(service, SCHEMAS, "db1", "agg", AGG)
    assert DatamapSelectHandler(service)(_ctx(), "SELECT country FROM sales WHERE x = 'oops") is None
    _no_errors(caplog)
