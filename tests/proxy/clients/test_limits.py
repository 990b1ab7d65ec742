"""Limits through a real proxy in front of the shared Spark Thrift Server, with real
clients (docs/limits.md): HiveServer2's session limits, the running-statement cap and its
queue, the server's query timeout, and SIGHUP changing them while sessions stay open.

One proxy of this module's own (its settings file is rewritten and the proxy sent SIGHUP
before each test: every test also exercises the reload). No Spark of its own."""
from __future__ import annotations

import contextlib
import os
import signal
import threading
import time

import pytest

from tests.support.clients import (ClientError, RawHS2, _pyhive_error, impyla_connect, jdbc_url,
                                   pyhive_connect, pyhive_execute, run_beeline)
from tests.support.proxy_proc import start_proxy

# Short long-polls: a status call on a queued statement answers while it is still queued.
BASE = "long_poll_timeout = 0.5\n"
SLEEP = "SELECT reflect('java.lang.Thread', 'sleep', CAST({ms} AS BIGINT)) AS slept"


class Limited:
    def __init__(self, proc, config):
        self.proc, self.config = proc, config
        self.host, self.port = proc.host, proc.port

    def reconfigure(self, server: str = "") -> None:
        """Rewrite [server] of the settings file and SIGHUP; back when the proxy logged it."""
        before = self._reloads()
        self.config.write_text(f"[server]\n{BASE}{server}\n")
        os.kill(self.proc.pid, signal.SIGHUP)
        deadline = time.monotonic() + 20
        while self._reloads() == before:
            assert time.monotonic() < deadline, "the proxy did not log the SIGHUP reload"
            time.sleep(0.05)

    def _reloads(self) -> int:
        return self.proc.log_path.read_text(errors="replace").count("SIGHUP: settings")

    def log(self) -> str:
        return self.proc.log_path.read_text(errors="replace")


@pytest.fixture(scope="module")
def limited(sts, itest_dir):
    work = itest_dir / "limits"
    work.mkdir(exist_ok=True)
    config = work / "proxy.toml"
    config.write_text(f"[server]\n{BASE}")
    proc = start_proxy(work, (sts.host, sts.port), extra_args=["--config", str(config)])
    yield Limited(proc, config)
    assert proc.stop() == 0


def _refused(user: str, lim: Limited) -> ClientError:
    from pyhive import exc as pyhive_exc
    with pytest.raises(pyhive_exc.OperationalError) as e:
        pyhive_connect(lim.host, lim.port, username=user)
    return _pyhive_error(e.value)


def test_session_limits_per_user_and_address_with_hive_text(limited, itest_dir):
    limited.reconfigure("limit_connections_per_user = 1\nlimit_connections_per_ipaddress = 2")
    alice = pyhive_connect(limited.host, limited.port, username="alice")
    try:
        cur = alice.cursor()
        assert pyhive_execute(cur, "SELECT 1").rows == [(1,)]
        err = _refused("alice", limited)
        assert (err.sqlstate, err.message) == (
            "08004", "Connection limit per user reached (user: alice limit: 1); "
                     "[server] limit_connections_per_user")
        run = run_beeline(jdbc_url(limited.host, limited.port), ["SELECT 1"], user="alice",
                          workdir=itest_dir / "limits")
        assert "Connection limit per user reached (user: alice limit: 1)" in run.stderr
        with pytest.raises(Exception, match=r"Connection limit per user reached \(user: alice"):
            impyla_connect(limited.host, limited.port, user="alice").cursor()
        bob = pyhive_connect(limited.host, limited.port, username="bob")
        err = _refused("carol", limited)
        assert err.message == ("Connection limit per ipaddress reached (ipaddress: 127.0.0.1 "
                               "limit: 2); [server] limit_connections_per_ipaddress")
        bob.close()
        assert pyhive_execute(cur, "SELECT 2").rows == [(2,)]    # refusals cost alice nothing
    finally:
        alice.close()
    again = pyhive_connect(limited.host, limited.port, username="alice")   # released on close
    again.close()


