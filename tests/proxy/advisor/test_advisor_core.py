"""The advisor behind SHOW DATAMAP SUGGESTIONS and EXPLAIN WHATIF, without Spark: a real
catalog and DatamapService (schemas served by a provider), statements recorded as the
protocol layer reports them to a real query log (proxy/querylog.QueryLog on the same
catalog), synthetic sampled statistics. The Spark half (sampling, replay through the
proxy) is tests/e2e/test_advisor.py."""
from __future__ import annotations

import asyncio
import sqlite3
import time

import pytest

from proxy.advisor.core import Advisor
from proxy.advisor.results import answers
from proxy.cli.advise import _format_suggestions, _split_statements
from proxy.config import AdvisorSettings
from proxy.datamaps.ddl import parser as ddl
from proxy.datamaps.handler import DatamapDdlHandler
from proxy.errors import ClientError
from proxy.observability.observe import StatementEvent
from proxy.observability.querylog.log import LoggedQuery, QueryLog
from proxy.routing.router import Local, Reject, StatementContext
from tests.support.advise import J, ADVISE_SCHEMAS, Sizes
from tests.support.datamaps import add_datamap, decision_service

Q1 = f"SELECT dim.region, sum(amt) AS t {J} WHERE dim.cat = 'c1' GROUP BY dim.region"
Q2 = f"SELECT dim.cat, count(*) AS n {J} GROUP BY dim.cat"
SECRET = "SET spark.hadoop.fs.s3a.secret.key=hunter2"


@pytest.fixture
def service(tmp_path):
    yield from decision_service(tmp_path, ADVISE_SCHEMAS)


@pytest.fixture
def qlog(service):
    q = QueryLog(service.catalog.path)
    yield q
    q.close()


def ctx():
    return StatementContext("s1", "me", "s", {}, 10)


def seen(qlog: QueryLog, sql: str, times: int = 1, seconds: float = 2.0,
         decision: str = "forwarded", datamaps: tuple = ()) -> None:
    """`times` statements as the protocol layer reports them, written before returning."""
    for _ in range(times):
        qlog.statement(StatementEvent(time.time(), "s1", "me", "", sql, "s", decision,
                                      datamaps, duration_s=seconds))
    qlog.flush()


def run(decision):
    assert isinstance(decision, Local), decision
    return asyncio.run(decision.runner(None))


def test_suggestions_whatif_and_their_result_sets(service, qlog):
    seen(qlog, Q1, 6)
    seen(qlog, Q2, 4)
    seen(qlog, SECRET, 1, decision="local")
    advisor = Advisor(service, qlog, AdvisorSettings(), sizes=Sizes())
    h = DatamapDdlHandler(service, advise=answers(advisor))
    res = run(h(ctx(), "SHOW DATAMAP SUGGESTIONS"))
    assert [c for c, _ in res.columns][:3] == ["Kind", "DataMap", "Statement"]
    assert len(res.rows) == 1
    kind, name, create, queries, base_s, saving, rows, reason = res.rows[0]
    assert (kind, queries, rows) == ("create", 10, 200) and base_s == pytest.approx(20.0)
    assert create.startswith(f"CREATE DATAMAP {name} AS SELECT") and "dim.cat" in create
    assert isinstance(ddl.parse(create), ddl.CreateDatamap)      # the proxy accepts it

    plan = run(h(ctx(), f"EXPLAIN WHATIF {create}")).rows[0][0].splitlines()
    assert plan[0] == f"WhatIf DataMap: {name}"
    assert "Hits: 10 (hit rate 100.0%)" in plan and "Gained: 10 (read the base tables " \
        "when logged)" in plan
    assert "Estimated maintenance: unknown (no build or refresh history in the catalog)" in plan
    assert any(line.startswith("Example: 6 x select dim.region") for line in plan)
    assert not any("hunter2" in line for line in plan)


def test_errors_name_the_cause(service, qlog):
    h = DatamapDdlHandler(service)
    rej = h(ctx(), "SHOW DATAMAP SUGGESTIONS")
    assert isinstance(rej, Reject) and rej.sqlstate == "0A000" and "advisor" in rej.message
    off = Advisor(service, None, AdvisorSettings(), sizes=Sizes())
    with pytest.raises(ClientError) as e:
        off.suggest()
    assert e.value.sqlstate == "55000" and "[querylog] enabled" in str(e.value)
    advisor = Advisor(service, qlog, AdvisorSettings(), sizes=Sizes())
    with pytest.raises(ClientError) as e:
        advisor.what_if("CREATE DATAMAP bad AS SELECT nope, count(*) FROM s.sales GROUP BY "
                        "nope", "s")
    assert "bad" in str(e.value) and e.value.sqlstate
    with pytest.raises(ClientError) as e:
        advisor.what_if("SELECT 1", "s")
    assert e.value.sqlstate == "42000"
    rej = DatamapDdlHandler(service, advise=answers(advisor))(ctx(), "EXPLAIN WHATIF CREATE TABLE x "
                                                             "(a INT)")
    assert isinstance(rej, Reject) and rej.sqlstate == "42000" and "WHATIF" in rej.message


