"""Upstream recovery (docs/recovery.md) against a real Spark Thrift Server that the module
kills (SIGKILL, like a crash) and starts again on the same port and metastore: one start
and one restart for every scenario, played once by the `story` fixture in the order a
restart imposes, then checked test by test.

Clients: idle PyHive, beeline (Hive JDBC, waiting in a `!sh` of its own) and raw-Thrift
sessions with USE and SET state; a raw-Thrift session with an asynchronous statement
running at the kill (JDBC-style polling) and a PyHive session waiting on a synchronous
one; a session whose database is dropped while Spark is away; sessions opened while Spark
is down and once it is back.
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from proxy.doctor import check_upstream_health
from proxy.hs2.recovery import read_health
from tests.support.clients import (ClientError, RawHS2, jdbc_url, pyhive_connect,
                                   pyhive_execute, run_beeline)
from tests.support.proxy_proc import REPO_ROOT, start_proxy
from tests.support.sts import start_sts
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

SLEEP_SQL = "SELECT java_method('java.lang.Thread', 'sleep', bigint(600000)) AS slept"
LOST = "upstream Spark Thrift Server connection lost while running"


def _error(fn) -> ClientError:
    with pytest.raises(ClientError) as info:
        fn()
    return info.value


def _direct(sts, statements: list[str]) -> None:
    conn = pyhive_connect(sts.host, sts.port)
    try:
        cur = conn.cursor()
        for sql in statements:
            cur.execute(sql)
    finally:
        conn.close()


def _operations(sts) -> set:
    """The statements running in Spark: each has an operation log of its own, under its
    session's directory, from its start until it is closed."""
    return set((sts.workdir / "oplogs").glob("*/*"))


