"""Asyncio accept loop: one owned task per client connection.

Per connection: sniff the first byte (1 = SASL START, 0x80/0x00 = raw Thrift = NOSASL),
negotiate SASL PLAIN (or not), then cut the byte stream into Thrift messages and hand each
to Service.handle, strictly one at a time. A connection that closes without a byte is a
health probe (logged at debug). Malformed or oversized input closes that connection with a
log line, never the server. Client disconnect closes its sessions upstream.

Shutdown: stop accepting -> wait for in-flight calls and running statements up to the grace
period -> close every session upstream -> cancel connection tasks.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
import ssl
import struct
import time

from proxy.auth import AllowAll, Authenticator
from proxy.config import Settings
from proxy.router import Router
from proxy.service import ClientConnection, Service
from proxy.thrift import codec, sasl

log = logging.getLogger("proxy.server")

_READ = 1 << 16


class ProxyServer:
    def __init__(self, settings: Settings, router: Router, service: Service | None = None,
                 authenticator: Authenticator | None = None):
        self.settings = settings
        self.router = router
        self.service = service or Service(settings, router)
        self.authenticator = authenticator or AllowAll()
        self._server: asyncio.base_events.Server | None = None
        self._conn_tasks: set[asyncio.Task] = set()
        self._ids = itertools.count(1)
        self._reaper: asyncio.Task | None = None
        self.address: tuple[str, int] | None = None

    # ------------------------------------------------------------------ lifecycle

    def _ssl_context(self) -> ssl.SSLContext | None:
        s = self.settings.server
        if not s.tls_cert and not s.tls_key:
            return None
        if not (s.tls_cert and s.tls_key):
            raise ValueError("TLS needs both tls_cert and tls_key")
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(s.tls_cert, s.tls_key)
        return ctx

    async def start(self) -> tuple[str, int]:
        s = self.settings.server
        self._server = await asyncio.start_server(
            self._accept, s.host, s.port, ssl=self._ssl_context(), limit=_READ,
            ssl_handshake_timeout=s.login_timeout if (s.tls_cert and s.tls_key) else None)
        sock = self._server.sockets[0].getsockname()
        self.address = (sock[0], sock[1])
        self._reaper = asyncio.create_task(self._reap_loop(), name="idle-reaper")
        return self.address

    async def shutdown(self, grace: float | None = None) -> None:
        grace = self.settings.server.shutdown_grace if grace is None else grace
        if self._server is not None:
            self._server.close()          # stop accepting
        deadline = time.monotonic() + grace
        while self.service.busy() and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        if self.service.busy():
            log.warning("shutdown grace period (%.0fs) over with %d calls in flight", grace,
                        self.service.inflight)
        if self._reaper is not None:
            self._reaper.cancel()
        await self.service.close_all("shutdown")
        for t in list(self._conn_tasks):
            t.cancel()
        if self._conn_tasks:
            await asyncio.wait(self._conn_tasks, timeout=5.0)
        if self._server is not None:
            try:
                await asyncio.wait_for(self._server.wait_closed(), 5.0)
            except asyncio.TimeoutError:
                pass

    async def _reap_loop(self) -> None:
        s = self.settings.server
        timeouts = [t for t in (s.idle_session_timeout, s.idle_operation_timeout) if t and t > 0]
        if not timeouts:
            return
        interval = max(0.5, min(60.0, min(timeouts) / 4))
        while True:
            await asyncio.sleep(interval)
            try:
                await self.service.reap_idle()
            except Exception:  # noqa: BLE001 - keep reaping
                log.exception("idle reaper failed")

    # ------------------------------------------------------------------ connections

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        n = next(self._ids)
        if task is not None:
            task.set_name(f"conn-{n}")
            self._conn_tasks.add(task)
        peer = writer.get_extra_info("peername")
        peer_s = f"{peer[0]}:{peer[1]}" if peer else "?"
        conn = ClientConnection(peer=peer_s)
        try:
            await self._serve(conn, reader, writer)
        except asyncio.CancelledError:
            pass
        except (ConnectionError, asyncio.IncompleteReadError):
            log.debug("connection %s reset", peer_s)
        except Exception:  # noqa: BLE001 - one connection never takes the server down
            log.exception("connection %s failed", peer_s)
        finally:
            try:
                await asyncio.shield(self.service.connection_closed(conn))
            except asyncio.CancelledError:
                pass          # shutdown: close_all() owns the remaining sessions
            except Exception:  # noqa: BLE001
                log.exception("cleaning up connection %s", peer_s)
            writer.close()
            if task is not None:
                self._conn_tasks.discard(task)

    async def _serve(self, conn: ClientConnection, reader, writer) -> None:
        s = self.settings.server
        try:
            first = await asyncio.wait_for(reader.read(_READ), s.login_timeout)
        except asyncio.TimeoutError:
            log.info("connection %s sent nothing within %.0fs; closing", conn.peer, s.login_timeout)
            return
        if not first:
            log.debug("connection %s closed without data (health probe)", conn.peer)
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
            await self._reject_raw(conn, reader, writer, bytearray(first))
            return
        if not looks_sasl:
            log.warning("connection %s sent first byte 0x%02x: neither SASL nor Thrift "
                        "(HTTP or TLS to a plain binary port?); closing", conn.peer, b0)
            return
        buf = await self._negotiate(conn, reader, writer, bytearray(first))
        if buf is None:
            return
        await self._serve_sasl(conn, reader, writer, buf)

    async def _reject_raw(self, conn, reader, writer, buf: bytearray) -> None:
        """Tell a NOSASL client why, in a form it can display (a TApplicationException)."""
        try:
            n = codec.message_length(buf, self.settings.server.max_frame_bytes)
            while n is None:
                chunk = await asyncio.wait_for(reader.read(_READ), 5.0)
                if not chunk:
                    return
                buf += chunk
                n = codec.message_length(buf, self.settings.server.max_frame_bytes)
            name, _, seqid = codec.decode_header(bytes(buf[:n]))
            writer.write(codec.application_exception(
                name, seqid, "This server requires SASL (auth=none); connect without auth=noSasl",
                7))
            await writer.drain()
        except (codec.ProtocolError, asyncio.TimeoutError, ConnectionError):
            return

    async def _negotiate(self, conn, reader, writer, buf: bytearray) -> bytearray | None:
        s = self.settings.server
        neg = sasl.PlainServer()
        deadline = time.monotonic() + s.login_timeout
        while neg.state is not sasl.NegState.COMPLETE:
            try:
                got = sasl.decode_negotiation(buf, s.max_frame_bytes)
            except sasl.SaslError as e:
                log.warning("connection %s: SASL negotiation failed: %s; closing", conn.peer, e)
                return None
            if got is None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    log.warning("connection %s: SASL negotiation timed out; closing", conn.peer)
                    return None
                try:
                    chunk = await asyncio.wait_for(reader.read(_READ), remaining)
                except asyncio.TimeoutError:
                    log.warning("connection %s: SASL negotiation timed out; closing", conn.peer)
                    return None
                if not chunk:
                    log.debug("connection %s closed during SASL negotiation", conn.peer)
                    return None
                buf += chunk
                continue
            status, payload, used = got
            del buf[:used]
            step = neg.on_message(status, payload)
            if step.error:
                log.warning("connection %s: SASL negotiation failed: %s; closing", conn.peer, step.error)
                writer.write(step.reply)
                await writer.drain()
                return None
            if step.reply:
                writer.write(step.reply)
            if step.credentials is not None:
                cred = step.credentials
                reason = await asyncio.to_thread(self.authenticator.check, cred.user, cred.password)
                if reason is not None:
                    log.warning("connection %s: authentication failed for user %s", conn.peer, cred.user)
                    writer.write(neg.reject(reason))
                    await writer.drain()
                    return None
                writer.write(neg.accept(cred.user))
                conn.sasl_user, conn.sasl_password = cred.user, cred.password
            await writer.drain()
        return buf

    async def _serve_sasl(self, conn, reader, writer, buf: bytearray) -> None:
        max_bytes = self.settings.server.max_frame_bytes
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
                    reply = await self.service.handle(conn, msg)
                    writer.write(struct.pack("!I", len(reply)))   # no copy of big replies
                    writer.write(reply)
                    await writer.drain()
            except (sasl.SaslError, codec.ProtocolError) as e:
                log.warning("connection %s (user %s): %s; closing", conn.peer, conn.sasl_user, e)
                return
            pending = await reader.read(_READ)
            if not pending:
                return

    async def _serve_raw(self, conn, reader, writer, buf: bytearray) -> None:
        max_bytes = self.settings.server.max_frame_bytes
        while True:
            try:
                while buf:
                    n = codec.message_length(buf, max_bytes)
                    if n is None:
                        break
                    msg = bytes(buf[:n])
                    del buf[:n]
                    writer.write(await self.service.handle(conn, msg))
                    await writer.drain()
            except codec.ProtocolError as e:
                log.warning("connection %s (NOSASL): %s; closing", conn.peer, e)
                return
            chunk = await reader.read(_READ)
            if not chunk:
                return
            buf += chunk
