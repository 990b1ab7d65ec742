"""proxy/hs2/recovery.py without Spark: the health state and its log lines, what doctor reads
of it, the session state a reopen replays, and what lost operations answer. (The real
restart of a Spark Thrift Server is tests/proxy/hs2/test_recovery.py.)"""
from __future__ import annotations

import asyncio
import json
import logging
import os

import pytest

from proxy.doctor import check_upstream_health
from proxy.errors import UpstreamError
from proxy.hs2.handles import HandleRegistry, mint
from proxy.hs2.operation import OpKind, OpState, Operation
from proxy.hs2.recovery import (HEALTH_FILE, Reopen, UpstreamHealth, lose_operations, read_health,
                            upstream_for, watch_upstream)
from proxy.hs2.session import Session, track_statement
from proxy.thrift.gen.TCLIService import ttypes as T


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def _lines(caplog, text):
    return [r.getMessage() for r in caplog.records if text in r.getMessage()]


def test_one_line_per_state_change_not_per_failure(caplog):
    clock = Clock()
    h = UpstreamHealth("sts:10000", clock=clock)
    caplog.set_level(logging.INFO, "proxy.upstream")
    h.success()
    first_connect = clock.now
    clock.now += 10
    for _ in range(3):
        h.failure("Cannot connect to Spark Thrift Server at sts:10000: Connection refused")
    assert h.state == "down" and h.consecutive_failures == 3
    clock.now += 42
    h.success()
    h.success()
    assert _lines(caplog, "upstream lost:") == [
        "upstream lost: Cannot connect to Spark Thrift Server at sts:10000: Connection refused"]
    assert _lines(caplog, "upstream back after") == ["upstream back after 42s: sts:10000 answers again"]
    assert h.state == "up" and h.consecutive_failures == 0 and h.last_failure == 1010.0
    # a session made before the outage finds its dead connection only now: no news
    h.failure("Spark Thrift Server closed the connection", connected_at=first_connect)
    assert h.state == "up" and len(_lines(caplog, "upstream lost:")) == 1
    h.failure("Spark Thrift Server closed the connection", connected_at=clock.now + 1)
    assert h.state == "down" and len(_lines(caplog, "upstream lost:")) == 2


def test_doctor_reads_the_recorded_health(tmp_path):
    assert check_upstream_health(tmp_path) == []            # no proxy ever served here
    clock = Clock()
    h = UpstreamHealth("sts:10000", tmp_path / HEALTH_FILE, clock=clock)
    h.success()
    h.reconnected()
    [up] = check_upstream_health(tmp_path, now=clock.now + 3)
    assert up.status == "PASS" and "sees sts:10000 UP" in up.detail
    assert "last success 3s ago" in up.detail and "1 session(s) reopened" in up.detail
    h.failure("Cannot connect to Spark Thrift Server at sts:10000: Connection refused")
    [down] = check_upstream_health(tmp_path, now=clock.now + 7)
    assert down.status == "WARN" and "DOWN since 7s ago" in down.detail
    assert "Connection refused" in down.detail and "start the Spark Thrift Server" in down.fix
    record = read_health(tmp_path)
    assert record["pid"] == os.getpid() and record["consecutive_failures"] == 1
    record["pid"] = 2 ** 22 + 12345                            # beyond pid_max: not running
    (tmp_path / HEALTH_FILE).write_text(json.dumps(record))
    [gone] = check_upstream_health(tmp_path)
    assert gone.status == "PASS" and "no longer running" in gone.detail