def test_drop_when_maintenance_costs_more_than_it_saved(service, qlog):
    add_datamap(service, ADVISE_SCHEMAS, "s", "by_region",
                f"SELECT dim.region, sum(amt) AS t {J} GROUP BY dim.region")
    add_datamap(service, ADVISE_SCHEMAS, "s", "by_cat",
                f"SELECT dim.cat, count(*) AS n {J} GROUP BY dim.cat")
    cat = service.catalog
    for name in ("by_region", "by_cat"):
        cat.record_event("s", name, "refreshed", rows=10, seconds=30.0)
    with sqlite3.connect(cat.path) as c:    # both are older than half the window
        c.execute("UPDATE datamaps SET created_at = created_at - 86400 * 6")
    region = f"SELECT dim.region, sum(amt) AS t {J} GROUP BY dim.region"
    seen(qlog, region, 10, seconds=9.0)                   # on the base tables: 9 s each
    seen(qlog, region, 10, seconds=0.5, decision="rewritten", datamaps=("s.by_region",))
    seen(qlog, Q2, 1, seconds=0.5, decision="rewritten", datamaps=("s.by_cat",))
    seen(qlog, Q2, 1, seconds=1.0)                        # saved 0.5 s once
    unknown = Q2.replace("count(*) AS n", "count(*) AS m")   # no base-table time: kept
    seen(qlog, unknown, 1, seconds=0.5, decision="rewritten", datamaps=("s.by_region",))
    got = Advisor(service, qlog, AdvisorSettings(), sizes=Sizes()).suggest()
    drops = [s for s in got if s.kind == "drop"]
    assert [s.datamap for s in drops] == ["s.by_cat"]        # by_region saved 85 s > 30 s
    d = drops[0]
    assert d.sql == "DROP DATAMAP s.by_cat" and d.est_maintenance_s == pytest.approx(30.0, abs=1)
    assert "30.0 s" in d.reason and "1 hits" in d.reason
    assert "saved an estimated 0.5 s (an estimate: the base-table time of their shapes, " \
           "scaled by the base tables' rows" in d.reason


def test_only_the_window_is_read_from_the_query_log(service, qlog):
    week_ago = time.time() - 8 * 86400          # [advisor] window is 7d
    qlog.write_many(LoggedQuery(0, week_ago, "me", "", "s1", "0" * 16, Q2, Q2, "s",
                                ("s.sales", "s.dim"), "forwarded", (), (), "no_datamap", 5.0,
                                None, "FINISHED", None, None) for _ in range(50))
    seen(qlog, Q1, 6)
    [s] = Advisor(service, qlog, AdvisorSettings(), sizes=Sizes()).suggest()
    assert s.queries == 6 and s.base_seconds == pytest.approx(12.0)


def test_cli_helpers():
    text = "-- first; not a split\nCREATE DATAMAP a AS SELECT ';' AS x;\n\n  ;CREATE DATAMAP b AS " \
           "SELECT 1"
    assert _split_statements(text) == ["CREATE DATAMAP a AS SELECT ';' AS x",
                                       "CREATE DATAMAP b AS SELECT 1"]
    out = _format_suggestions(["Kind", "DataMap", "Statement", "Queries"],
                              [("create", "s.x", "CREATE DATAMAP x AS SELECT 1", 3)])
    assert out.splitlines() == ["1. create s.x", "   Statement: CREATE DATAMAP x AS SELECT 1",
                                "   Queries: 3"]
    assert "no suggestions" in _format_suggestions(["Kind"], [])


@pytest.fixture
def quiet_proxy_logger():
    """The client commands silence the proxy's logger for their process: restore it."""
    import logging
    logger = logging.getLogger("proxy")
    level = logger.level
    yield
    logger.setLevel(level)


def test_advise_command_errors_are_clean(tmp_path, capsys, quiet_proxy_logger):
    import socket

    from proxy import cli
    with socket.socket() as s:          # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert cli.main(["advise", "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert f"no datamap-proxy answers at 127.0.0.1:{port}" in err and "Traceback" not in err
    assert cli.main(["advise", "--what-if", str(tmp_path / "missing.sql")]) == 2
    assert "cannot read --what-if file" in capsys.readouterr().err
    (tmp_path / "empty.sql").write_text("-- nothing\n;\n")
    assert cli.main(["advise", "--what-if", str(tmp_path / "empty.sql")]) == 2
    assert "holds no statement" in capsys.readouterr().err


def test_whatif_examples_are_shapes_without_other_users_literals(service, qlog):
    # any SQL user may run EXPLAIN WHATIF: its examples are the logged shapes (literals ->
    # ?), never a statement of someone else with the values it filtered on
    seen(qlog, f"SELECT dim.region, sum(amt) AS t {J} WHERE dim.cat = 'ann-private' "
               "GROUP BY dim.region", 3)
    advisor = Advisor(service, qlog, AdvisorSettings(), sizes=Sizes())
    w = advisor.what_if(f"CREATE DATAMAP w AS SELECT dim.region, dim.cat, sum(amt) AS t {J} "
                        "GROUP BY dim.region, dim.cat", "s")
    assert w.hits == 3
    [(example, n)] = w.examples
    assert n == 3 and "ann-private" not in example and "dim.cat = ?" in example
