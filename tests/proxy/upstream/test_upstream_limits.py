"""The upstream side under stress, through the proxy with real Spark: replies over the reply
limit (one call fails, the session goes on), caps on upstream sessions with their queue,
and the log lines left when Spark is down or dies under a statement."""
from __future__ import annotations

import threading
import time

import pytest

from proxy.hs2.handles import hex_id
from proxy.thrift.gen.TCLIService import ttypes as T
from tests.support.ports import free_port
from tests.support.proxy_proc import start_proxy
from tests.support.relay import Relay
from tests.support.wire import Raw

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

MIB = 1 << 20


def _rows(c: Raw, sql: str, n: int = 1000):
    r = c.execute(sql)
    assert r.status.statusCode == 0, r.status
    return c.fetch(r.operationHandle, n)


def _open(c: Raw) -> T.TOpenSessionResp:
    return c.call("OpenSession", T.TOpenSessionReq(client_protocol=9, username="ignored"))


def _in_thread(fn):
    out: dict = {}

    def run():
        try:
            out["value"] = fn()
        except Exception as e:  # noqa: BLE001 - reported by the caller
            out["error"] = e
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, out


@pytest.fixture(scope="module")
def nosasl_hop(gw_dir, gw_relay):
    """A NOSASL HiveServer2 endpoint in front of Spark (the proxy itself), so the proxy under
    test can be pointed at an upstream speaking raw Thrift."""
    p = start_proxy(gw_dir / "proxy-nosasl-hop", ("127.0.0.1", gw_relay.port), auth="nosasl")
    yield p
    p.stop()


@pytest.mark.parametrize("transport", ["sasl", "nosasl"])
def test_reply_over_limit_fails_one_call_and_session_goes_on(gw_dir, gw_relay, transport, request):
    if transport == "sasl":
        upstream, auth = ("127.0.0.1", gw_relay.port), None
    else:
        hop = request.getfixturevalue("nosasl_hop")
        upstream, auth = (hop.host, hop.port), "nosasl"
    p = start_proxy(gw_dir / f"proxy-reply-{transport}", upstream, upstream_auth=auth,
                    extra_args=["--max-frame-bytes", str(MIB),
                                "--upstream-max-reply-bytes", str(2 * MIB)])
    try:
        c = Raw(p.host, p.port)
        c.open()
        big = _rows(c, "SELECT repeat('x', 5000) FROM range(1000)")     # ~5 MB page
        assert big.status.statusCode == T.TStatusCode.ERROR_STATUS
        msg = big.status.errorMessage
        assert big.status.sqlState == "HY000", msg
        assert "max_reply_bytes" in msg and str(2 * MIB) in msg and "FetchResults" in msg
        assert "bytes exceeds" in msg and "still usable" in msg
        one = _rows(c, "SELECT 1")                                       # same session
        assert one.status.statusCode == 0 and one.results.columns[0].i32Val.values == [1]
        # The client-side limit (1 MiB) is for what clients send: a 1.5 MB reply passes.
        wide = _rows(c, "SELECT repeat('y', 1500) FROM range(1000)")
        assert wide.status.statusCode == 0, wide.status
        assert wide.results.columns[0].stringVal.values == ["y" * 1500] * 1000
        c.close()
        log = p.log_path.read_text()
        assert "exceeds [upstream] max_reply_bytes" in log and "connection broken" not in log
    finally:
        assert p.stop(check=True) == 0


def test_session_caps_queue_and_free_slots(gw_dir, gw_relay, monkeypatch):
    monkeypatch.setenv("DATAMAP_PROXY_UPSTREAM_SESSION_QUEUE_SIZE", "1")
    monkeypatch.setenv("DATAMAP_PROXY_UPSTREAM_SESSION_QUEUE_TIMEOUT", "5")
    p = start_proxy(gw_dir / "proxy-caps", ("127.0.0.1", gw_relay.port),
                    extra_args=["--upstream-max-sessions", "2",
                                "--upstream-max-sessions-per-user", "1"])
    try:
        ann = Raw(p.host, p.port, user="ann")
        ann.open()
        ann2 = Raw(p.host, p.port, user="ann")
        t_ann2, ann2_out = _in_thread(lambda: _open(ann2))       # waits: ann's own cap
        time.sleep(1.0)                 # generous: it must be in line before cat asks
        bob = Raw(p.host, p.port, user="bob")
        bob.open()                                               # other users pass
        cat = Raw(p.host, p.port, user="cat")
        full = _open(cat)                                        # ann2 holds the only place
        assert full.status.statusCode == T.TStatusCode.ERROR_STATUS
        assert full.status.sqlState == "53300"
        assert "[upstream] max_sessions" in full.status.errorMessage
        assert "session_queue_size = 1" in full.status.errorMessage
        t_ann2.join(30)
        late = ann2_out["value"]
        assert late.status.sqlState == "53300", late.status
        assert "user 'ann' already has 1 open" in late.status.errorMessage
        assert "max_sessions_per_user" in late.status.errorMessage
        assert "within 5s" in late.status.errorMessage
        assert bob.execute("select 1").status.statusCode == 0      # nobody else harmed

        # A session closed by its client frees its slot for the one waiting.
        t_cat, cat_out = _in_thread(lambda: _open(cat))
        time.sleep(0.5)
        assert t_cat.is_alive()
        assert ann.call("CloseSession", T.TCloseSessionReq(sessionHandle=ann.session)).status.statusCode == 0
        t_cat.join(30)
        assert cat_out["value"].status.statusCode == 0, cat_out
        # So does one whose client just goes away.
        dan = Raw(p.host, p.port, user="dan")
        t_dan, dan_out = _in_thread(lambda: _open(dan))
        time.sleep(0.5)
        assert t_dan.is_alive()
        bob.close()
        t_dan.join(30)
        assert dan_out["value"].status.statusCode == 0, dan_out
        for c in (ann, ann2, cat, dan):
            c.close()
        log = p.log_path.read_text()
        assert "session refused user=ann" in log and "session refused user=cat" in log
    finally:
        assert p.stop(check=True) == 0


