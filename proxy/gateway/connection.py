"""One connection to the binary port (or the http port) after admission: what its first
bytes are, the login, then its Thrift messages.

Sniff the first byte (1 = SASL START, 0x80/0x00 = raw Thrift = NOSASL, an HTTP method =
proxy/gateway/http_transport.py, also what the http_port serves), negotiate SASL PLAIN (GSSAPI under
auth=kerberos; proxy/gateway/auth/kerberos.py) or not, then cut the byte stream into Thrift
messages and hand each to Frontend.handle, strictly one at a time. A connection that closes
without a byte is a health probe (logged at debug). Malformed or oversized input closes
that connection with a log line, never the server.

Before login: the whole login, from the first byte to the password check, has one deadline
(login_timeout); negotiation messages are capped at max_negotiation_bytes, checked on the
declared length before any body is buffered. A logged-in connection with no open session
is closed after idle_connection_timeout. The password check itself (login pool, throttle)
is the server's (`_authenticate`, `auth_call`), shared with the http transport.
"""
from __future__ import annotations

import asyncio
import logging
import struct
from typing import Protocol

from proxy.config import Settings
from proxy.gateway.auth.kerberos import MAX_TOKEN_BYTES, Acceptor
from proxy.hs2.connection import ClientConnection
from proxy.hs2.frontend import Frontend
from proxy.gateway.http_transport import HttpTransport
from proxy.http.wire import looks_like_http
from proxy.logsafe import safe
from proxy.thrift import codec, sasl

log = logging.getLogger("proxy.server")

_READ = 1 << 16
# Replies below this go out with their SASL frame header in one write (one send, one TCP
# segment); bigger ones are written in two, so that a result page is never copied.
_ONE_SEND = 1 << 16


class ConnectionOwner(Protocol):
    """What a connection uses of its ProxyServer (proxy/gateway/server.py, which imports this
    module): the settings, the service, the http transport, the Kerberos acceptor (or None),
    and the login check and login pool."""
    settings: Settings
    service: Frontend
    http: HttpTransport
    kerberos: Acceptor | None

    async def _authenticate(self, conn, address: str, user: str,
                            password: str) -> str | None: ...

    async def auth_call(self, fn, *args): ...


