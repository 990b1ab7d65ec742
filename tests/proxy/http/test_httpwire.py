"""The HTTP transport's pure half (proxy/http/wire.py): request heads, responses, Basic
credentials and the signed session cookie."""
from __future__ import annotations

import base64

import pytest

from proxy.http import wire as hw


def head(*lines: str) -> bytes:
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def test_a_thrift_post_parses():
    data = head("POST /cliservice?doAs=x HTTP/1.1", "Host: h", "Content-Length: 12",
                "Content-Type: application/x-thrift", "Cookie: a=1", "Cookie: b=2")
    assert hw.head_length(data + b"body", 8192) == len(data)
    req = hw.parse_head(data)
    assert (req.method, req.path, req.version) == ("POST", "/cliservice", "HTTP/1.1")
    assert req.content_length(100) == 12
    assert req.headers["cookie"] == "a=1; b=2"
    assert req.keep_alive


@pytest.mark.parametrize("connection,version,keep", [
    ("", "HTTP/1.1", True), ("close", "HTTP/1.1", False), ("", "HTTP/1.0", False),
    ("Keep-Alive", "HTTP/1.0", True)])
def test_keep_alive_follows_version_and_connection(connection, version, keep):
    lines = [f"POST /cliservice {version}"] + ([f"Connection: {connection}"] if connection else [])
    assert hw.parse_head(head(*lines)).keep_alive is keep


def test_incomplete_head_waits_and_an_oversized_one_is_refused():
    assert hw.head_length(b"POST /cliservice HTTP/1.1\r\nHost: x\r\n", 8192) is None
    with pytest.raises(hw.HttpError) as e:
        hw.head_length(b"POST /x HTTP/1.1\r\nX: " + b"a" * 9000, 8192)
    assert e.value.status == 431 and "8192" in e.value.message


@pytest.mark.parametrize("title,data,status", [
    ("request line with two parts", head("POST /cliservice"), 400),
    ("binary junk", b"\x01\x00\x00\x00\x05PLAIN\r\n\r\n", 400),
    ("unknown version", head("POST /cliservice HTTP/2.0"), 505),
    ("header without a colon", head("POST /c HTTP/1.1", "Broken header"), 400),
    ("space before the colon", head("POST /c HTTP/1.1", "Content-Length : 5"), 400),
    ("conflicting lengths", head("POST /c HTTP/1.1", "Content-Length: 5", "Content-Length: 6"), 400),
])
def test_malformed_heads_are_400(title, data, status):
    with pytest.raises(hw.HttpError) as e:
        hw.parse_head(data)
    assert e.value.status == status, title


def test_a_malformed_credentials_line_is_not_echoed():
    with pytest.raises(hw.HttpError) as e:
        hw.parse_head(head("POST /c HTTP/1.1", "Authorization : Basic c2VjcmV0"))
    assert "c2VjcmV0" not in e.value.message and "Authorization" in e.value.message


@pytest.mark.parametrize("headers,status,words", [
    ({}, 411, "Content-Length"),
    ({"content-length": "-1"}, 400, "malformed Content-Length"),
    ({"content-length": "1e3"}, 400, "malformed Content-Length"),
    ({"content-length": "104857601"}, 413, "104857601 bytes is over the limit of 104857600"),
    ({"transfer-encoding": "chunked", "content-length": "3"}, 501, "Transfer-Encoding (chunked)"),
])
def test_body_length_is_checked_before_the_body(headers, status, words):
    req = hw.Request("POST", "/cliservice", "HTTP/1.1", headers)
    with pytest.raises(hw.HttpError) as e:
        req.content_length(104_857_600)
    assert e.value.status == status and words in e.value.message


@pytest.mark.parametrize("first,http", [
    (b"POST /cliservice HTTP/1.1\r\n", True), (b"GET / HTTP/1.1", True), (b"PO", True),
    (b"\x01\x00\x00\x00\x05PLAIN", False), (b"\x80\x01\x00\x01", False), (b"\x16\x03\x01", False),
    (b"", False), (b"POSTX", False)])
def test_sniffing_the_first_bytes(first, http):
    assert hw.looks_like_http(first) is http


def test_response_bytes():
    out = hw.response(401, b"no\n", headers={"WWW-Authenticate": "Basic"}, close=True)
    assert out == (b"HTTP/1.1 401 Unauthorized\r\nContent-Type: text/plain; charset=utf-8\r\n"
                   b"WWW-Authenticate: Basic\r\nContent-Length: 3\r\nConnection: close\r\n\r\nno\n")


def test_basic_credentials():
    value = "Basic " + base64.b64encode("ann:p:w é".encode()).decode()
    assert hw.basic_credentials(value) == ("ann", "p:w é")
    for bad in ("Basic", "Basic !!!", "Basic " + base64.b64encode(b"nocolon").decode()):
        with pytest.raises(hw.HttpError) as e:
            hw.basic_credentials(bad)
        assert e.value.status == 401


def test_cookie_round_trip_forgery_and_expiry():
    now = [1000.0]
    signer = hw.CookieSigner(60, key=b"k" * 32, clock=lambda: now[0])
    set_cookie = signer.issue("ann smith;x", secure=True)
    assert set_cookie.startswith("hive.server2.auth=") and "Max-Age=60" in set_cookie
    assert "HttpOnly" in set_cookie and set_cookie.endswith("; Secure")
    assert "Secure" not in signer.issue("ann", secure=False)
    value = set_cookie.split(";", 1)[0].split("=", 1)[1]
    assert hw.cookie_value(f"other=1; hive.server2.auth={value}") == [value]
    assert signer.user(value) == "ann smith;x"
    assert signer.user(value.replace("cu=ann", "cu=bob")) is None            # forged user
    assert hw.CookieSigner(60, key=b"j" * 32).user(value) is None           # other process
    assert signer.user("garbage") is None and signer.user("cu=a&e=x&s=") is None
    now[0] += 61
    assert signer.user(value) is None                                       # expired
