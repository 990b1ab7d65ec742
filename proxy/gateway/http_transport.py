"""HiveServer2's http transport (`transportMode=http`): one strict TBinaryProtocol call in
the body of each POST to `/<http_path>`, its reply in the 200 response, answered by the
same Frontend.handle as the binary port.

A connection carries any number of requests (keep-alive). Each request is authenticated
on its own: a valid `hive.server2.auth` cookie, else `Authorization: Basic` checked by the
binary port's authenticator and login throttle (ProxyServer._authenticate), else
`Negotiate` (SPNEGO) under auth=kerberos; a success without a cookie gets a new one.
Because a request may arrive on any TCP connection, sessions are not tied to one: each
request is served as its own ClientConnection, and closing the socket closes no session
(idle timeouts and CloseSession do, as in HiveServer2's http mode).

Limits as on the binary port: until the first request is authenticated, the login
deadline and a cap on the request head apply; the body length is checked against
max_frame_bytes on the declared Content-Length before any of it is read (413). A request
the proxy cannot serve gets a clear status and a closed connection, never more.
"""
from __future__ import annotations

import asyncio
import base64
import logging
from typing import TYPE_CHECKING, Protocol

from proxy.http import wire as hw
from proxy.http.listener import read_head
from proxy.logsafe import safe
from proxy.hs2.connection import ClientConnection
from proxy.hs2.frontend import Frontend
from proxy.thrift import codec

if TYPE_CHECKING:
    from proxy.config import Settings

log = logging.getLogger("proxy.http")

_READ = 1 << 16
# SPNEGO tokens carrying a Windows PAC run past 8 KiB, so the head cap never goes below this.
_MIN_HEAD = 16384
# a refused request body up to this size is read before the error reply (see _discard_body)
_DISCARD = 1 << 20
_ONE_WRITE = 1 << 16
_NO_CREDENTIALS = "Authentication Error: Authorization header received from the client is empty."


class TransportOwner(Protocol):
    """What the transport uses of its ProxyServer (proxy/gateway/server.py, which imports this
    module): the settings, the service, the binary port's login check and login pool."""
    settings: Settings
    service: Frontend

    async def _authenticate(self, conn, address: str, user: str,
                            password: str) -> str | None: ...

    async def auth_call(self, fn, *args): ...