def test_running_cap_queues_refuses_a_full_line_and_runs_the_queued_ones(limited):
    limited.reconfigure("max_running_operations = 1\noperation_queue_size = 2\n"
                        "operation_queue_timeout = 60")
    with RawHS2(limited.host, limited.port, username="u1") as r1, \
            RawHS2(limited.host, limited.port, username="u2") as r2, \
            RawHS2(limited.host, limited.port, username="u3") as r3:
        t = r1.t

        def submit(raw, sql):
            return raw._check(raw.client.ExecuteStatement(t.TExecuteStatementReq(
                sessionHandle=raw.session, statement=sql, runAsync=True))).operationHandle

        def state(raw, op):
            return raw.client.GetOperationStatus(
                t.TGetOperationStatusReq(operationHandle=op)).operationState
        slow = submit(r1, SLEEP.format(ms=20000))   # cancelled below: no race with its end
        queued = submit(r2, "SELECT 41 AS v")
        dropped = submit(r3, "SELECT 0 AS v")
        assert state(r2, queued) == state(r3, dropped) == t.TOperationState.PENDING_STATE
        conn = pyhive_connect(limited.host, limited.port, username="u4")   # USE passes
        try:
            with pytest.raises(ClientError) as e:
                pyhive_execute(conn.cursor(), "SELECT 1")
        finally:
            conn.close()
        assert e.value.sqlstate == "53000"
        assert e.value.message == (
            "Too many running statements: 1 run, the cap is 1 ([server] max_running_operations), "
            "and the queue is full (2 waiting, [server] operation_queue_size = 2)")
        assert r1.get_schemas().rows          # metadata calls are not capped
        # a cancelled statement leaves the line (it never reaches Spark) ...
        r3._check(r3.client.CancelOperation(t.TCancelOperationReq(operationHandle=dropped)))
        assert r3.wait(dropped, 10) == t.TOperationState.CANCELED_STATE
        # ... so a sync one can wait in its place; cancelling the slow one frees the slot
        # for the one queued first, then for the sync one
        cancelled = []
        timer = threading.Timer(1.0, lambda: cancelled.append(r1.client.CancelOperation(
            t.TCancelOperationReq(operationHandle=slow))))
        timer.start()
        try:
            assert r3.execute("SELECT 42 AS v").rows == [(42,)]
        finally:
            timer.join()
        assert r1.wait(slow, 10) == t.TOperationState.CANCELED_STATE
        assert r2.wait(queued, 10) == t.TOperationState.FINISHED_STATE
        assert r2.fetch_all(queued).rows == [(41,)]


def test_query_timeout_cancels_and_the_session_stays_usable(limited, itest_dir):
    limited.reconfigure("query_timeout = 2")
    conn = pyhive_connect(limited.host, limited.port, username="tim")
    try:
        cur = conn.cursor()
        t0 = time.monotonic()
        with pytest.raises(ClientError) as e:
            pyhive_execute(cur, SLEEP.format(ms=30000))
        assert time.monotonic() - t0 < 20
        assert (e.value.sqlstate, e.value.message) == ("HYT00", "Query timed out after 2 seconds")
        assert pyhive_execute(cur, "SELECT 5").rows == [(5,)]
    finally:
        conn.close()
    run = run_beeline(jdbc_url(limited.host, limited.port),
                      [SLEEP.format(ms=30000), "SELECT 6 AS v"], workdir=itest_dir / "limits")
    # Hive JDBC words TIMEDOUT_STATE itself, with the client's own queryTimeout (0 here),
    # as it does against HiveServer2
    assert "Error: Query timed out after 0 seconds" in run.stderr
    assert run.results[1].rows == [("6",)]


def test_sighup_lowers_a_limit_under_an_open_session_that_keeps_working(limited):
    limited.reconfigure("")
    first = pyhive_connect(limited.host, limited.port, username="dana")
    second = pyhive_connect(limited.host, limited.port, username="dana")
    try:
        limited.reconfigure("limit_connections_per_user = 1")
        for conn, v in ((first, 7), (second, 8)):    # both stay open and working
            assert pyhive_execute(conn.cursor(), f"SELECT {v}").rows == [(v,)]
        assert "limit: 1" in _refused("dana", limited).message
        # a bad file keeps the settings in force and says why
        before = limited._reloads()
        limited.config.write_text(f"[server]\n{BASE}limit_connections_per_user = 'two'\n")
        os.kill(limited.proc.pid, signal.SIGHUP)
        deadline = time.monotonic() + 20
        while limited._reloads() == before:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert "settings not reloaded, the old ones stay" in limited.log()
        assert "limit: 1" in _refused("dana", limited).message
        assert pyhive_execute(first.cursor(), "SELECT 9").rows == [(9,)]
    finally:
        first.close()
        second.close()
    assert limited.proc.alive()


def test_the_idle_reaper_gives_a_session_its_place_back(limited):
    # idle_session_timeout changed by SIGHUP: the reaper takes up the new pace at once
    limited.reconfigure("limit_connections_per_user = 1\nidle_session_timeout = 1")
    idle = pyhive_connect(limited.host, limited.port, username="erin")
    try:
        deadline = time.monotonic() + 30
        while True:          # refused while the idle session holds erin's one place
            try:
                pyhive_connect(limited.host, limited.port, username="erin").close()
                break
            except Exception:  # noqa: BLE001 - the refusal; retried until the reaper ran
                assert time.monotonic() < deadline, "the idle session was not reaped"
                time.sleep(0.2)
        assert "reason=idle timeout" in limited.log()
    finally:
        with contextlib.suppress(Exception):     # reaped: its handle is gone
            idle.close()
