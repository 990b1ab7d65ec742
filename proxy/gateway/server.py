"""Asyncio accept loop: one owned task per client connection.

Per connection (proxy/gateway/connection.py): sniff the first bytes (SASL, NOSASL or HTTP),
log in, then hand each Thrift message to Frontend.handle, strictly one at a time. Client
disconnect closes its sessions upstream. The password check is here, shared by both
transports: one login pool, one throttle.

Before login a connection is cheap and short-lived: admission.py caps connections (in
total and per address) and failed logins; the whole login, from the first byte to the
password check, has one deadline (login_timeout; a TLS handshake before it has its own, of
the same length); the socket is paused while a small read buffer is full.

Shutdown: stop accepting -> wait for in-flight calls and running statements up to the grace
period -> close every session upstream -> cancel connection tasks.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
import ssl
import time
from concurrent.futures import ThreadPoolExecutor

from proxy.config import Settings
from proxy.gateway.admission import ConnectionLimits, LoginThrottle
from proxy.gateway.auth.base import AllowAll, Authenticator, AuthUnavailable
from proxy.gateway.auth.kerberos import Acceptor
from proxy.gateway.connection import ConnectionHandler
from proxy.hs2.connection import ClientConnection
from proxy.hs2.frontend import Frontend
from proxy.gateway.http_transport import HttpTransport
from proxy.http.wire import response as http_response
from proxy.logsafe import Sampler, safe
from proxy.routing.router import Router
from proxy.thrift import sasl

log = logging.getLogger("proxy.server")

# StreamReader pauses the socket once it buffers twice this, so a connection that has not
# logged in holds a few tens of KB here whatever it sends (reads are resumed as we consume).
_BUFFER = 1 << 14


def _held(n: int) -> str:
    return f" ({n} more since the last such line)" if n else ""


class ProxyServer:
    def __init__(self, settings: Settings, router: Router, service: Frontend | None = None,
                 authenticator: Authenticator | None = None, kerberos: Acceptor | None = None):
        self.settings = settings
        self.router = router
        self.service = service or Frontend(settings, router)
        self.authenticator = authenticator or AllowAll()
        # auth = kerberos: the keytab's service credentials (SASL GSSAPI here, SPNEGO on HTTP)
        if kerberos is None and settings.server.auth == "kerberos":
            kerberos = Acceptor(settings.server)
        self.kerberos = kerberos
        self._server: asyncio.base_events.Server | None = None
        self._conn_tasks: set[asyncio.Task] = set()
        self._ids = itertools.count(1)
        self._reaper: asyncio.Task | None = None
        self.address: tuple[str, int] | None = None
        s = settings.server
        self.limits = ConnectionLimits(s.max_connections, s.max_connections_per_address)
        self.throttle = LoginThrottle(s.max_login_failures, s.max_login_failures_per_address,
                                      s.login_failure_window)
        self._sampler = Sampler(interval=10.0)
        self._reconfigured = asyncio.Event()
        # scrypt takes 16 MB per check: a pool of its own bounds that memory under a guessing
        # flood and leaves the default executor to everyone else. The semaphore keeps the
        # queue in front of it (waiters leave at their login deadline) and makes a burst of
        # parallel guesses see each other's failures before hashing.
        self._auth_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="auth")
        self._auth_slots = asyncio.Semaphore(2)
        self.http = HttpTransport(self)
        self._http_server: asyncio.base_events.Server | None = None
        self.connections = ConnectionHandler(self)
        self.http_address: tuple[str, int] | None = None

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

    async def _listen(self, accept, port: int) -> asyncio.base_events.Server:
        s = self.settings.server
        return await asyncio.start_server(
            accept, s.host, port, ssl=self._ssl_context(), limit=_BUFFER,
            ssl_handshake_timeout=s.login_timeout if (s.tls_cert and s.tls_key) else None)

    async def start(self) -> tuple[str, int]:
        s = self.settings.server
        self._server = await self._listen(self._accept, s.port)
        sock = self._server.sockets[0].getsockname()
        self.address = (sock[0], sock[1])
        if s.http_port is not None:
            self._http_server = await self._listen(
                lambda r, w: self._accept(r, w, http=True), s.http_port)
            sock = self._http_server.sockets[0].getsockname()
            self.http_address = (sock[0], sock[1])
            log.info("HTTP transport on %s:%d, path /%s%s", sock[0], sock[1],
                     s.http_path.strip("/"), " (TLS)" if s.tls_cert else "")
        self._reaper = asyncio.create_task(self._reap_loop(), name="idle-reaper")
        return self.address

    async def shutdown(self, grace: float | None = None) -> None:
        grace = self.settings.server.shutdown_grace if grace is None else grace
        for srv in (self._server, self._http_server):
            if srv is not None:
                srv.close()               # stop accepting
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
        self._auth_pool.shutdown(wait=False, cancel_futures=True)
        for srv in (self._server, self._http_server):
            if srv is None:
                continue
            try:
                await asyncio.wait_for(srv.wait_closed(), 5.0)
            except asyncio.TimeoutError:
                pass

    def reconfigured(self) -> None:
        """New settings are in place (SIGHUP, proxy/gateway/reload.py): the reaper's pace
        follows."""
        self._reconfigured.set()

    async def _reap_loop(self) -> None:
        while True:
            s = self.settings.server
            timeouts = [t for t in (s.idle_session_timeout, s.idle_operation_timeout) if t and t > 0]
            try:
                async with asyncio.timeout(max(0.5, min(60.0, min(timeouts) / 4))
                                           if timeouts else None):
                    await self._reconfigured.wait()
                self._reconfigured.clear()
                continue                       # new timeouts: a new pace
            except TimeoutError:
                pass
            try:
                await self.service.reap_idle()
            except Exception:  # noqa: BLE001 - keep reaping
                log.exception("idle reaper failed")

    # ------------------------------------------------------------------ connections

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                      http: bool = False) -> None:
        peer = writer.get_extra_info("peername")
        address = str(peer[0]) if peer else "?"
        refused = self.limits.admit(address)
        if refused is not None:
            self._refuse(address, refused, writer, http)
            return
        task = asyncio.current_task()
        n = next(self._ids)
        if task is not None:
            task.set_name(f"conn-{n}")
            self._conn_tasks.add(task)
        peer_s = f"{peer[0]}:{peer[1]}" if peer else "?"
        conn = ClientConnection(peer=peer_s)
        observers = self.service.observers
        observers.connection("open", "http" if http else "binary")
        try:
            await self.connections.serve(conn, address, reader, writer, http)
        except asyncio.CancelledError:
            pass
        except (ConnectionError, asyncio.IncompleteReadError):
            log.debug("connection %s reset", peer_s)
        except Exception:  # noqa: BLE001 - one connection never takes the server down
            log.exception("connection %s failed", peer_s)
        finally:
            observers.connection("close", "http" if http else "binary")
            self.limits.release(address)
            try:
                await asyncio.shield(self.service.session_manager.connection_closed(conn))
            except asyncio.CancelledError:
                pass          # shutdown: close_all() owns the remaining sessions
            except Exception:  # noqa: BLE001
                log.exception("cleaning up connection %s", peer_s)
            writer.close()
            if task is not None:
                self._conn_tasks.discard(task)

    def _refuse(self, address: str, reason: str, writer: asyncio.StreamWriter,
                http: bool = False) -> None:
        """Close at once, before reading a byte. A SASL client shows the BAD message as
        "Peer indicated failure: ..." (best effort: it may see a reset instead)."""
        held = self._sampler.take(reason)
        if held is not None:
            log.warning("refusing connection from %s: %s%s", address, reason, _held(held))
        if http:
            writer.write(http_response(503, f"Refused: {reason}\n".encode(), close=True))
        elif self.settings.server.auth != "nosasl":
            writer.write(sasl.encode_negotiation(sasl.BAD, f"Refused: {reason}".encode()))
        writer.close()

    async def auth_call(self, fn, *args):
        """fn(*args) in the login pool: a flood of logins (passwords, Kerberos tokens, on
        either transport) queues here instead of taking the default executor."""
        async with self._auth_slots:
            return await asyncio.get_running_loop().run_in_executor(self._auth_pool, fn, *args)

    async def _authenticate(self, conn, address: str, user: str, password: str) -> str | None:
        """None when `user` may log in, else the reason told to the client."""
        async with self._auth_slots:
            return await self._authenticate_now(conn, address, user, password)

    async def _authenticate_now(self, conn, address: str, user: str, password: str) -> str | None:
        lock = self.throttle.check(user, address)
        if lock is not None:           # refused before hashing: a locked flood costs nothing
            held = self._sampler.take(("locked", lock.what))
            if held is not None:
                log.warning("connection %s: login as %s refused: %s%s", conn.peer, safe(user),
                            safe(lock.message()), _held(held))
            return lock.message()
        loop = asyncio.get_running_loop()
        try:
            reason = await loop.run_in_executor(self._auth_pool, self.authenticator.check, user,
                                                password)
        except AuthUnavailable as e:     # not the user's fault: no lockout, a 08S01 message
            held = self._sampler.take(("auth-unavailable", str(e)))
            if held is not None:
                log.error("connection %s: cannot check the password of %s: %s%s", conn.peer,
                          safe(user), safe(e, 500), _held(held))
            return f"08S01: authentication service unavailable: {e.public} (see the server log)"
        if reason is None:
            self.throttle.succeeded(user)
            return None
        log.warning("connection %s: authentication failed for user %s", conn.peer, safe(user))
        for lock in self.throttle.failed(user, address):
            log.warning("connection %s: too many failed logins for %s; further logins refused "
                        "for %.0fs", conn.peer, safe(lock.what), lock.retry_after)
        return reason
