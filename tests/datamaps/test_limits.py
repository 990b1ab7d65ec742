"""Statements over [datamaps] rewrite_max_sql_bytes are not parsed (issue 10, defect 2):
forwarded unchanged, or rejected when they call timeseries(). No Spark: a real catalog,
schemas given as data."""
from __future__ import annotations

import pytest

from proxy.datamaps.handler import DatamapDdlHandler, DatamapSelectHandler, over_limit
from proxy.router import LocalResult, Reject, Rewrite, StatementContext
from tests.datamaps.support import add_datamap, decision_service

SCHEMAS = {"db1": {"sales": {"id": "int", "country": "string", "qty": "int",
                             "ts": "timestamp"}}}
AGG = "SELECT country, sum(qty) FROM db1.sales GROUP BY country"


@pytest.fixture
def service(tmp_path):
    yield from decision_service(tmp_path, SCHEMAS)


def _ctx():
    return StatementContext("s1", "me", "db1", {}, 10)


def test_over_limit_counts_utf8_bytes():
    assert not over_limit("x" * 10, 10) and over_limit("x" * 11, 10)
    assert over_limit("é" * 6, 10) and not over_limit("é" * 5, 10)
    assert not over_limit("x" * 10**6, None)


def test_a_statement_over_rewrite_max_sql_bytes_is_forwarded_without_a_parse(service):
    add_datamap(service, SCHEMAS, "db1", "agg", AGG)
    query = "SELECT country, sum(qty) FROM sales GROUP BY country"
    assert isinstance(DatamapSelectHandler(service, 1000)(_ctx(), query), Rewrite)
    padded = query + " -- " + "x" * 1000
    assert DatamapSelectHandler(service, 1000)(_ctx(), padded) is None
    assert service.index()._cache.get((padded, "db1")) is None     # never reached the rewriter


def test_timeseries_over_the_limit_is_rejected_with_the_cause(service):
    sql = "SELECT timeseries(ts, 'hour'), count(*) FROM sales GROUP BY 1 -- " + "x" * 1000
    rej = DatamapSelectHandler(service, 1000)(_ctx(), sql)
    assert isinstance(rej, Reject) and rej.sqlstate == "54001"
    assert "rewrite_max_sql_bytes" in rej.message and "timeseries()" in rej.message


async def test_explain_of_a_statement_over_the_limit_shows_it_unchanged(service):
    add_datamap(service, SCHEMAS, "db1", "agg", AGG)
    query = "SELECT country, sum(qty) FROM sales GROUP BY country -- " + "x" * 1000
    sent = []

    async def upstream(sql):
        sent.append(sql)
        return LocalResult((("plan", "string"),), [("plan",)])
    decision = DatamapDdlHandler(service, 1000)(_ctx(), "EXPLAIN " + query)
    res = await decision.runner(upstream)
    assert sent == ["EXPLAIN " + query] and "No datamap hit" in res.rows[0][0]
