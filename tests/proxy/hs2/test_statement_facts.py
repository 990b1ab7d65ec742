"""proxy/hs2/statement_facts.py: the statement event's duration, decision and client tool (pure
logic over the proxy's own records: a Session and an Operation)."""
from __future__ import annotations

import asyncio
import time

from proxy.hs2 import statement_facts as facts
from proxy.hs2.operation import OpKind, OpState, Operation
from proxy.hs2.session import Session
from proxy.thrift.gen.TCLIService import ttypes as T


def session(**kw) -> Session:
    return Session(user="ann", protocol=10, client_protocol=10, **kw)


def test_the_client_tool():
    assert facts.client_tool(session()) == ""
    assert facts.client_tool(session(configuration={"set:hiveconf:ApplicationName": "dbt"})) \
        == "dbt"
    s = session(configuration={"applicationName": "dbt"})
    s.client_info["ApplicationName"] = "Tableau"        # Hive JDBC's SetClientInfo wins
    assert facts.client_tool(s) == "Tableau"


def test_duration_runs_from_arrival_to_the_end_first_seen():
    op = Operation(OpKind.UPSTREAM, T.TOperationType.EXECUTE_STATEMENT)
    op.arrived = time.monotonic() - 7.0
    op.mirror(OpState.RUNNING)
    assert op.ended_at is None
    op.mirror(OpState.FINISHED)          # the first final status relayed
    ended = op.ended_at
    op.mirror(OpState.FINISHED)
    assert op.ended_at == ended
    time.sleep(0.05)                     # closing later does not count
    _, duration = facts.timing(op)
    assert 7.0 <= duration < 7.05
    local = Operation(OpKind.LOCAL, T.TOperationType.EXECUTE_STATEMENT)
    local.to(OpState.RUNNING)
    local.to(OpState.ERROR)
    assert local.ended_at is not None


def test_the_decision_belongs_to_its_statement():
    async def one(kind: str) -> facts.Facts:
        with facts.arriving():
            facts.decided(kind, ("db.agg",), (("db.x", "stale: files changed"),))
            await asyncio.sleep(0.01)
            return facts.current()

    async def both():
        return await asyncio.gather(one("served"), one("forwarded"))
    a, b = asyncio.run(both())
    assert (a.decision, b.decision) == ("served", "forwarded")
    assert a.datamaps == ("db.agg",) and a.why_not == (("db.x", "stale: files changed"),)
    assert facts.current() is None


def test_the_event():
    op = Operation(OpKind.LOCAL, T.TOperationType.EXECUTE_STATEMENT)
    op.count_rows(3)
    op.count_rows(None)
    op.count_rows(2)
    f = facts.Facts(arrived=0.0, at=100.0, decision="served", datamaps=("db.agg",))
    ev = facts.event(session(), op, f, 1.5, "rewrite:mv:agg served=local", "RUNNING", "SELECT 1",
                     None)
    assert (ev.at, ev.rows, ev.decision, ev.outcome, ev.duration_s) == (100.0, 5, "served",
                                                                        "CLOSED", 1.5)
