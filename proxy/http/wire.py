"""HTTP/1.1 as HiveServer2's http transport uses it, without I/O: request heads parsed from
bytes, responses built as bytes, Basic credentials, and the signed `hive.server2.auth`
session cookie. proxy/gateway/http_transport.py does the reading and writing.

Only what Thrift-over-HTTP clients send is accepted (a POST with a Content-Length body);
anything else is an HttpError carrying the status and a message meant for the client, so
that a broken or hostile request costs one short reply and a closed connection.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass, field
from urllib.parse import quote, unquote

COOKIE_NAME = "hive.server2.auth"
_METHODS = (b"GET ", b"POST ", b"PUT ", b"HEAD ", b"DELETE ", b"OPTIONS ", b"PATCH ",
            b"TRACE ", b"CONNECT ")
_REASONS = {200: "OK", 303: "See Other", 403: "Forbidden", 415: "Unsupported Media Type",
            500: "Internal Server Error",
            400: "Bad Request", 401: "Unauthorized", 404: "Not Found",
            405: "Method Not Allowed", 411: "Length Required", 413: "Content Too Large",
            431: "Request Header Fields Too Large", 501: "Not Implemented",
            505: "HTTP Version Not Supported"}


class HttpError(Exception):
    """A request the proxy answers with `status` and closes the connection after."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


def looks_like_http(first: bytes) -> bool:
    """True when the first bytes of a connection start an HTTP request line. A binary
    client's first byte is a SASL status (1..5) or a Thrift version byte (0x80 / 0x00), so
    an upper-case ASCII method cannot be mistaken for one."""
    head = bytes(first[:8])
    return bool(head) and any(head.startswith(m) or m.startswith(head) for m in _METHODS)


@dataclass
class Request:
    method: str
    target: str                    # as sent: path and query
    version: str                   # "HTTP/1.1" | "HTTP/1.0"
    headers: dict[str, str] = field(default_factory=dict)     # lower-case names

    @property
    def path(self) -> str:
        return self.target.split("?", 1)[0]

    @property
    def keep_alive(self) -> bool:
        conn = self.headers.get("connection", "").lower()
        if self.version == "HTTP/1.0":
            return "keep-alive" in conn
        return "close" not in conn

    def content_length(self, limit: int) -> int:
        """The declared body length; HttpError when there is none, it is malformed, or it is
        over `limit` (checked before a byte of the body is read)."""
        if "transfer-encoding" in self.headers:
            raise HttpError(501, "Transfer-Encoding "
                            f"({self.headers['transfer-encoding'][:40]}) is not supported: "
                            "send the Thrift message with a Content-Length")
        raw = self.headers.get("content-length")
        if raw is None:
            raise HttpError(411, "a POST needs a Content-Length header")
        if not raw.isdigit() or len(raw) > 19:
            raise HttpError(400, f"malformed Content-Length: {raw[:40]!r}")
        n = int(raw)
        if n > limit:
            raise HttpError(413, f"request body of {n} bytes is over the limit of {limit} bytes "
                            "(server.max_frame_bytes)")
        return n


def head_length(buf: bytes | bytearray, limit: int) -> int | None:
    """Length of the request head (through the blank line) at the start of buf; None if it
    is not complete yet; HttpError once it cannot fit in `limit` bytes."""
    end = buf.find(b"\r\n\r\n", 0, limit + 4)
    if end >= 0:
        return end + 4
    if len(buf) >= limit:
        raise HttpError(431, f"request head over {limit} bytes")
    return None


