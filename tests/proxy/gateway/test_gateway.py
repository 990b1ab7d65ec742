"""Gateway behaviour through the proxy with real Spark: unknown RPCs, local statements
(row-based and columnar), handles, faults, probes, limits, shutdown."""
from __future__ import annotations

import socket
import time

import pytest
from thrift.Thrift import TApplicationException

from proxy.thrift import codec
from proxy.thrift.gen.TCLIService import ttypes as T
from tests.support.clients import impyla_connect, pyhive_connect
from tests.support.ports import free_port
from tests.support.proxy_proc import start_proxy
from tests.support.wire import Raw

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]


def test_unknown_method_keeps_connection_open(gw_proxy):
    c = Raw(gw_proxy.host, gw_proxy.port)
    c.open()
    reply = c.send_raw(codec.encode("GetLog", codec.CALL, 77, T.TCloseOperationReq()))
    with pytest.raises(TApplicationException) as ei:
        codec.decode_reply(reply, "GetLog")
    assert ei.value.type == TApplicationException.UNKNOWN_METHOD
    assert codec.decode_header(reply) == ("GetLog", codec.EXCEPTION, 77)
    resp = c.execute("select 1")
    assert resp.status.statusCode == 0
    c.close()


@pytest.mark.parametrize("protocol", [4, 5, 9, 10])   # V5 row-based, V6+ columnar, V10, V11
def test_local_set_statement_every_protocol(gw_proxy, protocol):
    c = Raw(gw_proxy.host, gw_proxy.port)
    opened = c.open(protocol)
    assert opened.serverProtocolVersion == protocol          # STS 4.3 speaks V11
    r = c.execute("SET datamap.rewrite.enabled=false")
    assert r.status.statusCode == 0 and r.operationHandle.hasResultSet
    op = r.operationHandle
    st = c.call("GetOperationStatus", T.TGetOperationStatusReq(operationHandle=op))
    assert st.operationState == T.TOperationState.FINISHED_STATE
    meta = c.call("GetResultSetMetadata", T.TGetResultSetMetadataReq(operationHandle=op))
    assert [col.columnName for col in meta.schema.columns] == ["key", "value"]
    f = c.fetch(op)
    if protocol >= 5:
        assert f.results.rows == []
        assert f.results.columns[1].stringVal.values == ["false"]
    else:
        assert f.results.columns is None
        assert f.results.rows[0].colVals[1].stringVal.value == "false"
    assert not f.hasMoreRows
    empty = c.fetch(op)
    assert not empty.hasMoreRows
    again = c.fetch(op, orientation=T.TFetchOrientation.FETCH_FIRST)
    assert again.status.statusCode == 0
    logs = c.fetch(op, fetch_type=1)
    assert logs.status.statusCode == 0
    assert c.call("CloseOperation", T.TCloseOperationReq(operationHandle=op)).status.statusCode == 0
    assert c.call("CloseOperation", T.TCloseOperationReq(operationHandle=op)).status.statusCode == 0
    show = c.execute("SET datamap.rewrite.enabled")
    rows = c.fetch(show.operationHandle)
    values = (rows.results.columns[1].stringVal.values if protocol >= 5
              else [rows.results.rows[0].colVals[1].stringVal.value])
    assert values == ["false"]
    c.close()


def test_setting_is_per_session(gw_proxy):
    a, b = Raw(gw_proxy.host, gw_proxy.port), Raw(gw_proxy.host, gw_proxy.port)
    a.open(), b.open()
    a.execute("SET datamap.rewrite.enabled=false")
    r = b.execute("SET datamap.rewrite.enabled")
    assert b.fetch(r.operationHandle).results.columns[1].stringVal.values == ["true"]
    bad = a.execute("SET datamap.rewrite.enabled=perhaps")
    assert bad.status.statusCode == T.TStatusCode.ERROR_STATUS
    assert bad.status.sqlState == "42000" and "perhaps" in bad.status.errorMessage
    a.close(), b.close()


