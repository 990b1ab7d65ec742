"""The HTTP transport with real clients, against the client suite's Spark Thrift Server:
beeline and Hive JDBC (`transportMode=http;httpPath=cliservice`, also `ssl=true` with a
trust store), PyHive `scheme='http'/'https'` and impyla `use_http_transport=True`. Each
answer over HTTP through the proxy equals the same query's answer over the binary port
straight from Spark. The shared proxy (conftest) serves HTTP on a port of its own and
sniffs it on the binary port; a second proxy, without a Spark of its own, adds TLS and a
users file (wrong passwords, the session cookie)."""
from __future__ import annotations

import base64
import http.client
import json
import ssl
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.client_matrix import ITEST_DB, types_select
from tests.support.clients import pyhive_connect, pyhive_execute, run_beeline
from tests.support.jdbc import run_jdbc
from tests.support.proxy_proc import start_proxy
from tests.support.wire import CALL

pytestmark = [pytest.mark.spark, pytest.mark.timeout(400)]

QUERY = types_select(f"{ITEST_DB}.all_types")
HTTP = "transportMode=http;httpPath=cliservice"


def pyhive_http(host: str, port: int, sql: str, scheme: str = "http", user: str = "me",
                password: str = "x"):
    from pyhive import hive
    conn = hive.connect(host=host, port=port, scheme=scheme, username=user, password=password,
                        auth="BASIC", ssl_cert="none" if scheme == "https" else None)
    try:
        return pyhive_execute(conn.cursor(), sql)
    finally:
        conn.close()


def test_pyhive_over_http_equals_binary_and_a_big_body_is_refused(proxy, direct, itest_db):
    conn = pyhive_connect(direct.host, direct.port)
    want = pyhive_execute(conn.cursor(), QUERY)
    conn.close()
    before = len(proxy.log_path.read_text())
    got = pyhive_http(proxy.host, proxy.http_port, QUERY)
    assert got == want and len(got.rows) == 3
    # PyHive opens a TCP connection per call: the session outlived each one, and was
    # closed by its CloseSession, not by a disconnect
    new = proxy.log_path.read_text()[before:]
    assert "reason=client" in new and "reason=disconnect" not in new, new[-2000:]
    # the same client on the binary port, sniffed as HTTP
    assert pyhive_http(proxy.host, proxy.port, QUERY) == want
    big = "SELECT '" + "x" * (101 << 20) + "'"
    with pytest.raises(Exception):
        pyhive_http(proxy.host, proxy.http_port, big)
    assert "413 request body of" in proxy.log_path.read_text()
    assert pyhive_http(proxy.host, proxy.http_port, "SELECT 1 AS one").rows == [(1,)]


def impyla_http(host: str, port: int, sql: str, user: str = "me", password: str = "x",
                ca_cert: Path | None = None, http: bool = True) -> str:
    """repr() of (description names, rows) from impyla over HTTP (HTTPS with ca_cert; the
    binary transport with http=False), or the last line of its error. In a child process:
    after impyla's HTTP and TLS paths, and its conversion of all_types, the pytest process
    fails at its end with CPython 3.11.7's "AST constructor recursion depth mismatch"
    (SystemError; see tests/proxy/gateway/test_gateway.py::test_tls)."""
    tls = f", use_ssl=True, ca_cert={str(ca_cert)!r}" if ca_cert else ""
    code = ("from impala import dbapi\n"
            f"c = dbapi.connect(host={host!r}, port={port}, use_http_transport={http}, "
            f"http_path='cliservice', auth_mechanism='PLAIN', user={user!r}, "
            f"password={password!r}, timeout=60{tls})\n"
            f"cur = c.cursor(); cur.execute({sql!r})\n"
            "print(repr(([d[0] for d in cur.description], [tuple(r) for r in cur.fetchall()])))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    return out.stdout.strip() or out.stderr.strip().splitlines()[-1]


def test_impyla_over_http_equals_binary(proxy, direct, itest_db):
    want = impyla_http(direct.host, direct.port, QUERY, http=False)
    assert want.startswith("(['c_tinyint',") and want.count("), (") == 2, want
    assert impyla_http(proxy.host, proxy.http_port, QUERY) == want


def test_beeline_and_hive_jdbc_over_http(proxy, direct, itest_db, tmp_path):
    sql = f"SELECT c_int, c_string, c_decimal FROM {ITEST_DB}.all_types ORDER BY c_int"
    want = run_beeline(direct.jdbc(), [QUERY], workdir=tmp_path)
    got = run_beeline(f"jdbc:hive2://{proxy.host}:{proxy.http_port}/default;{HTTP}",
                      [QUERY, "!tables"], workdir=tmp_path)
    assert not want.errors and want.results, want.stderr[-2000:]
    assert not got.errors and got.results, got.stderr[-2000:]
    assert got.results[0] == want.results[0] and len(got.results[0].rows) == 3
    assert any(r[2] == "all_types" for r in got.results[1].rows)
    jdbc = run_jdbc([(f"jdbc:hive2://{direct.host}:{direct.port}/default", "me", "x", sql),
                     (f"jdbc:hive2://{proxy.host}:{proxy.http_port}/default;{HTTP}", "me", "x", sql),
                     (f"jdbc:hive2://{proxy.host}:{proxy.port}/default;{HTTP}", "me", "x", sql),
                     (f"jdbc:hive2://{proxy.host}:{proxy.port}/default", "me", "x", sql)])
    assert "rows" in jdbc[0], jdbc
    assert jdbc[1] == jdbc[0] and jdbc[2] == jdbc[0] and jdbc[3] == jdbc[0]


# --------------------------------------------------------------------------- TLS + users file

@pytest.fixture(scope="module")
def tls_proxy(sts, tmp_path_factory):
    """A proxy in front of the suite's STS with TLS on both ports, a users file (alice /
    wonder) and debug logs (which name how each HTTP request logged in)."""
    from proxy.gateway.auth import plain as auth
    d = tmp_path_factory.mktemp("http-tls")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                    str(d / "key.pem"), "-out", str(d / "cert.pem"), "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    subprocess.run(["keytool", "-importcert", "-noprompt", "-alias", "proxy", "-file",
                    str(d / "cert.pem"), "-keystore", str(d / "trust.jks"), "-storepass",
                    "changeit"], check=True, capture_output=True)
    auth.add_user(d / "users", "alice", "wonder")
    p = start_proxy(d / "proxy", (sts.host, sts.port), http=True, extra_args=[
        "--tls-cert", str(d / "cert.pem"), "--tls-key", str(d / "key.pem"),
        "--users-file", str(d / "users"), "--log-level", "DEBUG",
        "--max-login-failures", "50"])   # the wrong passwords below must not lock alice out
    p.tls_dir = d
    yield p
    assert p.stop(check=True) == 0


