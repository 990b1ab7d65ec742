"""Hostile statements (huge or deeply nested) through the datamap handlers. No Spark: a real
catalog, schemas given as data (the fixtures of test_handler.py).

Over [datamaps] rewrite_max_sql_bytes: not parsed; forwarded unchanged, or
rejected when it calls timeseries(). Nested too deeply for Python's recursion limit (5,000
parentheses): datamap DDL fails with 54001 "statement too complex", a query is
forwarded unchanged, and neither logs an ERROR or a traceback."""
from __future__ import annotations

import logging

import pytest

from proxy.datamaps.handler import DatamapDdlHandler, DatamapSelectHandler, over_limit
from proxy.errors import ClientError
from proxy.routing.router import Local, LocalResult, Reject, Rewrite
from tests.support.datamaps import add_datamap, decision_service, forwarded, SALES_AGG, SALES_SCHEMAS, statement_ctx

DEEP = "(" * 5000 + "qty" + ")" * 5000


@pytest.fixture
def service(tmp_path):
    yield from decision_service(tmp_path, SALES_SCHEMAS)


def _no_errors(caplog):
    bad = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert not bad, [r.getMessage() for r in bad]


def test_over_limit_counts_utf8_bytes():
    assert not over_limit("x" * 10, 10) and over_limit("x" * 11, 10)
    assert over_limit("é" * 6, 10) and not over_limit("é" * 5, 10)
    assert not over_limit("x" * 10**6, None)


def test_a_statement_over_rewrite_max_sql_bytes_is_forwarded_without_a_parse(service):
    add_datamap(service, SALES_SCHEMAS, "db1", "agg", SALES_AGG)
    query = "SELECT country, sum(qty) FROM sales GROUP BY country"
    assert isinstance(DatamapSelectHandler(service, 1000)(statement_ctx(), query), Rewrite)
    padded = query + " -- " + "x" * 1000
    assert forwarded(DatamapSelectHandler(service, 1000)(statement_ctx(), padded))
    assert service.index()._cache.get((padded, "db1")) is None     # never reached the rewriter


def test_timeseries_over_the_limit_is_rejected_with_the_cause(service):
    sql = "SELECT timeseries(ts, 'hour'), count(*) FROM sales GROUP BY 1 -- " + "x" * 1000
    rej = DatamapSelectHandler(service, 1000)(statement_ctx(), sql)
    assert isinstance(rej, Reject) and rej.sqlstate == "54001"
    assert "rewrite_max_sql_bytes" in rej.message and "timeseries()" in rej.message


async def test_explain_of_a_statement_over_the_limit_shows_it_unchanged(service):
    add_datamap(service, SALES_SCHEMAS, "db1", "agg", SALES_AGG)
    query = "SELECT country, sum(qty) FROM sales GROUP BY country -- " + "x" * 1000
    sent = []

    async def upstream(sql):
        sent.append(sql)
        return LocalResult((("plan", "string"),), [("plan",)])
    decision = DatamapDdlHandler(service, 1000)(statement_ctx(), "EXPLAIN " + query)
    res = await decision.runner(upstream)
    assert sent == ["EXPLAIN " + query] and "No datamap hit" in res.rows[0][0]


async def test_create_datamap_nested_too_deeply_is_54001_statement_too_complex(service, caplog):
    decision = DatamapDdlHandler(service)(
        statement_ctx(), f"CREATE DATAMAP d USING 'mv' AS SELECT country, sum({DEEP}) FROM sales "
                "GROUP BY country")
    assert isinstance(decision, Local)
    with pytest.raises(ClientError) as err:
        await decision.runner(None)
    assert err.value.sqlstate == "54001" and "too complex" in str(err.value)
    assert service.catalog.list_datamaps() == []
    _no_errors(caplog)


def test_legacy_datamap_nested_too_deeply_is_rejected_54001(service, caplog):
    rej = DatamapDdlHandler(service)(
        statement_ctx(), f"CREATE DATAMAP d ON TABLE sales USING 'preaggregate' AS "
                f"SELECT country, sum({DEEP}) FROM sales GROUP BY country")
    assert isinstance(rej, Reject) and rej.sqlstate == "54001"
    _no_errors(caplog)


def test_a_query_nested_too_deeply_is_forwarded_with_one_warning(service, caplog):
    add_datamap(service, SALES_SCHEMAS, "db1", "agg", SALES_AGG)
    caplog.set_level(logging.INFO)
    h = DatamapSelectHandler(service)
    assert forwarded(h(statement_ctx(), f"SELECT country, sum({DEEP}) FROM sales GROUP BY country"))
    assert forwarded(h(statement_ctx(), f"SELECT timeseries(ts, 'hour'), {DEEP} FROM sales"))
    _no_errors(caplog)
    assert any(r.levelno == logging.WARNING and "too deeply" in r.getMessage()
               for r in caplog.records)


def test_unterminated_string_is_forwarded_without_a_traceback(service, caplog):
    add_datamap(service, SALES_SCHEMAS, "db1", "agg", SALES_AGG)
    assert DatamapSelectHandler(service)(statement_ctx(), "SELECT country FROM sales WHERE x = 'oops") is None
    _no_errors(caplog)
