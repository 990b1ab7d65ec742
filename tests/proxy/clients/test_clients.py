"""Client behaviour beyond plain result sets, each client direct vs through the proxy:
async execute + cancel, operation logs, upstream errors (same SQLSTATE and message), the
session database from the JDBC URL / PyHive `database=`, impyla's unknown-method probing
(GetLog, CloseImpalaOperation) on a long-lived connection, current_database(), and
`SET datamap.rewrite.enabled=false`."""
from __future__ import annotations

import time

import pytest

from tests.support.client_matrix import USE_DB
from tests.support.clients import (ClientError, impyla_connect, impyla_execute,
                                   pyhive_connect, pyhive_execute, run_beeline)

# TOperationState
RUNNING_STATES = {0, 1, 7}          # INITIALIZED, RUNNING, PENDING
FINISHED, CANCELED, CLOSED, ERROR = 2, 3, 4, 5

# Runs for 60 s in one task without using CPU, and dies at once when Spark interrupts the
# task on cancel (Thread.sleep is interruptible; a CPU-bound query may keep both local[2]
# slots busy for minutes after a cancel and stall every later test).
SLOW_QUERY = ("SELECT reflect('java.lang.Thread', 'sleep', CAST(id + 60000 AS BIGINT)) AS r "
              "FROM range(1)")
MISSING_TABLE = "itest.no_such_table_xyz"


def test_pyhive_async_cancel(target, itest_db):
    conn = pyhive_connect(target.host, target.port, auth=target.pyhive_auth)
    try:
        cur = conn.cursor()
        cur.execute(SLOW_QUERY, async_=True)
        state = cur.poll().operationState
        assert state in RUNNING_STATES | {FINISHED}
        time.sleep(1.0)
        cur.cancel()
        deadline = time.monotonic() + 60
        while True:
            state = cur.poll().operationState
            if state not in RUNNING_STATES:
                break
            assert time.monotonic() < deadline, "operation still running 60s after cancel"
            time.sleep(0.2)
        # Cancelled, or it had already finished: both are legitimate outcomes of a race.
        assert state in (CANCELED, FINISHED), f"state after cancel: {state}"
        # The session is still usable after the cancel.
        assert pyhive_execute(cur, "SELECT 42 AS x").rows == [(42,)]
        cur.close()
    finally:
        conn.close()


def test_pyhive_operation_logs(target, itest_db):
    conn = pyhive_connect(target.host, target.port, auth=target.pyhive_auth)
    try:
        cur = conn.cursor()
        cur.execute("SELECT count(*) AS n FROM itest.all_types", async_=True)
        logs: list[str] = []
        deadline = time.monotonic() + 60
        while cur.poll().operationState in RUNNING_STATES:
            logs += cur.fetch_logs()      # must not raise, whatever the server has
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert cur.poll().operationState == FINISHED
        logs += cur.fetch_logs()
        assert all(isinstance(line, str) for line in logs)
        assert cur.fetchall() == [(3,)]
        cur.close()
    finally:
        conn.close()


def test_upstream_error_pyhive(target, observe, itest_db):
    def run(t):
        conn = pyhive_connect(t.host, t.port, auth=t.pyhive_auth)
        try:
            cur = conn.cursor()
            with pytest.raises(ClientError) as info:
                pyhive_execute(cur, f"SELECT * FROM {MISSING_TABLE}")
            # the session survives a failed statement
            ok = pyhive_execute(cur, "SELECT 1 AS one").rows
            cur.close()
            return info.value.sqlstate, info.value.message, ok
        finally:
            conn.close()

    sqlstate, message, ok = observe("error", run)
    assert sqlstate == "42P01"
    assert "TABLE_OR_VIEW_NOT_FOUND" in message and "no_such_table_xyz" in message
    assert ok == [(1,)]


def test_upstream_error_impyla(target, observe, itest_db):
    def run(t):
        conn = impyla_connect(t.host, t.port, auth=t.impyla_auth)
        try:
            cur = conn.cursor()
            with pytest.raises(ClientError) as info:
                impyla_execute(cur, f"SELECT * FROM {MISSING_TABLE}")
            ok = impyla_execute(cur, "SELECT 1 AS one").rows
            cur.close()
            return info.value.message.splitlines()[0], ok
        finally:
            conn.close()

    first_line, ok = observe("error", run)
    assert "TABLE_OR_VIEW_NOT_FOUND" in first_line
    assert ok == [(1,)]