class ConnectionHandler:
    """Serves the connections of one ProxyServer, each from its first byte to its close."""

    def __init__(self, server: ConnectionOwner):
        self.server = server

    async def serve(self, conn: ClientConnection, address: str, reader, writer,
                    http: bool = False) -> None:
        s = self.server.settings.server
        # One deadline for the whole login, however the client paces its bytes.
        deadline = asyncio.get_running_loop().time() + s.login_timeout
        try:
            async with asyncio.timeout_at(deadline):
                first = await reader.read(_READ)
        except TimeoutError:
            log.info("connection %s sent nothing within %.0fs; closing", conn.peer, s.login_timeout)
            return
        if not first:
            log.debug("connection %s closed without data (health probe)", conn.peer)
            return
        if http or (s.http_on_binary_port and looks_like_http(first)):
            await self.server.http.serve(conn, address, reader, writer, bytearray(first), deadline)
            return
        b0 = first[0]
        looks_sasl = 1 <= b0 <= 5
        looks_raw = b0 in (0x80, 0x00)
        if s.auth == "nosasl":
            if looks_sasl:
                log.warning("connection %s started SASL negotiation but this server is NOSASL "
                            "(auth=nosasl): client must use auth=noSasl; closing", conn.peer)
                writer.write(sasl.encode_negotiation(
                    sasl.BAD, b"This server is configured for NOSASL (auth=noSasl); SASL is not accepted"))
                await writer.drain()
                return
            if not looks_raw:
                log.warning("connection %s sent first byte 0x%02x: not Thrift (HTTP? TLS?); closing",
                            conn.peer, b0)
                return
            await self._serve_raw(conn, reader, writer, bytearray(first))
            return
        if looks_raw:
            log.warning("connection %s sent a raw Thrift (NOSASL) message but this server expects "
                        "SASL (auth=%s): client must not use auth=noSasl; closing", conn.peer, s.auth)
            try:
                async with asyncio.timeout_at(deadline):
                    await self._reject_raw(conn, reader, writer, bytearray(first))
            except TimeoutError:
                pass
            return
        if not looks_sasl:
            log.warning("connection %s sent first byte 0x%02x: neither SASL nor Thrift "
                        "(HTTP or TLS to a plain binary port?); closing", conn.peer, b0)
            return
        try:
            async with asyncio.timeout_at(deadline):
                buf = await self._negotiate(conn, address, reader, writer, bytearray(first))
        except TimeoutError:
            log.warning("connection %s: SASL negotiation not finished within %.0fs "
                        "(server.login_timeout); closing", conn.peer, s.login_timeout)
            return
        if buf is None:
            return
        await self._serve_sasl(conn, reader, writer, buf)

    async def _reject_raw(self, conn, reader, writer, buf: bytearray) -> None:
        """Tell a NOSASL client why, in a form it can display (a TApplicationException)."""
        limit = self.server.settings.server.max_negotiation_bytes     # not logged in: keep it small
        try:
            n = codec.message_length(buf, limit)
            while n is None:
                chunk = await reader.read(_READ)
                if not chunk:
                    return
                buf += chunk
                n = codec.message_length(buf, limit)
            name, _, seqid = codec.decode_header(bytes(buf[:n]))
            writer.write(codec.application_exception(
                name, seqid, "This server requires SASL (auth=none); connect without auth=noSasl",
                7))
            await writer.drain()
        except (codec.ProtocolError, ConnectionError):
            return

    async def _negotiate(self, conn, address: str, reader, writer,
                         buf: bytearray) -> bytearray | None:
        """SASL PLAIN (GSSAPI under auth=kerberos) up to COMPLETE; the bytes after it
        (pipelined frames), or None when the connection must close. The caller bounds it
        with the login deadline."""
        if self.server.kerberos is not None:
            return await self._negotiate_gssapi(conn, reader, writer, buf)
        neg = sasl.PlainServer()
        while neg.state is not sasl.NegState.COMPLETE:
            got = await self._next_negotiation(conn, reader, buf)
            if got is None:
                return None
            step = neg.on_message(*got)
            if step.error:
                log.warning("connection %s: SASL negotiation failed: %s; closing", conn.peer,
                            safe(step.error))
                writer.write(step.reply)
                await writer.drain()
                return None
            if step.reply:
                writer.write(step.reply)
            if step.credentials is not None:
                cred = step.credentials
                reason = await self.server._authenticate(conn, address, cred.user, cred.password)
                if reason is not None:
                    writer.write(neg.reject(reason))
                    await writer.drain()
                    return None
                writer.write(neg.accept(cred.user))
                conn.sasl_user, conn.sasl_password = cred.user, cred.password
            await writer.drain()
        return buf

    async def _next_negotiation(self, conn, reader, buf: bytearray,
                                limit: int | None = None) -> tuple[int, bytes] | None:
        """(status, payload) of the next negotiation message, taken off `buf`; None when the
        connection must close."""
        limit = limit or self.server.settings.server.max_negotiation_bytes
        while True:
            try:
                got = sasl.decode_negotiation(buf, limit)
            except sasl.SaslError as e:
                log.warning("connection %s: SASL negotiation failed: %s; closing", conn.peer, e)
                return None
            if got is not None:
                del buf[:got[2]]
                return got[0], got[1]
            chunk = await reader.read(_READ)
            if not chunk:
                log.debug("connection %s closed during SASL negotiation", conn.peer)
                return None
            buf += chunk

    async def _negotiate_gssapi(self, conn, reader, writer, buf: bytearray) -> bytearray | None:
        """auth = kerberos: SASL GSSAPI up to COMPLETE (proxy/gateway/auth/kerberos.py has
        the exchange). Each step decrypts with the keytab: run it off the event loop."""
        neg = self.server.kerberos.sasl()
        # An Active Directory ticket carries the user's groups (Windows allows 48000-byte
        # tokens): a PLAIN-sized cap would lock those users out.
        limit = max(self.server.settings.server.max_negotiation_bytes, MAX_TOKEN_BYTES)
        while True:
            got = await self._next_negotiation(conn, reader, buf, limit)
            if got is None:
                return None
            step = await self.server.auth_call(neg.on_message, *got)
            writer.write(step.reply)
            await writer.drain()
            if step.error:
                log.warning("connection %s: Kerberos login failed: %s; closing", conn.peer,
                            safe(step.error))
                return None
            if step.user is not None:
                log.info("connection %s: Kerberos login as %s (principal %s)", conn.peer,
                         safe(step.user), safe(neg.principal))
                conn.sasl_user = step.user
                return buf

    async def _read_more(self, conn: ClientConnection, reader) -> bytes:
        """The next bytes from a logged-in client; b"" at EOF or when the connection has been
        idle without a session for idle_connection_timeout (it holds a socket and a slot of
        max_connections while giving Spark nothing to do)."""
        idle = self.server.settings.server.idle_connection_timeout
        if conn.sessions or idle <= 0:
            return await reader.read(_READ)
        try:
            async with asyncio.timeout(idle):
                return await reader.read(_READ)
        except TimeoutError:
            log.info("connection %s (user %s) idle without a session for %.0fs "
                     "(server.idle_connection_timeout); closing", conn.peer, safe(conn.sasl_user),
                     idle)
            return b""

    async def _serve_sasl(self, conn, reader, writer, buf: bytearray) -> None:
        max_bytes = self.server.settings.server.max_frame_bytes
        frames = sasl.FrameDecoder(max_bytes)
        stream = bytearray()
        pending = bytes(buf)
        while True:
            try:
                for payload in frames.feed(pending):
                    stream += payload
                while stream:
                    n = codec.message_length(stream, max_bytes)
                    if n is None:
                        break
                    msg = bytes(stream[:n])
                    del stream[:n]
                    reply = await self.server.service.handle(conn, msg)
                    if len(reply) < _ONE_SEND:    # one segment: a lone 4-byte one costs a send
                        writer.write(struct.pack("!I", len(reply)) + reply)
                    else:                         # no copy of big replies
                        writer.write(struct.pack("!I", len(reply)))
                        writer.write(reply)
                    await writer.drain()
            except (sasl.SaslError, codec.ProtocolError) as e:
                log.warning("connection %s (user %s): %s; closing", conn.peer, safe(conn.sasl_user),
                            safe(e))
                return
            pending = await self._read_more(conn, reader)
            if not pending:
                return

    async def _serve_raw(self, conn, reader, writer, buf: bytearray) -> None:
        max_bytes = self.server.settings.server.max_frame_bytes
        while True:
            try:
                while buf:
                    n = codec.message_length(buf, max_bytes)
                    if n is None:
                        break
                    msg = bytes(buf[:n])
                    del buf[:n]
                    writer.write(await self.server.service.handle(conn, msg))
                    await writer.drain()
            except codec.ProtocolError as e:
                log.warning("connection %s (NOSASL): %s; closing", conn.peer, safe(e))
                return
            chunk = await self._read_more(conn, reader)
            if not chunk:
                return
            buf += chunk
