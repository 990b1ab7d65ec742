"""The HTTP transport against the proxy as a subprocess, without Spark: every call here is
answered before OpenSession would reach the upstream (a GetInfo on an unknown session
handle comes back as a Thrift error inside a 200), so the proxy points at a port nobody
listens on. Authentication, the cookie, keep-alive, limits and the sniffed binary port;
the real clients are in tests/proxy/clients/test_http_clients.py."""
from __future__ import annotations

import base64
import http.client
import socket
from pathlib import Path

import pytest

from proxy.gateway.auth import plain as auth
from proxy.thrift import codec
from tests.support.ports import free_port
from tests.support.proxy_proc import start_proxy
from tests.support.wire import CALL, closed_by_peer, sasl_login

pytestmark = pytest.mark.timeout(120)


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def post(conn: http.client.HTTPConnection, headers: dict[str, str], body: bytes = CALL,
         path: str = "/cliservice") -> tuple[http.client.HTTPResponse, bytes]:
    conn.request("POST", path, body=body,
                 headers={"Content-Type": "application/x-thrift", **headers})
    resp = conn.getresponse()
    return resp, resp.read()


def thrift_answer(data: bytes) -> str:
    """The error message of the GetInfo reply ("Invalid SessionHandle..."): the call
    reached Service.handle."""
    return codec.decode_reply(data, "GetInfo").status.errorMessage