def _doctor(state_dir, sts, port: int) -> str:
    """doctor with the serving proxy's own state directory, upstream and listen port."""
    run = subprocess.run(
        [sys.executable, "-m", "proxy", "doctor", "--state-dir", str(state_dir),
         "--upstream", f"{sts.host}:{sts.port}", "--port", str(port), "--timeout", "60"],
        capture_output=True, text=True, timeout=300, cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    return run.stdout + run.stderr


@pytest.fixture(scope="module")
def story(tmp_path_factory):
    root = tmp_path_factory.mktemp("recovery")
    sts = start_sts(root / "sts", fast_start=True)
    proxy = None
    opened: list = []
    go = root / "beeline-go"
    try:
        _direct(sts, ["CREATE DATABASE recdb", "CREATE VIEW recdb.v AS SELECT 42 AS x",
                      "CREATE DATABASE gonedb"])
        proxy = start_proxy(root / "proxy", (sts.host, sts.port))
        out: dict = {"proxy": proxy, "state_dir": root / "proxy" / "state"}

        # beeline (Hive JDBC) sets its state, then waits, idle, in a shell command of its
        # own until Spark has restarted
        ready, wait_sh = root / "beeline-waits", root / "wait.sh"
        wait_sh.write_text(f"touch {ready}\nfor i in $(seq 1500); do [ -f {go} ] && exit 0; "
                           f"sleep 0.2; done\n")
        beeline_out: dict = {}
        beeline = threading.Thread(name="recovery-beeline", daemon=True, target=lambda: (
            beeline_out.setdefault("run", run_beeline(
                jdbc_url(proxy.host, proxy.port), [
                    "USE recdb", "SET spark.sql.shuffle.partitions=6", f"!sh sh {wait_sh}",
                    "SET spark.sql.shuffle.partitions", "SELECT x, current_database() FROM v"],
                user="grace", workdir=root / "beeline", timeout=400))))
        beeline.start()

        pyhive = pyhive_connect(proxy.host, proxy.port, username="alice")
        opened.append(pyhive)
        cur = pyhive.cursor()
        for sql in ("USE recdb", "SET spark.sql.shuffle.partitions=3"):
            pyhive_execute(cur, sql)
        raw = RawHS2(proxy.host, proxy.port, username="bob", timeout=60)
        opened.append(raw)
        for sql in ("USE recdb", "SET spark.sql.shuffle.partitions=5",
                    "SET TIME ZONE 'Asia/Tokyo'", "SET spark.sql.shuffle.partitions=7"):
            raw.execute(sql)
        doomed = RawHS2(proxy.host, proxy.port, username="carol", database="gonedb", timeout=60)
        opened.append(doomed)
        # before the slow statements below take both of local[2]'s task slots
        deadline = time.monotonic() + 300
        while not ready.exists():
            assert beeline.is_alive() and time.monotonic() < deadline, beeline_out
            time.sleep(0.2)

        # an asynchronous statement (JDBC-style polling) and a synchronous one (PyHive)
        poller = RawHS2(proxy.host, proxy.port, username="dave", timeout=60)
        opened.append(poller)
        t = poller.t
        running = poller._check(poller.client.ExecuteStatement(t.TExecuteStatementReq(
            sessionHandle=poller.session, statement=SLEEP_SQL, runAsync=True))).operationHandle
        sync_conn = pyhive_connect(proxy.host, proxy.port, username="erin")
        opened.append(sync_conn)
        sync_cur = sync_conn.cursor()
        sync_out: dict = {}
        running_before = _operations(sts)

        def run_sync():
            try:
                sync_out["result"] = pyhive_execute(sync_cur, SLEEP_SQL)
            except ClientError as e:
                sync_out["error"] = e
        waiter = threading.Thread(target=run_sync, name="recovery-sync-statement", daemon=True)
        waiter.start()
        deadline = time.monotonic() + 60
        while poller.client.GetOperationStatus(t.TGetOperationStatusReq(
                operationHandle=running)).operationState != t.TOperationState.RUNNING_STATE:
            assert time.monotonic() < deadline, "the slow statement never ran"
            time.sleep(0.2)
        # the synchronous one reached Spark: it opened its operation log there
        wait_until(lambda: _operations(sts) - running_before, timeout=60,
                   what="the synchronous statement running in Spark")

        sts.kill()
        stale_oplogs = sts.open_sessions()     # the killed server's, never cleaned up
        waiter.join(60)
        out["sync"] = sync_out
        out["status"] = poller.client.GetOperationStatus(
            t.TGetOperationStatusReq(operationHandle=running))
        out["fetch"] = poller.client.FetchResults(t.TFetchResultsReq(
            operationHandle=running, orientation=t.TFetchOrientation.FETCH_NEXT, maxRows=10))
        out["close"] = poller.client.CloseOperation(t.TCloseOperationReq(operationHandle=running))

        # Spark down: the call and a new session fail fast, naming the cause
        t0 = time.monotonic()
        out["down_call"] = _error(lambda: pyhive_execute(cur, "SELECT x FROM v"))
        out["down_call_s"] = time.monotonic() - t0
        out["down_open"] = _error(lambda: RawHS2(proxy.host, proxy.port, timeout=60))
        out["down_health"] = check_upstream_health(out["state_dir"])
        out["doctor_down"] = _doctor(out["state_dir"], sts, proxy.port)

        t0 = time.monotonic()
        sts = start_sts(root / "sts", fast_start=True, port=sts.port)
        out["restart_s"] = time.monotonic() - t0
        # no client traffic yet: the proxy's own probe sees Spark back
        deadline = time.monotonic() + 60
        while (read_health(out["state_dir"]) or {}).get("state") != "up" \
                and time.monotonic() < deadline:
            time.sleep(0.5)
        out["health_back"] = read_health(out["state_dir"])
        out["health_back_s"] = time.monotonic() - t0 - out["restart_s"]
        _direct(sts, ["DROP DATABASE gonedb"])

        fresh = pyhive_connect(proxy.host, proxy.port, username="frank")
        opened.append(fresh)
        out["fresh"] = pyhive_execute(fresh.cursor(), "SELECT 1 AS one").rows
        t0 = time.monotonic()
        out["pyhive_db"] = pyhive_execute(cur, "SELECT x, current_database() FROM v").rows
        out["first_call_s"] = time.monotonic() - t0
        out["pyhive_set"] = pyhive_execute(cur, "SET spark.sql.shuffle.partitions").rows
        out["raw_tables"] = raw.get_tables(schema="recdb").rows      # a metadata call first
        out["raw_db"] = raw.execute("SELECT x, current_database() FROM v").rows
        out["raw_set"] = raw.execute("SET spark.sql.shuffle.partitions").rows
        out["raw_zone"] = raw.execute("SET spark.sql.session.timeZone").rows
        out["poller_after"] = poller.execute("SELECT 2 AS two").rows
        out["sync_after"] = pyhive_execute(sync_cur, "SELECT 3 AS three").rows
        out["doomed"] = _error(lambda: doomed.execute("SELECT 1"))
        out["sessions_on_sts"] = sts.open_sessions() - stale_oplogs
        go.touch()
        beeline.join(300)
        out["beeline"] = beeline_out["run"]

        out["doctor"] = _doctor(out["state_dir"], sts, proxy.port)    # the proxy's own port
        for c in opened:
            c.close()
        opened.clear()
        assert proxy.stop(check=True) == 0
        out["log"] = proxy.log_path.read_text(errors="replace")
        yield out
    finally:
        go.touch()
        if proxy is not None:     # first: a client blocked on a statement then lets go
            proxy.stop()
        for c in opened:
            try:
                c.close()
            except Exception:  # noqa: BLE001 - the proxy is gone already
                pass
        sts.stop()


def test_idle_sessions_reopen_with_their_database_and_settings(story):
    print(f"\nrecovery: Spark restart {story['restart_s']:.1f}s; first statement of an idle "
          f"session after it {story['first_call_s'] * 1000:.0f} ms (reopen + replay + run); "
          f"a call while Spark was down failed in {story['down_call_s'] * 1000:.0f} ms")
    assert story["pyhive_db"] == [(42, "recdb")]
    assert story["pyhive_set"] == [("spark.sql.shuffle.partitions", "3")]
    assert ("recdb", "v") in {(r[1], r[2]) for r in story["raw_tables"]}
    assert story["raw_db"] == [(42, "recdb")]
    assert story["raw_set"] == [("spark.sql.shuffle.partitions", "7")]    # the last SET wins
    assert story["raw_zone"] == [("spark.sql.session.timeZone", "Asia/Tokyo")]
    run = story["beeline"]
    assert run.errors == [] and run.returncode == 0, run.stderr[-2000:]
    assert run.results[3].rows == [("spark.sql.shuffle.partitions", "6")]
    assert run.results[4].rows == [("42", "recdb")]
    assert "session reopened upstream" in story["log"]
    assert "replayed=2 db=recdb" in story["log"]         # PyHive's: one SET, then USE


def test_running_statements_get_the_upstream_failure_and_their_sessions_go_on(story):
    err = story["sync"]["error"]
    assert err.sqlstate == "08S01" and LOST in err.message and "java_method" in err.message
    status = story["status"]
    assert status.status.sqlState == "08S01" and LOST in status.status.errorMessage
    assert status.operationState == 5                               # ERROR_STATE
    assert story["fetch"].status.sqlState == "08S01"
    assert LOST in story["fetch"].status.errorMessage
    assert story["close"].status.statusCode == 0                    # the dead handle closes
    assert story["poller_after"] == [(2,)] and story["sync_after"] == [(3,)]


def test_calls_while_spark_is_down_fail_fast_naming_the_cause(story):
    err = story["down_call"]
    assert err.sqlstate == "08S01" and "upstream Spark Thrift Server unavailable" in err.message
    assert "Cannot connect to Spark Thrift Server" in err.message
    assert story["down_call_s"] < 20.0          # a refused connect, not a hang
    assert story["down_open"].sqlstate == "08S01"


def test_new_sessions_work_once_spark_is_back(story):
    assert story["fresh"] == [(1,)]
    # the new session and the four reopened so far (beeline's is still idle); the one
    # whose replay failed was closed
    assert story["sessions_on_sts"] == 5


def test_a_failed_replay_names_the_statement(story):
    err = story["doomed"]
    assert err.sqlstate == "08S01"
    assert "replaying `USE `gonedb``" in err.message and "Reconnect" in err.message


def test_health_is_logged_once_per_change_and_shown_by_doctor(story):
    log = story["log"]
    assert log.count("upstream lost:") == 1 and log.count("upstream back after") == 1
    [down] = story["down_health"]
    assert down.status == "WARN" and "DOWN" in down.detail and "Cannot connect" in down.detail
    assert "upstream health" in story["doctor"] and "UP:" in story["doctor"]
    assert "session(s) reopened" in story["doctor"]


def test_health_recovers_without_client_traffic(story):
    assert story["health_back"]["state"] == "up", story["health_back"]
    assert story["health_back_s"] < 15


def test_doctor_beside_the_running_proxy(story):
    """The deployment's own config: its port is the serving proxy's, which is fine; with
    the Thrift Server down, the checks that need it are said to be not run, and why."""
    up, down = story["doctor"], story["doctor_down"]
    assert "verdict: READY" in up, up
    assert "in use by the serving proxy pid" in up, up
    assert "verdict: NOT READY" in down and "[FAIL] listen" not in down, down
    assert "[SKIP] time zone" in down and "[SKIP] shared metastore" in down, down
    assert "not checked: the upstream does not accept connections" in down, down