def test_invalid_handles_are_errors(gw_proxy):
    c = Raw(gw_proxy.host, gw_proxy.port)
    c.open()
    bogus = T.TOperationHandle(operationId=T.THandleIdentifier(guid=b"\x01" * 16, secret=b"\x02" * 16),
                               operationType=0, hasResultSet=True)
    st = c.call("GetOperationStatus", T.TGetOperationStatusReq(operationHandle=bogus))
    assert st.status.statusCode == T.TStatusCode.ERROR_STATUS
    assert "Invalid OperationHandle" in st.status.errorMessage
    info = c.call("GetInfo", T.TGetInfoReq(sessionHandle=T.TSessionHandle(sessionId=bogus.operationId),
                                           infoType=17))
    assert "Invalid SessionHandle" in info.status.errorMessage
    ok = c.call("GetInfo", T.TGetInfoReq(sessionHandle=c.session, infoType=17))
    assert ok.infoValue.stringValue == "Spark SQL"
    # Codes STS cannot answer (it drops the connection) are answered here.
    assert c.call("GetInfo", T.TGetInfoReq(sessionHandle=c.session, infoType=30)).infoValue.lenValue == 128
    bad = c.call("GetInfo", T.TGetInfoReq(sessionHandle=c.session, infoType=47))
    assert bad.status.statusCode == T.TStatusCode.ERROR_STATUS and "CLI_USER_NAME" in bad.status.errorMessage
    assert c.execute("select 1").status.statusCode == 0
    c.close()


def test_passthrough_rows_and_errors_pyhive_impyla(gw_proxy):
    conn = pyhive_connect(gw_proxy.host, gw_proxy.port)
    cur = conn.cursor()
    cur.execute("select id, if(id = 1, null, cast(id as string)) s from range(3)")
    assert cur.fetchall() == [(0, "0"), (1, None), (2, "2")]
    with pytest.raises(Exception, match="TABLE_OR_VIEW_NOT_FOUND"):
        cur.execute("select * from no_such_table_x")
    cur.execute("select 5")           # session still usable after an error
    assert cur.fetchall() == [(5,)]
    conn.close()
    ic = impyla_connect(gw_proxy.host, gw_proxy.port)
    icur = ic.cursor()
    icur.execute("SET datamap.rewrite.enabled")   # impyla: GetLog/CloseImpalaOperation probes
    assert icur.fetchall() == [("datamap.rewrite.enabled", "true")]
    icur.execute("select 2")
    assert icur.fetchall() == [(2,)]
    ic.close()


def test_disconnect_closes_upstream_session(gw_proxy, gw_sts):
    oplogs = gw_sts.workdir / "oplogs"     # STS keeps one directory per open session

    def dirs():
        return set(p.name for p in oplogs.iterdir()) if oplogs.is_dir() else set()
    before = dirs()
    c = Raw(gw_proxy.host, gw_proxy.port)
    c.open()
    c.execute("select 1")
    deadline = time.time() + 10
    while not (dirs() - before) and time.time() < deadline:
        time.sleep(0.2)
    mine = dirs() - before
    assert len(mine) == 1
    c.close()                         # no CloseSession: TCP drop
    deadline = time.time() + 15
    while mine & dirs() and time.time() < deadline:
        time.sleep(0.2)
    assert not (mine & dirs())


def test_upstream_cut_mid_query_fails_only_that_session(gw_proxy, gw_relay):
    victim, other = Raw(gw_proxy.host, gw_proxy.port), Raw(gw_proxy.host, gw_proxy.port)
    victim.open()
    other.open()
    idx = len(gw_relay.pairs) - 2          # victim's upstream connection
    r = victim.execute("select count(*) from range(100000000) a", run_async=True)
    assert r.status.statusCode == 0
    gw_relay.cut(idx)
    t0 = time.time()
    st = victim.call("GetOperationStatus", T.TGetOperationStatusReq(operationHandle=r.operationHandle))
    assert time.time() - t0 < 10
    assert st.status.statusCode == T.TStatusCode.ERROR_STATUS
    assert "Spark Thrift Server" in st.status.errorMessage and st.status.sqlState == "08S01"
    ok = other.execute("select 3")
    assert ok.status.statusCode == 0
    fresh = Raw(gw_proxy.host, gw_proxy.port)
    fresh.open()
    assert fresh.execute("select 4").status.statusCode == 0
    for c in (victim, other, fresh):
        c.close()