def test_health_recovers_without_client_traffic(tmp_path):
    """While the upstream is down the proxy probes it: its return is recorded (the log
    line, the file doctor reads) with no client statement. Here the upstream that comes
    back refuses the probe's login, which is an answer all the same (a real Spark Thrift
    Server's return: tests/proxy/hs2/test_recovery.py)."""
    from proxy.config import UpstreamSettings
    from proxy.thrift import sasl
    from proxy.upstream.client import UpstreamSession
    from tests.support.ports import free_port
    port = free_port()
    settings = UpstreamSettings(host="127.0.0.1", port=port, connect_timeout=2.0)
    h = UpstreamHealth(f"127.0.0.1:{port}", tmp_path / HEALTH_FILE, listen="127.0.0.1:1")

    async def refuse_login(reader, writer):
        await reader.read(1024)
        writer.write(sasl.encode_negotiation(sasl.BAD, b"no such user"))
        await writer.drain()
        writer.close()

    async def until(state):
        for _ in range(200):
            if h.state == state:
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"health still {h.state}, expected {state}")

    async def scenario():
        watch = asyncio.create_task(watch_upstream(
            h, lambda: UpstreamSession(settings), every=0.1))
        try:
            # at start, a failed probe is no news: nothing may change while three probes
            # (0.1 s apart) fail, so this waits out that window rather than a condition
            await asyncio.sleep(0.3)
            assert h.state == "unknown" and read_health(tmp_path) is None
            h.failure("Cannot connect to Spark Thrift Server: a client's call")
            await until("down")
            assert read_health(tmp_path)["state"] == "down"
            await asyncio.sleep(0.3)              # once down, the probes' failures count
            assert h.consecutive_failures > 1
            server = await asyncio.start_server(refuse_login, "127.0.0.1", port)
            async with server:
                await until("up")
        finally:
            watch.cancel()
    asyncio.run(scenario())
    record = read_health(tmp_path)
    assert record["state"] == "up" and record["listen"] == "127.0.0.1:1"
    [up] = check_upstream_health(tmp_path)
    assert up.status == "PASS" and "UP" in up.detail


def test_the_sets_spark_accepted_are_kept_in_order_for_replay():
    s = Session(user="u", protocol=5, client_protocol=5)
    for sql in ("SET spark.sql.shuffle.partitions=3", "SET a.b = 1", "SET TIME ZONE 'UTC'",
                "SET spark.sql.shuffle.partitions", "SET spark.sql.shuffle.partitions=5;",
                "USE `Sales`", "SET c=2", "RESET c", "select 1"):
        track_statement(s, sql)
    assert list(s.spark_sets.values()) == ["SET a.b = 1", "SET TIME ZONE 'UTC'",
                                           "SET spark.sql.shuffle.partitions=5"]
    assert s.current_db == "sales"
    track_statement(s, "RESET")
    assert s.spark_sets == {}


def test_lost_operations_answer_the_upstream_failure():
    s = Session(user="u", protocol=5, client_protocol=5)
    ops = {}
    for name, kind, state in (("running", OpKind.UPSTREAM, OpState.RUNNING),
                              ("finished", OpKind.UPSTREAM, OpState.FINISHED),
                              ("local", OpKind.LOCAL, OpState.FINISHED)):
        op = Operation(kind, 0, statement=f"select '{name}'", state=state,
                       upstream_handle=None if kind is OpKind.LOCAL else object())
        s.operations.add(op, mint())
        ops[name] = op
    lose_operations(s, "Spark Thrift Server closed the connection")
    running, finished = ops["running"], ops["finished"]
    assert running.state is OpState.ERROR and running.lost.sqlState == "08S01"
    # the statement ended when its upstream died, not when its client closes it
    assert running.ended_at is not None and finished.ended_at is None
    assert running.lost.errorMessage.startswith(
        "upstream Spark Thrift Server connection lost while running: select 'running' "
        "(Spark Thrift Server closed the connection)")
    assert finished.state is OpState.FINISHED and "result of select 'finished' is gone" in \
        finished.lost.errorMessage
    assert ops["local"].lost is None


class _FakeConn:
    def __init__(self, alive=True):
        self.alive, self.health, self.on_break, self.closed = alive, None, None, False

    def probe(self):
        return self.alive

    def close(self):
        self.closed = True


