"""Faults: a client vanishing mid-fetch, an upstream that is down, and SIGTERM.

The disconnect test runs direct too: Spark closes a session whose TCP connection drops
(hive.server2.close.session.on.disconnect), and the proxy must do the same for the upstream
sessions it opened for that client. Sessions are counted on the STS itself (one
operation-log directory per open session)."""
from __future__ import annotations

import time

import pytest

from tests.support.clients import ClientError, pyhive_connect, pyhive_execute, pyhive_query
from tests.support.ports import free_port
from tests.support.proxy_proc import start_proxy


def _wait_sessions(sts, predicate, timeout: float = 30.0) -> int:
    deadline = time.monotonic() + timeout
    while True:
        n = sts.open_sessions()
        if predicate(n) or time.monotonic() > deadline:
            return n
        time.sleep(0.2)


def test_disconnect_mid_fetch_closes_upstream_session(target, sts, itest_db):
    baseline = sts.open_sessions()
    conn = pyhive_connect(target.host, target.port, auth=target.pyhive_auth)
    cur = conn.cursor(arraysize=100)
    cur.execute("SELECT id, cast(id AS string) AS s FROM range(200000)")
    assert len(cur.fetchmany(100)) == 100
    opened = sts.open_sessions()
    assert opened >= baseline + 1, "the client's session is not visible on the STS"
    # Vanish: no CloseOperation, no CloseSession, just drop the TCP connection.
    conn._transport.close()
    left = _wait_sessions(sts, lambda n: n <= baseline)
    assert left <= baseline, (f"{left - baseline} upstream session(s) still open 30s after "
                              f"the client disconnected (baseline {baseline})")
    # And the endpoint still serves new clients.
    assert pyhive_query(target.host, target.port, "SELECT 7 AS seven",
                        auth=target.pyhive_auth).rows == [(7,)]


def test_upstream_down_gives_clear_error(itest_dir):
    dead_port = free_port()      # nothing listens here
    proxy = start_proxy(itest_dir / "proxy-dead-upstream", ("127.0.0.1", dead_port))
    try:
        t0 = time.monotonic()
        with pytest.raises(Exception) as info:
            conn = pyhive_connect(proxy.host, proxy.port)
            conn.close()
        elapsed = time.monotonic() - t0
        err = info.value
        resp = err.args[0] if err.args else None
        status = getattr(resp, "status", None)
        text = (status.errorMessage if status is not None else str(err)) or ""
        assert elapsed < 30, f"the client waited {elapsed:.0f}s for the error"
        assert status is not None, (
            f"expected an HS2 error status, got {type(err).__name__}: {err!r} (the proxy "
            f"dropped the connection instead of answering)")
        assert status.sqlState, f"no SQLSTATE in the error: {status!r}"
        low = text.lower()
        assert ("upstream" in low or "spark" in low) and \
            any(w in low for w in ("refused", "connect", "unavailable", "down", "reach")), \
            f"error does not say the upstream is unreachable: {text!r}"
        assert proxy.alive(), "the proxy died when the upstream was down"
    finally:
        rc = proxy.stop()
    assert rc == 0, f"proxy exit code {rc} after SIGTERM"


def test_sigterm_exits_zero_and_closes_upstream_sessions(sts, itest_dir, itest_db):
    baseline = sts.open_sessions()
    proxy = start_proxy(itest_dir / "proxy-sigterm", (sts.host, sts.port))
    conn = None
    try:
        conn = pyhive_connect(proxy.host, proxy.port)
        cur = conn.cursor()
        assert pyhive_execute(cur, "SELECT 1 AS one").rows == [(1,)]
        assert sts.open_sessions() >= baseline + 1
    finally:
        rc = proxy.stop(timeout=60)
    assert rc == 0, f"proxy exit code {rc} after SIGTERM; log {proxy.log_path}"
    left = _wait_sessions(sts, lambda n: n <= baseline)
    assert left <= baseline, f"{left - baseline} upstream session(s) left open after shutdown"
    if conn is not None:
        try:
            conn._transport.close()
        except Exception:  # noqa: BLE001 - the server side is gone; nothing to clean
            pass