def test_upstream_down_at_open_session(gw_dir):
    p = start_proxy(gw_dir / "proxy-down", ("127.0.0.1", free_port()))
    try:
        c = Raw(p.host, p.port)
        resp = c.call("OpenSession", T.TOpenSessionReq(client_protocol=9, username="me"))
        assert resp.status.statusCode == T.TStatusCode.ERROR_STATUS
        assert "Cannot connect to Spark Thrift Server" in resp.status.errorMessage
        assert resp.status.sqlState == "08S01"
        c.close()
    finally:
        assert p.stop(check=True) == 0


def test_probes_garbage_and_oversize_do_not_hurt_server(gw_dir, gw_relay):
    p = start_proxy(gw_dir / "proxy-limits", ("127.0.0.1", gw_relay.port),
                    extra_args=["--max-frame-bytes", "65536"])
    try:
        socket.create_connection((p.host, p.port)).close()                 # health probe
        s = socket.create_connection((p.host, p.port))
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")     # HTTP, sniffed: not a Thrift POST
        s.settimeout(10)
        assert s.recv(100).startswith(b"HTTP/1.1 405 ")
        s.close()
        c = Raw(p.host, p.port)
        c.open()
        with pytest.raises((EOFError, ConnectionError)):                    # oversized message
            c.execute("select '" + "x" * 100_000 + "'")
        c.close()
        ok = Raw(p.host, p.port)
        ok.open()
        assert ok.execute("select 1").status.statusCode == 0
        ok.close()
        log = p.log_path.read_text()
        assert "exceeds 65536" in log and "(HTTP): 405 GET is not served here" in log
    finally:
        assert p.stop(check=True) == 0


def test_nosasl_mode_and_mismatch_messages(gw_dir, gw_relay):
    p = start_proxy(gw_dir / "proxy-nosasl", ("127.0.0.1", gw_relay.port), auth="nosasl")
    try:
        c = Raw(p.host, p.port, use_sasl=False)
        c.open(5)
        r = c.execute("SET datamap.rewrite.enabled")
        assert c.fetch(r.operationHandle).results.columns[1].stringVal.values == ["true"]
        c.close()
        with pytest.raises(AssertionError, match="NOSASL"):
            Raw(p.host, p.port)                   # SASL client -> clear BAD message
    finally:
        assert p.stop(check=True) == 0


def test_sigterm_drains_running_statement_then_exits_0(gw_dir, gw_relay):
    import threading
    p = start_proxy(gw_dir / "proxy-drain", ("127.0.0.1", gw_relay.port))
    out: dict = {}

    def run():
        try:
            conn = pyhive_connect(p.host, p.port)
            cur = conn.cursor()
            cur.execute("select reflect('java.lang.Thread', 'sleep', bigint(4000)) r, 7 n")
            out["rows"] = cur.fetchall()
        except Exception as e:  # noqa: BLE001 - reported below
            out["error"] = e
    t = threading.Thread(target=run)
    t.start()
    time.sleep(2.0)                      # statement is running in Spark now
    assert p.stop(timeout=40, check=True) == 0
    t.join(30)
    assert out.get("rows") == [("null", 7)], out
    log = p.log_path.read_text()
    assert "shutting down" in log and "stopped" in log


def test_tls(gw_dir, gw_relay):
    import shutil
    import subprocess
    assert shutil.which("openssl"), "openssl is needed to make the test certificate (scripts/test installs it)"
    d = gw_dir / "tls"
    d.mkdir(exist_ok=True)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                    str(d / "key.pem"), "-out", str(d / "cert.pem"), "-days", "1",
                    "-subj", "/CN=127.0.0.1"], check=True, capture_output=True)
    p = start_proxy(d / "proxy", ("127.0.0.1", gw_relay.port),
                    extra_args=["--tls-cert", str(d / "cert.pem"), "--tls-key", str(d / "key.pem")])
    try:
        # In a child process: impyla's TLS path upsets CPython 3.11.7's AST recursion
        # counter in the pytest process (SystemError at session end).
        import sys
        code = ("from impala import dbapi\n"
                f"c = dbapi.connect(host='{p.host}', port={p.port}, auth_mechanism='PLAIN', "
                "user='me', password='x', use_ssl=True, timeout=60)\n"
                "cur = c.cursor(); cur.execute(\"select 'tls' as t\"); print(cur.fetchall())\n")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert out.stdout.strip() == "[('tls',)]", out.stderr[-2000:]
        with pytest.raises(Exception):        # plaintext client on the TLS port
            Raw(p.host, p.port)
    finally:
        assert p.stop(check=True) == 0