def test_beeline_session_behaviour(target, observe, itest_db, itest_dir):
    """One beeline run over a JDBC URL naming a database and carrying ?hiveconf#hivevar
    settings (Hive JDBC sends them as use:database / set:hiveconf: / set:hivevar: keys in
    OpenSession): the database, the conf and the variable reach Spark; an upstream error is
    reported with its SQLSTATE (and the script goes on); current_database(); the datamap
    rewrite switch is answered as a key/value row; setSchema-style `use`."""
    def run(t):
        url = t.jdbc(USE_DB) + "?spark.sql.shuffle.partitions=3#itest_var=41"
        r = run_beeline(url, [
            "SELECT current_database() AS db",
            "SHOW TABLES",
            f"SELECT * FROM {MISSING_TABLE}",
            "SET datamap.rewrite.enabled=false",
            "use default",
            "SELECT current_database() AS db",
            "SET spark.sql.shuffle.partitions",
            "SELECT ${itest_var} + 1 AS v",
        ], workdir=itest_dir / "beeline")
        return {"results": r.results, "errors": r.errors}

    got = observe("beeline", run)
    res = got["results"]
    assert res[0].rows == [(USE_DB,)]
    assert [row[1] for row in res[1].rows] == ["marker_t"]
    assert res[2].rows == []
    assert res[3].columns == ["key", "value"]
    assert res[3].rows == [("datamap.rewrite.enabled", "false")]
    assert res[5].rows == [("default",)]
    assert res[6].rows == [("spark.sql.shuffle.partitions", "3")]
    assert res[7].rows == [("42",)]
    assert len(got["errors"]) == 1
    state, message = got["errors"][0]
    assert state == "42P01" and "no_such_table_xyz" in message


def test_pyhive_database_and_set(target, observe, itest_db):
    def run(t):
        conn = pyhive_connect(t.host, t.port, auth=t.pyhive_auth, database=USE_DB)
        try:
            cur = conn.cursor()
            out = {
                "current": pyhive_execute(cur, "SELECT current_database()"),
                "tables": pyhive_execute(cur, "SHOW TABLES"),
                "set": pyhive_execute(cur, "SET datamap.rewrite.enabled=false"),
                "set_get": pyhive_execute(cur, "SET datamap.rewrite.enabled"),
            }
            cur.close()
            return out
        finally:
            conn.close()

    got = observe("pyhive", run)
    assert got["current"].rows == [(USE_DB,)]
    assert [r[1] for r in got["tables"].rows] == ["marker_t"]
    assert got["set"].columns == ["key", "value"]
    assert got["set"].rows == [("datamap.rewrite.enabled", "false")]
    assert got["set_get"].rows == [("datamap.rewrite.enabled", "false")]


def test_impyla_many_queries_one_connection(target, observe, itest_db):
    """impyla calls GetLog and CloseImpalaOperation (unknown to HiveServer2) after every
    query; the UNKNOWN_METHOD replies must leave the connection usable."""
    def run(t):
        conn = impyla_connect(t.host, t.port, auth=t.impyla_auth, database=USE_DB)
        try:
            out = []
            cur = conn.cursor()
            for i in range(5):
                out.append(impyla_execute(cur, f"SELECT {i} AS i, current_database() AS db"))
            out.append(impyla_execute(cur, "SELECT count(*) AS n FROM itest.all_types"))
            log = cur.get_log()
            cur.close()
            cur2 = conn.cursor()     # impyla opens a new session per cursor
            out.append(impyla_execute(cur2, "SELECT 'second cursor' AS s"))
            cur2.close()
            return out, isinstance(log, str)
        finally:
            conn.close()

    out, log_is_text = observe("impyla", run)
    assert [r.rows for r in out[:5]] == [[(i, USE_DB)] for i in range(5)]
    assert out[5].rows == [(3,)]
    assert out[6].rows == [("second cursor",)]
    assert log_is_text