def test_https_clients_cookie_and_wrong_password(tls_proxy, direct, itest_db, tmp_path):
    p, d = tls_proxy, Path(tls_proxy.tls_dir)
    conn = pyhive_connect(direct.host, direct.port)
    want = pyhive_execute(conn.cursor(), QUERY)
    conn.close()
    assert pyhive_http(p.host, p.http_port, QUERY, "https", "alice", "wonder") == want
    with pytest.raises(Exception):
        pyhive_http(p.host, p.http_port, "SELECT 1", "https", "alice", "guess")
    ca = d / "cert.pem"
    assert impyla_http(p.host, p.http_port, "SELECT 41 + 1 AS answer", "alice", "wonder",
                       ca) == "(['answer'], [(42,)])"
    assert "401" in impyla_http(p.host, p.http_port, "SELECT 1", "alice", "guess", ca)

    url = (f"jdbc:hive2://127.0.0.1:{p.http_port}/default;ssl=true;"
           f"sslTrustStore={d / 'trust.jks'};trustStorePassword=changeit;{HTTP}")
    before = p.log_path.read_text()
    run = run_beeline(url, [QUERY, "SELECT current_user() IS NOT NULL AS u"], user="alice",
                      password="wonder", workdir=tmp_path)
    assert not run.errors, run.stderr[-2000:]
    assert len(run.results[0].rows) == 3
    # Hive JDBC logs in with the password once, then rides the cookie
    new = p.log_path.read_text()[len(before):]
    assert new.count("user alice by password") == 1, new[-3000:]
    assert new.count("user alice by cookie") >= 5
    bad = run_beeline(url, ["SELECT 1"], user="alice", password="guess", workdir=tmp_path)
    assert [e[1] for e in bad.errors if "HTTP Response code: 401" in e[1]], bad.stderr[-2000:]
    jdbc = run_jdbc([(url, "alice", "guess", "SELECT 1"), (url, "alice", "wonder", "SELECT 1")])
    assert "401" in jdbc[0]["error"] and jdbc[1] == {"rows": [["1"]]}
    log = p.log_path.read_text()
    assert "wonder" not in log and "guess" not in log
    ctx = ssl.create_default_context(cafile=str(d / "cert.pem"))
    https = http.client.HTTPSConnection(p.host, p.http_port, context=ctx, timeout=30)
    https.request("POST", "/cliservice", body=CALL, headers={
        "Authorization": "Basic " + base64.b64encode(b"alice:wonder").decode()})
    cookie = https.getresponse().getheader("Set-Cookie")
    assert cookie.startswith("hive.server2.auth=") and cookie.endswith("HttpOnly; Secure")
    print(json.dumps({"beeline": bad.errors, "jdbc": jdbc[0]["error"][:300]}))


def test_docs_http_md_examples_run(proxy, tmp_path):
    """docs/http.md's JDBC URLs and Python block, as written, with the shared proxy's ports
    in place of 10000 / 10001."""
    doc = (Path(__file__).resolve().parents[3] / "docs" / "http.md").read_text()
    ports = lambda text: text.replace("10001", str(proxy.http_port)).replace("10000", str(proxy.port))  # noqa: E731
    blocks = doc.split("```")
    urls = next(b for b in blocks if b.startswith("text\njdbc:hive2://127.0.0.1")).split()[1:]
    assert len(urls) == 2
    jdbc = run_jdbc([(ports(u), "me", "x", "SELECT 3 AS three") for u in urls])
    assert jdbc == [{"rows": [["3"]]}] * 2
    code = next(b for b in blocks if b.startswith("python\n"))[len("python\n"):]
    out = subprocess.run([sys.executable, "-c", ports(code)], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)
    assert out.stdout.split() == ["[(1,)]", "[(2,)]"], out.stderr[-2000:]