def test_idle_reaper_frees_a_session_slot(gw_dir, gw_relay, monkeypatch):
    monkeypatch.setenv("DATAMAP_PROXY_UPSTREAM_SESSION_QUEUE_TIMEOUT", "30")
    p = start_proxy(gw_dir / "proxy-caps-idle", ("127.0.0.1", gw_relay.port),
                    extra_args=["--upstream-max-sessions", "1", "--idle-session-timeout", "2"])
    try:
        idle = Raw(p.host, p.port, user="idle")
        idle.open()
        busy = Raw(p.host, p.port, user="busy")
        t0 = time.monotonic()
        busy.open()                     # waits until the reaper closes the idle session
        assert time.monotonic() - t0 < 25
        assert busy.execute("select 1").status.statusCode == 0
        for c in (idle, busy):
            c.close()
        assert "reason=idle timeout" in p.log_path.read_text()
    finally:
        assert p.stop(check=True) == 0


def test_failed_upstream_open_is_logged_on_one_line(gw_dir):
    port = free_port()                  # Spark down: nobody listens there
    p = start_proxy(gw_dir / "proxy-down-log", ("127.0.0.1", port))
    try:
        c = Raw(p.host, p.port, user="me\nFORGED line")
        resp = _open(c)
        assert resp.status.statusCode == T.TStatusCode.ERROR_STATUS and resp.status.sqlState == "08S01"
        c.close()
    finally:
        assert p.stop(check=True) == 0
    lines = p.log_path.read_text().splitlines()
    hits = [ln for ln in lines if "upstream OpenSession failed" in ln]
    assert len(hits) == 1, lines[-20:]
    assert "WARNING" in hits[0] and f"upstream=127.0.0.1:{port}" in hits[0]
    assert "user=me\\nFORGED line" in hits[0] and "Cannot connect" in hits[0]
    assert not any(ln.startswith("FORGED") for ln in lines)


def test_statements_cut_by_upstream_death_are_logged(gw_dir, gw_sts):
    relay = Relay(gw_sts.host, gw_sts.port)       # its own: cut() hits only this proxy
    p = start_proxy(gw_dir / "proxy-cut-log", ("127.0.0.1", relay.port))
    try:
        sync_c, async_c = Raw(p.host, p.port), Raw(p.host, p.port)
        sync_c.open(), async_c.open()
        slow = "select reflect('java.lang.Thread', 'sleep', bigint(6000)) /* line1\nline2 */"
        r = async_c.execute(slow + " -- async", run_async=True)
        assert r.status.statusCode == 0
        t, out = _in_thread(lambda: sync_c.execute(slow + " -- sync"))
        time.sleep(2.0)                          # both statements run in Spark now
        relay.cut()
        t.join(30)
        assert out["value"].status.sqlState == "08S01", out
        st = async_c.call("GetOperationStatus", T.TGetOperationStatusReq(operationHandle=r.operationHandle))
        assert st.status.sqlState == "08S01"
        for c in (sync_c, async_c):
            c.close()
    finally:
        assert p.stop(check=True) == 0
        relay.close()
    lines = [ln for ln in p.log_path.read_text().splitlines() if "statement cut by upstream" in ln]
    assert len(lines) == 2, lines
    sync_line = next(ln for ln in lines if "-- sync" in ln)
    async_line = next(ln for ln in lines if "-- async" in ln)
    assert "op=- call=ExecuteStatement" in sync_line and "line1\\nline2" in sync_line
    assert f"op={hex_id(r.operationHandle.operationId)}" in async_line
    assert "state=RUNNING" in async_line and "session=" in async_line