class _FakeUpstream:
    """Stands in for proxy.upstream.client.UpstreamSession: records what the reopen asks of it."""

    def __init__(self, refuse: str | None = None):
        self.conn, self.handle, self.ran, self.refuse = _FakeConn(), None, [], refuse

    async def open(self, user, password, client_protocol, configuration, real_user=None):
        await asyncio.sleep(0.01)            # let a concurrent caller arrive meanwhile
        self.opened_as = (user, password, client_protocol, configuration)
        self.real_user = real_user
        self.handle = object()
        return T.TOpenSessionResp(status=T.TStatus(statusCode=T.TStatusCode.SUCCESS_STATUS),
                                  sessionHandle=self.handle)

    async def run_sql(self, sql):
        if self.refuse and self.refuse in sql:
            raise UpstreamError("[SCHEMA_NOT_FOUND] The schema `gone` cannot be found",
                                sqlstate="42000")
        self.ran.append(sql)

    async def close(self):
        self.conn.close()


class _FakeService:
    def __init__(self, session, refuse=None):
        self.made: list[_FakeUpstream] = []
        self.health = UpstreamHealth("sts:1")
        self.sessions = HandleRegistry("SessionHandle")
        session.handle = self.sessions.add(session)
        self.refuse = refuse

    def _factory(self):
        self.made.append(_FakeUpstream(self.refuse))
        return self.made[-1]

    def _upstream_lost(self, session, reason):
        pass


def _broken_session(**kw) -> Session:
    s = Session(user="alice", protocol=5, client_protocol=5,
                configuration={"use:database": "default", "k": "v"}, **kw)
    s.upstream = _FakeUpstream()
    s.upstream.conn.alive = False
    s.reopen = Reopen("secret")
    for sql in ("SET spark.sql.shuffle.partitions=3", "USE sales", "SET TIME ZONE 'UTC'"):
        track_statement(s, sql)
    return s


def test_concurrent_calls_reopen_once_and_replay_in_order():
    s = _broken_session()
    service = _FakeService(s)

    async def main():
        return await asyncio.gather(upstream_for(service, s), upstream_for(service, s))
    a, b = asyncio.run(main())
    assert a is b is s.upstream and len(service.made) == 1
    assert a.opened_as == ("alice", "secret", 5, {"use:database": "default", "k": "v"})
    assert a.ran == ["SET spark.sql.shuffle.partitions=3", "SET TIME ZONE 'UTC'", "USE `sales`"]
    assert a.conn.on_break is not None and service.health.reconnects == 1
    assert "secret" not in repr(s.reopen)


def test_an_impersonating_session_reopens_as_the_same_pair():
    s = _broken_session(real_user="hue")        # hue acts as alice (proxy/hs2/identity.py)
    up = asyncio.run(upstream_for(_FakeService(s), s))
    assert (up.opened_as[0], up.real_user) == ("alice", "hue")


def test_a_failed_replay_closes_the_new_session_and_names_the_statement():
    s = _broken_session()
    service = _FakeService(s, refuse="USE")
    old = s.upstream
    with pytest.raises(UpstreamError) as info:
        asyncio.run(upstream_for(service, s))
    assert info.value.sqlstate == "08S01"
    assert "replaying `USE `sales`` failed: [SCHEMA_NOT_FOUND]" in str(info.value)
    assert s.upstream is old and service.made[0].conn.closed


def test_a_refused_set_is_named_by_its_key_not_its_value():
    s = _broken_session()
    track_statement(s, "SET fs.s3a.secret.key=hunter2")
    service = _FakeService(s, refuse="hunter2")
    with pytest.raises(UpstreamError) as info:
        asyncio.run(upstream_for(service, s))
    assert "replaying `SET fs.s3a.secret.key` failed" in str(info.value)
    assert "hunter2" not in str(info.value)


