"""The console's HTTP/1.1 listener: asyncio streams, request heads parsed by
proxy/http/wire.py, TLS with the proxy's [server] tls_cert / tls_key, keep-alive. Every
connection is a named task the server owns and cancels at close.

Limits suit a few operators' browsers, not a public site: a request head of at most
16 KiB within HEAD_TIMEOUT_S, a form body of at most BODY_LIMIT, and at most
MAX_CONNECTIONS at once (more are closed at accept)."""
from __future__ import annotations

import asyncio
import ipaddress
import itertools
import logging

from proxy.http import wire as hw
from proxy.console.routes import HEADERS, ConsoleApp, Reply, html
from proxy.console import pages
from proxy.http.listener import read_head, stop_listener
from proxy.logsafe import safe

log = logging.getLogger("proxy.console")

HEAD_LIMIT = 16384
BODY_LIMIT = 65536
HEAD_TIMEOUT_S = 30.0
IDLE_TIMEOUT_S = 60.0
MAX_CONNECTIONS = 64
_READ = 1 << 16


class ConsoleRefused(Exception):
    """The console must not start with these settings (serve exits 2)."""


def console_host(settings) -> str:
    return settings.console.host or settings.server.host


def check(settings) -> None:
    """Refuse a console that would listen beyond loopback unless allow_remote says so."""
    c = settings.console
    if c.port is None or c.allow_remote:
        return
    host = console_host(settings)
    if not _loopback(host):
        raise ConsoleRefused(
            f"the web console would listen on {host or 'every address'}, not a loopback "
            "address: set [console] allow_remote = true (DATAMAP_PROXY_CONSOLE_ALLOW_REMOTE) "
            "to allow that, or [console] host = 127.0.0.1")


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False          # "", 0.0.0.0 and names: assume reachable from elsewhere


class ConsoleServer:
    def __init__(self, settings, app: ConsoleApp, ssl_context=None):
        self.settings = settings
        self.app = app
        self.ssl = ssl_context
        self.address: tuple[str, int] | None = None
        self._server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task] = set()
        self._ids = itertools.count(1)

    async def start(self) -> tuple[str, int]:
        check(self.settings)
        self._server = await asyncio.start_server(
            self._accept, console_host(self.settings), self.settings.console.port, ssl=self.ssl,
            ssl_handshake_timeout=HEAD_TIMEOUT_S if self.ssl else None)
        sock = self._server.sockets[0].getsockname()
        self.address = (sock[0], sock[1])
        log.info("web console on http%s://%s:%d/", "s" if self.ssl else "", *self.address)
        return self.address

    async def close(self) -> None:
        await stop_listener(self._server, self._tasks)
        await asyncio.to_thread(self.app.close)

    async def _accept(self, reader, writer) -> None:
        task = asyncio.current_task()
        if task is not None:
            task.set_name(f"console-conn-{next(self._ids)}")
            self._tasks.add(task)
        peer = writer.get_extra_info("peername")
        peer_s = f"{peer[0]}:{peer[1]}" if peer else "?"
        try:
            if len(self._tasks) > MAX_CONNECTIONS:
                return
            await self._serve(reader, writer, peer_s)
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError):
            pass
        except asyncio.CancelledError:
            pass             # close() cancels: the connection ends here, quietly
        except Exception:  # noqa: BLE001 - one connection never takes the console down
            log.exception("console connection %s failed", peer_s)
        finally:
            self._tasks.discard(task)
            writer.close()

    async def _serve(self, reader, writer, peer: str) -> None:
        secure = writer.get_extra_info("ssl_object") is not None
        buf = bytearray()
        timeout = HEAD_TIMEOUT_S
        while True:
            req = None
            try:
                async with asyncio.timeout(timeout):
                    req = await read_head(reader, buf, HEAD_LIMIT)
                if req is None:
                    return
                body = await self._body(req, reader, buf)
                reply = await self.app.handle(req, body, peer, secure)
            except hw.HttpError as e:
                await self._write(writer, html(e.status, pages.message("Bad request", e.message)),
                                  close=True, head_only=False)
                return
            except Exception:  # noqa: BLE001 - a page that failed: say so, keep serving others
                if req is None:
                    raise
                log.exception("console %s: %s failed", peer, safe(req.target))
                reply = html(500, pages.message("Internal error", "this page failed; the "
                                                "server log says why"))
            keep = req.keep_alive
            await self._write(writer, reply, close=not keep, head_only=req.method == "HEAD")
            if not keep:
                return
            timeout = IDLE_TIMEOUT_S

    async def _body(self, req: hw.Request, reader, buf: bytearray) -> bytes:
        if req.method != "POST":
            return b""
        try:
            n = req.content_length(BODY_LIMIT)
        except hw.HttpError as e:
            if e.status == 413:     # the message would name the Thrift port's limit
                raise hw.HttpError(413, f"a console form is at most {BODY_LIMIT} bytes") from None
            raise
        async with asyncio.timeout(HEAD_TIMEOUT_S):
            while len(buf) < n:
                chunk = await reader.read(_READ)
                if not chunk:
                    raise ConnectionError("closed inside the request body")
                buf += chunk
        body = bytes(buf[:n])
        del buf[:n]
        return body

    async def _write(self, writer, reply: Reply, *, close: bool, head_only: bool) -> None:
        headers = {**HEADERS, **reply.headers, "Content-Length": str(len(reply.body))}
        writer.write(hw.response(reply.status, b"" if head_only else reply.body,
                                 content_type="text/html; charset=utf-8", headers=headers,
                                 close=close))
        await writer.drain()
