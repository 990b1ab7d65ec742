"""The protocol layer with router decisions (Rewrite, Local with upstream SQL, PassThrough
with an `after` hook), idle timeouts and PLAIN users, the proxy running in-process against
real Spark."""
from __future__ import annotations

import asyncio
import time

import pytest

from proxy import config
from proxy.gateway.auth import plain as auth
from proxy.gateway.server import ProxyServer
from proxy.observability.observe import Observer
from proxy.routing.router import Local, LocalResult, PassThrough, Rewrite, Router
from proxy.thrift.gen.TCLIService import ttypes as T
from tests.support.wire import Raw

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]


def _settings(upstream, **server):
    return config.load(env={}, flags={"server": {"port": 0, **server},
                                      "upstream": {"host": upstream.host, "port": upstream.port}})


async def _start(settings, router, authenticator=None):
    srv = ProxyServer(settings, router, authenticator=authenticator)
    host, port = await srv.start()
    return srv, host, port


async def test_rewrite_local_and_after_hook(gw_sts):
    seen: list = []

    async def after(upstream):
        res = await upstream("select count(*) from gw_hook_t")
        seen.append(res.rows[0][0])

    async def local(upstream):
        res = await upstream("select 40 + 2 as x")
        return LocalResult(columns=[("answer", "int")], rows=[(res.rows[0][0],), (None,)])

    async def failing_after(upstream):
        raise RuntimeError("hook exploded")

    def handler(ctx, sql):
        s = sql.strip().lower()
        if s.startswith("insert into gw_hook_t"):
            return PassThrough(after=after)
        if s == "select 'orig'":
            return Rewrite(sql="select 'rewritten'", note="test")
        if s == "ask":
            return Local(local, note="ask")
        if s.startswith("insert into gw_hook_fail"):
            return PassThrough(after=failing_after)
        return None

    srv, host, port = await _start(_settings(gw_sts), Router(handlers=[handler]))
    try:
        def client():
            c = Raw(host, port)
            c.open()
            for sql in ("drop table if exists gw_hook_t", "create table gw_hook_t (a int) using parquet",
                        "drop table if exists gw_hook_fail", "create table gw_hook_fail (a int) using parquet"):
                assert c.execute(sql).status.statusCode == 0
            # async: the client must not see FINISHED before the hook ran
            r = c.execute("insert into gw_hook_t values (1), (2)", run_async=True)
            while True:
                st = c.call("GetOperationStatus", T.TGetOperationStatusReq(operationHandle=r.operationHandle))
                if st.operationState not in (0, 1, 7):
                    break
            assert st.operationState == T.TOperationState.FINISHED_STATE and seen == [2]
            # sync: ExecuteStatement returns after the hook
            r = c.execute("insert into gw_hook_t values (3)")
            assert r.status.statusCode == 0 and seen == [2, 3]
            # hook failure -> ERROR with the cause
            r = c.execute("insert into gw_hook_fail values (1)")
            assert r.status.statusCode == T.TStatusCode.ERROR_STATUS
            assert "hook exploded" in r.status.errorMessage
            r = c.execute("select 'orig'")
            f = c.fetch(r.operationHandle)
            assert f.results.columns[0].stringVal.values == ["rewritten"]
            r = c.execute("ask")
            f = c.fetch(r.operationHandle)
            assert f.results.columns[0].i32Val.values == [42, 0]
            assert f.results.columns[0].i32Val.nulls == b"\x02"
            c.execute("drop table gw_hook_t")
            c.execute("drop table gw_hook_fail")
            c.close()
        await asyncio.to_thread(client)
    finally:
        await srv.shutdown(grace=5)


async def test_idle_session_timeout(gw_sts):
    srv, host, port = await _start(_settings(gw_sts, idle_session_timeout=1.0), Router())
    try:
        def client():
            c = Raw(host, port)
            c.open()
            time.sleep(3.5)
            r = c.execute("select 1")
            assert r.status.statusCode == T.TStatusCode.ERROR_STATUS
            assert "Invalid SessionHandle" in r.status.errorMessage
            c.close()
        await asyncio.to_thread(client)
    finally:
        await srv.shutdown(grace=5)


async def test_users_file_plain(gw_sts, tmp_path):
    users = tmp_path / "users"
    auth.add_user(users, "alice", "wonder")
    srv, host, port = await _start(_settings(gw_sts, users_file=str(users)), Router(),
                                   auth.UsersFile(users))
    try:
        def client():
            from pyhive import hive
            conn = hive.connect(host, port, username="alice", password="wonder", auth="LDAP")
            cur = conn.cursor()
            cur.execute("select current_user()")
            assert cur.fetchall() == [("alice",)]
            conn.close()
            with pytest.raises(Exception):
                hive.connect(host, port, username="alice", password="wrong", auth="LDAP")
        await asyncio.to_thread(client)
    finally:
        await srv.shutdown(grace=5)


class Recorder(Observer):
    def __init__(self):
        self.events = []

    def statement(self, ev):
        self.events.append(ev)


async def _recorded(settings, router):
    """_start, with a Recorder of the statement events observing the protocol Service."""
    srv, host, port = await _start(settings, router)
    recorder = Recorder()
    srv.service.observers.add(recorder)
    return srv, host, port, recorder