def test_a_write_that_cannot_reach_spark_ends_its_hold_and_is_audited(tmp_path):
    # recovery x datamap loads x audit: with Spark down the reopen fails before the statement
    # is sent; the freshness guard's hold on the written table (`ended`) must end, and the
    # audit log must still have the statement, as an error
    from proxy.config import ServerSettings, Settings, UpstreamSettings
    from proxy.routing.router import PassThrough, Router
    from proxy.hs2.connection import ClientConnection
    from proxy.hs2.frontend import Frontend
    from proxy.observability.audit_log import AuditLog
    from proxy.observability.observe import Observers
    from proxy.upstream.client import UpstreamSession
    from tests.support.ports import free_port

    ended = []

    async def after(_run_sql):
        pass

    def load(ctx, statement):
        return PassThrough(after=after, ended=lambda: ended.append(statement))

    audit = tmp_path / "audit.jsonl"
    settings = Settings(server=ServerSettings(audit_log=str(audit)),
                        upstream=UpstreamSettings(host="127.0.0.1", port=free_port(),
                                                  connect_timeout=5.0))
    audit_log = AuditLog(str(audit))
    service = Frontend(settings, Router([load]), observers=Observers(audit_log))
    s = Session(user="alice", protocol=5, client_protocol=5)
    s.upstream = UpstreamSession(settings.upstream)
    s.upstream.conn.broken = "Spark Thrift Server closed the connection"
    s.reopen = Reopen("secret")
    s.handle = service.session_manager.sessions.add(s)
    req = T.TExecuteStatementReq(sessionHandle=T.TSessionHandle(sessionId=s.handle),
                                 statement="INSERT INTO db.fact VALUES (1)", runAsync=True)
    with pytest.raises(UpstreamError) as info:
        asyncio.run(service.statement_runner.execute(ClientConnection("10.0.0.7:5123"),
                                                         "ExecuteStatement", req, 1))
    assert info.value.sqlstate == "08S01"
    assert ended == ["INSERT INTO db.fact VALUES (1)"]
    audit_log.close()
    [line] = [json.loads(x) for x in audit.read_text().splitlines()]
    assert (line["event"], line["outcome"], line["sqlstate"]) == ("statement", "error", "08S01")


class _SparkConn(_FakeConn):
    """A connection that runs ExecuteStatement while alive (fails as a lost one after)."""

    async def call(self, name, req, seqid=0):
        if not self.alive:
            raise UpstreamError("Connection to Spark Thrift Server at sts:1 is lost: closed")
        assert name == "ExecuteStatement"
        self.executed = req.statement
        return T.TExecuteStatementResp(
            status=T.TStatus(statusCode=T.TStatusCode.SUCCESS_STATUS),
            operationHandle=T.TOperationHandle(
                operationId=T.THandleIdentifier(b"u" * 16, b"u" * 16),
                operationType=T.TOperationType.EXECUTE_STATEMENT, hasResultSet=True))


def test_a_queued_statement_reopens_an_upstream_lost_while_it_waited():
    # limits x recovery: Spark restarted while the statement waited for a running slot;
    # when the slot comes it is sent on a reopened session, not failed on the dead one
    from proxy.config import ServerSettings, Settings
    from proxy.routing.router import Router
    from proxy.hs2.frontend import Frontend

    made = []

    def factory():
        up = _FakeUpstream()
        up.conn = _SparkConn()
        made.append(up)
        return up
    service = Frontend(Settings(server=ServerSettings(max_running_operations=1)), Router(),
                      upstream_factory=factory)
    s = Session(user="alice", protocol=5, client_protocol=5)
    s.upstream, s.reopen = factory(), Reopen("secret")
    s.handle = service.session_manager.sessions.add(s)
    req = T.TExecuteStatementReq(sessionHandle=T.TSessionHandle(sessionId=s.handle),
                                 statement="SELECT 1", runAsync=True)

    async def main():
        assert service.run_gate.enter() is None          # someone else runs
        resp = await service.statement_runner._execute_gated(s, req, "SELECT 1", "pass", 1)
        op = service.operation_manager.operations.get(resp.operationHandle.operationId)
        assert op.state is OpState.PENDING
        made[0].conn.alive = False                        # Spark restarts meanwhile
        service.run_gate.release()
        await asyncio.wait_for(op.done.wait(), 10)
        try:
            return op, op.state, op.error
        finally:
            service.operation_manager.forget(op, "closed")
    op, state, error = asyncio.run(main())
    assert error is None and state is OpState.RUNNING and op.kind is OpKind.UPSTREAM
    assert len(made) == 2 and s.upstream is made[1] and made[1].conn.executed == "SELECT 1"