def parse_head(data: bytes) -> Request:
    """The request line and headers of `data` (a complete head, as head_length found it)."""
    try:
        text = data.decode("latin-1")
    except UnicodeDecodeError as e:           # latin-1 decodes any byte; kept for clarity
        raise HttpError(400, f"undecodable request head: {e}") from None
    lines = text[:-4].split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[0].isalpha() or not parts[1]:
        raise HttpError(400, f"malformed request line: {lines[0][:80]!r}")
    method, target, version = parts
    if version not in ("HTTP/1.1", "HTTP/1.0"):
        raise HttpError(505 if version.startswith("HTTP/") else 400,
                        f"unsupported protocol version {version[:20]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not name or " " in name or "\t" in name:
            # the name only: a mangled Authorization or Cookie line must not reach the log
            raise HttpError(400, f"malformed header line (name {name[:40]!r})")
        key = name.lower()
        value = value.strip()
        if key in headers:
            if key == "content-length" and headers[key] != value:
                raise HttpError(400, "conflicting Content-Length headers")
            value = f"{headers[key]}, {value}" if key != "cookie" else f"{headers[key]}; {value}"
        headers[key] = value
    return Request(method, target, version, headers)


def response(status: int, body: bytes = b"", *, content_type: str = "text/plain; charset=utf-8",
             headers: dict[str, str] | None = None, close: bool = False) -> bytes:
    """Head and body of one response (a large body is better written separately: pass
    body=b"" and its length in headers['Content-Length'])."""
    lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}",
             f"Content-Type: {content_type}"]
    extra = dict(headers or {})
    extra.setdefault("Content-Length", str(len(body)))
    if close:
        extra["Connection"] = "close"
    lines += [f"{k}: {v}" for k, v in extra.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def basic_credentials(value: str) -> tuple[str, str]:
    """(user, password) of an `Authorization: Basic ...` value; HttpError(401) if malformed."""
    try:
        raw = base64.b64decode(value.split(None, 1)[1].strip(), validate=True)
        user, sep, password = raw.decode("utf-8").partition(":")
    except (IndexError, binascii.Error, UnicodeDecodeError):
        sep, user, password = "", "", ""
    if not sep:
        raise HttpError(401, "Authentication Error: the Authorization header is not "
                             "Basic base64(user:password)")
    return user, password


def auth_scheme(value: str) -> str:
    return value.split(None, 1)[0].lower() if value.strip() else ""


def cookie_value(header: str, name: str = COOKIE_NAME) -> list[str]:
    """Every value of cookie `name` in a Cookie header (clients may send stale ones too)."""
    out = []
    for part in header.split(";"):
        k, sep, v = part.strip().partition("=")
        if sep and k == name:
            out.append(v.strip().strip('"'))
    return out


class CookieSigner:
    """Issues and checks `hive.server2.auth` cookies: the user, an expiry and an HMAC over
    both under a key that lives only in this process (a restart logs everyone out to a
    password check, as HiveServer2 does)."""

    def __init__(self, max_age: float, key: bytes | None = None,
                 clock=time.time, name: str = COOKIE_NAME, attrs: str = ""):
        self.max_age = max_age
        self._key = key or secrets.token_bytes(32)
        self._clock = clock
        self.name = name          # the web console signs a cookie of its own name
        self._attrs = f"; {attrs}" if attrs else ""

    def _sign(self, payload: str) -> str:
        return hmac.new(self._key, payload.encode(), hashlib.sha256).hexdigest()

    def issue(self, user: str, secure: bool) -> str:
        """A Set-Cookie header value."""
        payload = f"cu={quote(user, safe='')}&e={int(self._clock() + self.max_age)}"
        attrs = f"Max-Age={int(self.max_age)}; Path=/; HttpOnly{self._attrs}"
        return f"{self.name}={payload}&s={self._sign(payload)}; {attrs}" + ("; Secure" if secure else "")

    def derive(self, purpose: str, value: str) -> str:
        """A secret bound to one cookie value (the console's CSRF token): only this process
        can make it, and it dies with the cookie."""
        return self._sign(f"{purpose}|{value}")[:32]

    def user(self, value: str) -> str | None:
        """The user a cookie value vouches for, or None (forged, expired, malformed)."""
        payload, sep, sig = value.rpartition("&s=")
        # as bytes: compare_digest raises TypeError on non-ASCII text, and the cookie is
        # whatever the client sent
        if not sep or not hmac.compare_digest(self._sign(payload).encode(),
                                              sig.encode("utf-8", "replace")):
            return None
        fields = dict(p.partition("=")[::2] for p in payload.split("&"))
        try:
            if int(fields.get("e", "0")) < self._clock():
                return None
        except ValueError:
            return None
        return unquote(fields["cu"]) if "cu" in fields else None