async def test_idle_operation_timeout_closes_finished_operations(gw_sts):
    """Statements the client never closes still reach the query log (their event comes at
    close): when the idle operation is reaped, and when the session closes."""
    srv, host, port, recorder = await _recorded(_settings(gw_sts, idle_operation_timeout=1.0),
                                                Router())
    try:
        def client():
            c = Raw(host, port)
            c.open()
            r = c.execute("select 1")
            time.sleep(3.5)
            st = c.call("GetOperationStatus", T.TGetOperationStatusReq(operationHandle=r.operationHandle))
            assert "Invalid OperationHandle" in st.status.errorMessage
            assert [e.statement for e in recorder.events] == ["select 1"]      # reaped
            assert c.execute("select 2").status.statusCode == 0      # the session lives on
            c.close()
        await asyncio.to_thread(client)
    finally:
        await srv.shutdown(grace=5)
    reaped, closed = recorder.events
    assert (reaped.outcome, closed.statement, closed.outcome) == ("FINISHED", "select 2",
                                                                   "FINISHED")


async def test_result_affecting_settings_reach_the_router_as_a_block(gw_sts):
    """A statement whose confOverlay sets the time zone, and every statement of a session
    after `SET TIME ZONE`, reach the router with datamap rewriting blocked; the SET itself
    and the statements still run on Spark."""
    from proxy.routing.session_keys import BLOCKED_KEY
    from proxy.routing import statements
    seen: dict[str, bool] = {}

    def spy(ctx, sql):
        seen[sql] = BLOCKED_KEY in ctx.conf
        return None

    router = Router(handlers=[spy])
    statements.install(router)
    srv, host, port = await _start(_settings(gw_sts), router)
    try:
        def client():
            c = Raw(host, port)
            c.open()
            assert c.execute("select 1 as plain").status.statusCode == 0
            r = c.call("ExecuteStatement", T.TExecuteStatementReq(
                sessionHandle=c.session, statement="select 2 as overlay",
                confOverlay={"spark.sql.session.timeZone": "Asia/Kathmandu"}))
            assert r.status.statusCode == 0
            assert c.execute("select 3 as again").status.statusCode == 0
            assert c.execute("SET TIME ZONE 'America/Caracas'").status.statusCode == 0
            assert c.execute("select 4 as after_set").status.statusCode == 0
            c.close()
        await asyncio.to_thread(client)
    finally:
        await srv.shutdown(grace=5)
    assert seen == {"select 1 as plain": False, "select 2 as overlay": True,
                    "select 3 as again": False, "SET TIME ZONE 'America/Caracas'": True,
                    "select 4 as after_set": True}


async def test_statement_events(gw_sts):
    """The statement events the query log records (proxy/observability/observe.py, proxy/hs2/statement_facts.py):
    decision, datamaps, rows sent (counted in Spark's relayed bytes; a re-read from the
    first row counts once), and the duration to the statement's end, not to its close."""
    async def local(upstream):
        return LocalResult(columns=[("x", "int")], rows=[(1,), (2,), (3,)])

    def handler(ctx, sql):
        s = sql.strip().lower()
        if s == "ask":
            return Local(local, note="ask")
        if s.startswith("select 'orig'"):
            return Rewrite(sql="select 'rewritten'", note="mv:db.agg", datamaps=("db.agg",))
        if "from range" in s:
            return PassThrough(why_not=(("db.agg", "column id is not in datamap agg"),))
        return None

    srv, host, port, recorder = await _recorded(_settings(gw_sts), Router(handlers=[handler]))
    try:
        def client():
            c = Raw(host, port)
            c.open()
            r = c.execute("ask")
            c.fetch(r.operationHandle)
            c.call("CloseOperation", T.TCloseOperationReq(operationHandle=r.operationHandle))
            r = c.execute("select 'orig'")
            c.fetch(r.operationHandle)
            c.call("CloseOperation", T.TCloseOperationReq(operationHandle=r.operationHandle))
            r = c.execute("select id from range(250)")
            assert len(c.fetch(r.operationHandle, 100).results.columns[0].i64Val.values) == 100
            c.fetch(r.operationHandle, 1000)
            c.fetch(r.operationHandle, 1000, orientation=T.TFetchOrientation.FETCH_FIRST)
            c.call("CloseOperation", T.TCloseOperationReq(operationHandle=r.operationHandle))
            r = c.execute("select reflect('java.lang.Thread', 'sleep', 1500L)")   # sync
            time.sleep(1.0)                  # closed a while after it ended
            c.call("CloseOperation", T.TCloseOperationReq(operationHandle=r.operationHandle))
            c.close()
        await asyncio.to_thread(client)
    finally:
        await srv.shutdown(grace=5)
    ask, rewritten, passed, slow = recorder.events
    assert (ask.decision, ask.rows, ask.outcome, ask.user) == ("local", 3, "FINISHED", "me")
    assert (rewritten.decision, rewritten.datamaps, rewritten.rows) == ("rewritten", ("db.agg",), 1)
    assert (passed.decision, passed.rows) == ("forwarded", 250)
    assert passed.why_not == (("db.agg", "column id is not in datamap agg"),)
    assert slow.decision == "forwarded" and 1.5 <= slow.duration_s < 2.4, slow.duration_s