class HttpTransport:
    """Serves HTTP connections for one ProxyServer (its service, authenticator, throttle,
    settings and, under auth=kerberos, its SPNEGO acceptor)."""

    def __init__(self, server: TransportOwner):
        self.server = server
        s = server.settings.server
        self.path = "/" + s.http_path.strip("/")
        self.head_limit = max(s.max_negotiation_bytes, _MIN_HEAD)
        self.cookies = hw.CookieSigner(s.http_cookie_max_age) if s.http_cookie_max_age > 0 else None

    async def serve(self, conn: ClientConnection, address: str, reader, writer,
                    buf: bytearray, deadline: float) -> None:
        """Requests until the client closes, asks to close, idles out, or errs. `buf`
        holds the bytes already read; `deadline` (loop time) bounds the first request's
        head and authentication."""
        secure = writer.get_extra_info("ssl_object") is not None
        limit = self.server.settings.server.max_frame_bytes
        first = True
        while True:
            req = None
            try:
                if first:
                    async with asyncio.timeout_at(deadline):
                        req = await self._read_head(reader, buf)
                        if req is None:
                            return
                        user, password, extra = await self._login(conn, address, req, secure)
                else:
                    req = await self._next_head(conn, reader, buf)
                    if req is None:
                        return
                    user, password, extra = await self._login(conn, address, req, secure)
                first = False
                n = req.content_length(limit)
                if len(buf) < n and req.headers.get("expect", "").lower() == "100-continue":
                    # credentials and size are fine: the client may send the body now
                    writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                while len(buf) < n:
                    chunk = await reader.read(_READ)
                    if not chunk:
                        return
                    buf += chunk
                with memoryview(buf) as view:
                    body = bytes(view[:n])        # one copy, even of a 100 MB call
                del buf[:n]
            except TimeoutError:
                log.info("connection %s (HTTP): no authenticated request within %.0fs "
                         "(server.login_timeout); closing", conn.peer,
                         self.server.settings.server.login_timeout)
                return
            except hw.HttpError as e:
                if req is not None:
                    await self._discard_body(req, reader, buf)
                await self._fail(conn, writer, e)
                return
            if not await self._answer(conn, writer, req, body, user, password, extra):
                return

    async def _discard_body(self, req: hw.Request, reader, buf: bytearray) -> None:
        """Read a small refused request's body first: closing a socket with unread bytes
        sends a reset, which can destroy the error reply before the client reads it. A
        client that asked for `100 Continue` (not sent: refused) holds its body back."""
        if req.headers.get("expect", "").lower() == "100-continue":
            return
        try:
            n = req.content_length(_DISCARD)
        except hw.HttpError:
            return
        try:
            async with asyncio.timeout(5.0):
                while len(buf) < n:
                    chunk = await reader.read(_READ)
                    if not chunk:
                        return
                    buf += chunk
        except (TimeoutError, ConnectionError):
            return

    async def _next_head(self, conn, reader, buf) -> hw.Request | None:
        """The next request head of a keep-alive connection, or None when it closes or has
        been idle for idle_connection_timeout."""
        idle = self.server.settings.server.idle_connection_timeout
        try:
            async with asyncio.timeout(idle if idle > 0 else None):
                return await self._read_head(reader, buf)
        except TimeoutError:
            log.debug("connection %s (HTTP) idle for %.0fs; closing", conn.peer, idle)
            return None

    async def _read_head(self, reader, buf: bytearray) -> hw.Request | None:
        return await read_head(reader, buf, self.head_limit)

    async def _login(self, conn, address: str, req: hw.Request, secure: bool):
        """(user, password, response headers) of an acceptable request; HttpError for what
        the client must be told instead."""
        user, password, extra, how = await self._authorise(conn, address, req, secure)
        if log.isEnabledFor(logging.DEBUG):   # shows which requests cost a password check
            log.debug("connection %s (HTTP): user %s by %s", conn.peer, safe(user), how)
        return user, password, extra

    async def _authorise(self, conn, address: str, req: hw.Request, secure: bool):
        if req.method != "POST":
            raise hw.HttpError(405, f"{req.method} is not served here: HiveServer2 over HTTP "
                                    f"POSTs Thrift calls to {self.path}", {"Allow": "POST"})
        if req.path.rstrip("/") != self.path and not req.path.startswith(self.path + "/"):
            raise hw.HttpError(404, f"no Thrift endpoint at {req.path[:100]}: the path is "
                                    f"{self.path} (server.http_path; JDBC httpPath=)")
        if self.cookies is not None:
            for value in hw.cookie_value(req.headers.get("cookie", ""), hw.COOKIE_NAME):
                user = self.cookies.user(value)
                if user is not None:
                    return user, "", {}, "cookie"
        authz = req.headers.get("authorization", "")
        scheme = hw.auth_scheme(authz)
        s = self.server.settings.server
        if s.auth == "kerberos":
            if scheme != "negotiate":
                raise hw.HttpError(401, _NO_CREDENTIALS if not authz else
                                   "Authentication Error: Kerberos (SPNEGO) authentication "
                                   "needed", {"WWW-Authenticate": "Negotiate"})
            user, extra = await self._negotiate(conn, authz)
            return user, "", {**extra, **self._cookie(user, secure)}, "SPNEGO"
        if scheme != "basic":
            if s.auth == "nosasl" and not authz:
                return "anonymous", "", {}, "nosasl"
            # a scheme is named only when the header has one: a lone word may be the
            # credential itself (a raw token), which must reach neither log nor reply
            named = scheme if len(authz.split(None, 1)) == 2 and len(scheme) <= 20 else "this"
            raise hw.HttpError(401, _NO_CREDENTIALS if not authz else
                               f"Authentication Error: {named} authorization is not "
                               "accepted; send Basic credentials", _challenge())
        user, password = hw.basic_credentials(authz)
        if s.auth == "nosasl":            # HS2's NOSASL http: the name, unchecked
            return user or "anonymous", password, {}, "nosasl"
        if not user:                      # as SASL PLAIN: nobody to open sessions as
            raise hw.HttpError(401, "Authentication Error: empty user name", _challenge())
        reason = await self.server._authenticate(conn, address, user, password)
        if reason is not None:
            raise hw.HttpError(401, f"Authentication Error: {reason}", _challenge())
        return user, password, self._cookie(user, secure), "password"

    async def _negotiate(self, conn, authz: str) -> tuple[str, dict[str, str]]:
        acceptor = getattr(self.server, "kerberos", None)
        if acceptor is None:
            raise hw.HttpError(401, "Authentication Error: Kerberos is not set up on this "
                                    "server", {"WWW-Authenticate": "Negotiate"})
        try:
            # Hive JDBC writes "Negotiate : <token>" (its own separator), others "Negotiate <token>"
            token = base64.b64decode(authz.split(None, 1)[1].strip().removeprefix(":").strip(),
                                     validate=True)
        except (IndexError, ValueError):
            raise hw.HttpError(401, "Authentication Error: malformed Negotiate token",
                               {"WWW-Authenticate": "Negotiate"}) from None
        try:
            user, out = await self.server.auth_call(acceptor.spnego, token)
        except Exception as e:  # noqa: BLE001 - kerberos.KerberosError and kin: tell, close
            log.warning("connection %s (HTTP): SPNEGO failed: %s", conn.peer, safe(e))
            raise hw.HttpError(401, f"Authentication Error: Kerberos: {e}",
                               {"WWW-Authenticate": "Negotiate"}) from None
        if user is None:
            challenge = "Negotiate" + (f" {base64.b64encode(out).decode()}" if out else "")
            raise hw.HttpError(401, "Authentication Error: SPNEGO needs another round",
                               {"WWW-Authenticate": challenge})
        # the acceptor's last token lets the client authenticate the server (mutual auth)
        return user, ({"WWW-Authenticate": f"Negotiate {base64.b64encode(out).decode()}"}
                      if out else {})

    def _cookie(self, user: str, secure: bool) -> dict[str, str]:
        return {"Set-Cookie": self.cookies.issue(user, secure)} if self.cookies is not None else {}

    async def _answer(self, conn, writer, req: hw.Request, body: bytes, user: str,
                      password: str, extra: dict[str, str]) -> bool:
        """Serve one Thrift call; False when the connection must close."""
        call = ClientConnection(peer=conn.peer, sasl_user=user, sasl_password=password)
        try:
            reply = await self.server.service.handle(call, body)
        except codec.ProtocolError as e:
            log.warning("connection %s (HTTP, user %s): %s; closing", conn.peer, safe(user), safe(e))
            await self._fail(conn, writer, hw.HttpError(400, f"not a Thrift call: {e}"))
            return False
        headers = {"Content-Length": str(len(reply)), **extra}
        close = not req.keep_alive
        head = hw.response(200, content_type="application/x-thrift", headers=headers, close=close)
        if len(reply) < _ONE_WRITE:
            # one send: a second one costs a system call and, on loopback, a wake-up of
            # the client, as much as the rest of the HTTP handling together (profiled)
            writer.write(head + reply)
        else:
            writer.write(head)
            writer.write(reply)                   # no copy of big replies
        await writer.drain()
        return not close

    async def _fail(self, conn, writer, e: hw.HttpError) -> None:
        if e.status >= 500 or e.status in (400, 411, 413, 431):
            log.warning("connection %s (HTTP): %d %s; closing", conn.peer, e.status, safe(e.message))
        else:
            log.info("connection %s (HTTP): %d %s", conn.peer, e.status, safe(e.message))
        writer.write(hw.response(e.status, e.message.encode() + b"\n", headers=e.headers,
                                 close=True))
        try:
            await writer.drain()
        except ConnectionError:
            pass


def _challenge() -> dict[str, str]:
    return {"WWW-Authenticate": 'Basic realm="datamap-proxy"'}
