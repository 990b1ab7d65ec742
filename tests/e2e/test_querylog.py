"""The query log end to end (docs/querylog.md), on the shared embedded `serve`: a known
workload through real clients, then its entries read from the state directory's catalog
with a QueryLog reader (the proxy's writer commits within ~0.2 s; read with a deadline).

Also a regression: the statement log's duration of a forwarded query was once its
call time (0.004 s for a 7 s query). A 3 s query, polled by PyHive and run synchronously,
has >= 3 s in the `proxy.statement` line, the audit line and the query log."""
from __future__ import annotations

import json
import re
import time

import pytest

from proxy.observability.querylog.log import QueryLog
from tests.support.clients import ClientError, RawHS2, pyhive_connect
from tests.support.e2e import Conn

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

AGG = "SELECT region, sum(amount) FROM q17a_sales GROUP BY region"
SLEEP = "SELECT reflect('java.lang.Thread', 'sleep', 3000L) AS q17a_{}"


class ToolConn(Conn):
    """A PyHive session that names its tool in the OpenSession configuration."""

    def __init__(self, port: int):
        self.conn = pyhive_connect("127.0.0.1", port,
                                   configuration={"ApplicationName": "q17a-tool"})
        self.cur = self.conn.cursor()

    def release(self) -> None:
        """Close the cursor's last operation (PyHive closes it only at the next execute):
        a statement's entry is written when it is closed, with the rows it sent."""
        self.cur.close()
        self.cur = self.conn.cursor()


@pytest.fixture(scope="module")
def env(shared_serve):
    conn = ToolConn(shared_serve.port)
    reader = QueryLog.reader(str(shared_serve.state / "catalog.db"))
    try:
        conn.run("CREATE TABLE q17a_sales (region STRING, amount INT) USING parquet")
        conn.run("INSERT INTO q17a_sales VALUES ('n', 1), ('s', 2), ('n', 3), ('e', 4)")
        conn.run(f"CREATE DATAMAP q17a_agg USING 'mv' AS {AGG}")
        yield shared_serve, conn, reader
    finally:
        conn.close()
        reader.close()


def logged(reader: QueryLog, marker: str, n: int = 1, timeout: float = 10.0):
    """The newest `n` entries whose statement holds `marker`, once there are `n`."""
    deadline = time.monotonic() + timeout
    while True:
        found = [e for e in reader.recent(500) if marker in e.statement]
        if len(found) >= n or time.monotonic() > deadline:
            return found[:n]
        time.sleep(0.1)


def test_a_known_workload_is_logged(env):
    srv, conn, reader = env
    served = conn.rows(AGG + " /* q17a-served */")
    conn.run("SET datamap.serving.enabled=false")
    rewritten = conn.rows(AGG + " /* q17a-spark */")
    conn.run("SET datamap.serving.enabled=true")
    miss = conn.rows("SELECT amount FROM q17a_sales WHERE region = 'n' /* q17a-miss */")
    refused = conn.error("CREATE DATAMAP q17a_bad USING 'mv' /* q17a-refused */")
    assert served == rewritten == [("e", 4), ("n", 4), ("s", 2)] and len(miss) == 2

    [hit] = logged(reader, "q17a-served")
    assert (hit.decision, hit.datamaps, hit.rows, hit.outcome) == (
        "served", ("default.q17a_agg",), 3, "FINISHED"), hit
    assert hit.reason_class is None and hit.why_not == () and hit.client == "q17a-tool"
    assert hit.tables == ("default.q17a_sales",) and "?" not in hit.shape
    [spark] = logged(reader, "q17a-spark")
    assert (spark.decision, spark.datamaps, spark.rows) == ("rewritten", ("default.q17a_agg",), 3)
    assert spark.shape_hash == hit.shape_hash          # one dashboard query, two answers
    [m] = logged(reader, "q17a-miss")
    assert (m.decision, m.datamaps, m.rows, m.reason_class) == ("forwarded", (), 2, "grouping")
    assert m.why_not and m.why_not[0][0] == "default.q17a_agg", m.why_not
    assert m.shape == "select amount from q17a_sales where region = ?"
    [r] = logged(reader, "q17a-refused")
    assert (r.decision, r.outcome, r.sqlstate) == ("refused", "ERROR", refused.sqlstate)
    [load] = logged(reader, "INSERT INTO q17a_sales")
    assert (load.decision, load.outcome, load.tables) == ("forwarded", "FINISHED",
                                                          ("default.q17a_sales",))
    [ddl] = logged(reader, "CREATE DATAMAP q17a_agg")
    assert (ddl.decision, ddl.outcome) == ("local", "FINISHED") and ddl.duration_s > 0.1
    assert not logged(reader, "SET datamap.serving.enabled", timeout=0)   # not logged
    for e in (hit, spark, m, r, load, ddl):
        assert e.duration_s > 0 and e.user == "me" and abs(e.at - time.time()) < 600


def test_a_slow_forwarded_query_is_timed_to_its_end(env):
    srv, conn, reader = env
    conn.run(SLEEP.format("polled"))                        # PyHive: async, polls
    conn.release()
    with RawHS2("127.0.0.1", srv.port) as raw:
        raw.execute(SLEEP.format("sync"), run_async=False)  # the call returns at the end
    for how in ("polled", "sync"):
        [e] = logged(reader, f"q17a_{how}")
        assert e.decision == "forwarded" and e.outcome == "FINISHED" and e.rows == 1
        assert 3.0 <= e.duration_s < 30, (how, e.duration_s)
    text = srv.srv.log_path.read_text(errors="replace")
    for how in ("polled", "sync"):
        line = [ln for ln in text.splitlines() if "statement session=" in ln
                and f"q17a_{how}" in ln][-1]
        assert float(re.search(r"duration=([\d.]+)s", line).group(1)) >= 3.0, line
        audit = [json.loads(ln[ln.index("{"):]) for ln in text.splitlines()
                 if '"event":"statement"' in ln and f"q17a_{how}" in ln][-1]
        assert audit["duration_ms"] >= 3000, audit


def test_a_statement_that_fails_in_spark_is_logged_with_its_sqlstate(env):
    srv, conn, reader = env
    with pytest.raises(ClientError):
        conn.run("SELECT * FROM q17a_nowhere")
    [e] = logged(reader, "q17a_nowhere")
    assert e.outcome == "ERROR" and e.sqlstate and e.decision == "forwarded"
