"""Sessions and operations side by side: many concurrent client sessions must each get
their own answers (no cross-talk in handle mapping), two operations open on one session
must interleave, a graceful close must close the upstream session, and session settings
from the JDBC URL (?hiveconf#hivevar) must reach Spark (test_clients.py, beeline)."""
from __future__ import annotations

import threading
import time

from tests.support.clients import pyhive_connect, pyhive_execute

SESSIONS, QUERIES = 10, 4


def test_concurrent_sessions_get_their_own_results(target, itest_db):
    errors: list[str] = []
    go = threading.Barrier(SESSIONS)

    def worker(i: int):
        try:
            conn = pyhive_connect(target.host, target.port, auth=target.pyhive_auth)
            try:
                cur = conn.cursor()
                go.wait(timeout=120)
                for q in range(QUERIES):
                    v = i * 1000 + q
                    rows = pyhive_execute(cur, f"SELECT {v} AS v, '{v}' AS s").rows
                    if rows != [(v, str(v))]:
                        errors.append(f"session {i} query {q}: got {rows!r}, wanted {v}")
                cur.close()
            finally:
                conn.close()
        except Exception as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(f"session {i}: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=worker, args=(i,), name=f"itest-session-{i}")
               for i in range(SESSIONS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(300)
    assert not any(th.is_alive() for th in threads), "a session hung"
    assert errors == []


def test_two_operations_interleaved_on_one_session(target, observe, itest_db):
    def run(t):
        conn = pyhive_connect(t.host, t.port, auth=t.pyhive_auth)
        try:
            a, b = conn.cursor(arraysize=3), conn.cursor(arraysize=3)
            a.execute("SELECT id FROM range(10) ORDER BY id")
            b.execute("SELECT id * 10 AS x FROM range(10) ORDER BY x")
            seq = []
            for _ in range(4):
                seq.append(("a", a.fetchmany(3)))
                seq.append(("b", b.fetchmany(3)))
            a.close()
            b.close()
            return seq
        finally:
            conn.close()

    seq = observe("interleaved", run)
    got_a = [r[0] for name, rows in seq if name == "a" for r in rows]
    got_b = [r[0] for name, rows in seq if name == "b" for r in rows]
    assert got_a == list(range(10)) and got_b == [i * 10 for i in range(10)]


def test_close_session_closes_upstream_session(target, sts, itest_db):
    baseline = sts.open_sessions()
    conns = [pyhive_connect(target.host, target.port, auth=target.pyhive_auth) for _ in range(3)]
    for c in conns:
        cur = c.cursor()
        pyhive_execute(cur, "SELECT 1")
        cur.close()
    assert sts.open_sessions() >= baseline + 3
    for c in conns:
        c.close()
    deadline = time.monotonic() + 20
    while sts.open_sessions() > baseline and time.monotonic() < deadline:
        time.sleep(0.2)
    assert sts.open_sessions() <= baseline, \
        f"{sts.open_sessions() - baseline} upstream session(s) open after CloseSession"