def raw_exchange(port: int, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(data)
        out = b""
        while True:
            try:
                chunk = s.recv(65536)
            except ConnectionError:
                return out
            if not chunk:
                return out
            out += chunk


def _secured(start, workdir: Path):
    """A proxy with alice/wonder in its users file, an HTTP port and a lockout after 3."""
    users = workdir / "users"
    auth.add_user(users, "alice", "wonder")
    hp = free_port()
    p = start("--users-file", str(users), "--http-port", str(hp), "--max-login-failures", "3")
    p.http_port = hp
    return p


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    """One proxy for the module's tests that leave it as they found it: no wrong password
    (the lockout test has a proxy of its own)."""
    workdir = tmp_path_factory.mktemp("http")
    p = _secured(lambda *flags: start_proxy(workdir / "proxy", ("127.0.0.1", free_port()),
                                            extra_args=list(flags)), workdir)
    yield p
    assert p.stop(check=True) == 0


@pytest.fixture
def lockable(proxy_without_spark, tmp_path):
    return _secured(proxy_without_spark, tmp_path)


def test_basic_then_cookie_on_one_keep_alive_connection(secured):
    conn = http.client.HTTPConnection("127.0.0.1", secured.http_port, timeout=30)
    resp, body = post(conn, {})
    assert resp.status == 401 and resp.getheader("WWW-Authenticate", "").startswith("Basic")
    assert b"Authorization header received from the client is empty" in body
    conn = http.client.HTTPConnection("127.0.0.1", secured.http_port, timeout=30)
    resp, body = post(conn, {"Authorization": basic("alice", "wonder")})
    assert resp.status == 200 and resp.getheader("Content-Type") == "application/x-thrift"
    assert thrift_answer(body).startswith("Invalid SessionHandle")
    cookie = resp.getheader("Set-Cookie")
    assert cookie.startswith("hive.server2.auth=") and "Max-Age=86400" in cookie
    assert "HttpOnly" in cookie and "Secure" not in cookie          # plain http
    sock = conn.sock
    value = cookie.split(";", 1)[0]
    # the cookie alone logs in, and it is checked before any password: a wrong one is
    # never looked at (no failed login counted)
    for headers in ({"Cookie": value}, {"Cookie": value, "Authorization": basic("alice", "nope")}):
        resp, body = post(conn, headers)
        assert resp.status == 200 and resp.getheader("Set-Cookie") is None
        assert thrift_answer(body).startswith("Invalid SessionHandle")
    assert conn.sock is sock                                          # keep-alive
    assert "authentication failed" not in secured.log_path.read_text()
    forged = value.replace("cu=alice", "cu=admin")
    resp, _ = post(conn, {"Cookie": forged})
    assert resp.status == 401


def test_wrong_passwords_share_the_binary_ports_lockout(lockable):
    conn = http.client.HTTPConnection("127.0.0.1", lockable.http_port, timeout=30)
    for _ in range(3):
        conn = http.client.HTTPConnection("127.0.0.1", lockable.http_port, timeout=30)
        resp, body = post(conn, {"Authorization": basic("alice", "wrong-pw")})
        assert resp.status == 401 and body.startswith(b"Authentication Error: ")
        assert resp.getheader("Connection") == "close"
    # locked after 3 failures over HTTP: the right password is refused on both transports
    conn = http.client.HTTPConnection("127.0.0.1", lockable.http_port, timeout=30)
    resp, body = post(conn, {"Authorization": basic("alice", "wonder")})
    assert resp.status == 401 and b"too many failed logins" in body.lower(), body
    status, _ = sasl_login(lockable.host, lockable.port, "alice", "wonder")
    assert status != 5        # not COMPLETE
    log = lockable.log_path.read_text()
    assert "wrong-pw" not in log and "wonder" not in log


@pytest.mark.parametrize("title,request_bytes,status,words", [
    ("GET on the path", b"GET /cliservice HTTP/1.1\r\nHost: x\r\n\r\n", 405, b"POST"),
    ("another path", b"POST /other HTTP/1.1\r\nContent-Length: 0\r\n\r\n", 404, b"/cliservice"),
    ("over the body limit, declared", b"POST /cliservice HTTP/1.1\r\nAuthorization: "
     + basic("alice", "wonder").encode() + b"\r\nContent-Length: 104857601\r\n\r\n", 413,
     b"104857601 bytes is over the limit of 104857600 bytes (server.max_frame_bytes)"),
    ("chunked", b"POST /cliservice HTTP/1.1\r\nAuthorization: " + basic("alice", "wonder").encode()
     + b"\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 501, b"Content-Length"),
    ("garbage", b"\x16\x03\x01 hello\r\n\r\n", 400, b"malformed request line"),
    ("huge head before login", b"POST /cliservice HTTP/1.1\r\nX: " + b"a" * 20000, 431, b"over"),
    ("not Thrift", b"POST /cliservice HTTP/1.1\r\nAuthorization: " + basic("alice", "wonder").encode()
     + b"\r\nContent-Length: 5\r\n\r\nhello", 400, b"not a Thrift call"),
])
def test_bad_requests_get_a_clear_status_and_the_server_lives(secured, title, request_bytes,
                                                               status, words):
    out = raw_exchange(secured.http_port, request_bytes)
    first = out.split(b"\r\n", 1)[0]
    assert first.startswith(f"HTTP/1.1 {status} ".encode()), (title, out[:300])
    assert words in out, (title, out[:500])
    conn = http.client.HTTPConnection("127.0.0.1", secured.http_port, timeout=30)
    resp, _ = post(conn, {"Authorization": basic("alice", "wonder")})
    assert resp.status == 200 and secured.alive()


def test_expect_100_continue_after_the_checks(secured):
    with socket.create_connection(("127.0.0.1", secured.http_port), timeout=30) as s:
        s.sendall(f"POST /cliservice HTTP/1.1\r\nAuthorization: {basic('alice', 'wonder')}\r\n"
                  f"Expect: 100-continue\r\nContent-Length: {len(CALL)}\r\n\r\n".encode())
        assert s.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"
        s.sendall(CALL)
        assert s.recv(100).startswith(b"HTTP/1.1 200 OK\r\n")
    out = raw_exchange(secured.http_port, f"POST /cliservice HTTP/1.1\r\nAuthorization: "
                       f"{basic('alice', 'wonder')}\r\nExpect: 100-continue\r\n"
                       "Content-Length: 200000000\r\n\r\n".encode())
    assert out.startswith(b"HTTP/1.1 413 ")          # refused before the body is sent


def test_sniffed_on_the_binary_port_and_off_when_disabled(secured, proxy_without_spark, tmp_path):
    conn = http.client.HTTPConnection("127.0.0.1", secured.port, timeout=30)
    resp, body = post(conn, {"Authorization": basic("alice", "wonder")})
    assert resp.status == 200 and thrift_answer(body)
    status, _ = sasl_login(secured.host, secured.port, "alice", "wonder")      # SASL still there
    assert status == 5
    cfg = tmp_path / "nohttp.toml"
    cfg.write_text("[server]\nhttp_on_binary_port = false\n")
    off = proxy_without_spark("--config", str(cfg), workdir="off")
    with socket.create_connection(("127.0.0.1", off.port), timeout=30) as s:
        s.sendall(b"POST /cliservice HTTP/1.1\r\nContent-Length: 0\r\n\r\n")
        assert closed_by_peer(s, 20)


def test_nosasl_http_takes_the_name_unchecked(proxy_without_spark):
    hp = free_port()
    p = proxy_without_spark("--auth", "nosasl", "--http-port", str(hp))
    for headers in ({}, {"Authorization": basic("bob", "")}):
        conn = http.client.HTTPConnection("127.0.0.1", hp, timeout=30)
        resp, body = post(conn, headers)
        assert resp.status == 200 and thrift_answer(body)
        assert resp.getheader("Set-Cookie") is None
    assert p.alive()
