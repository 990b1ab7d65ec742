"""The metrics endpoint: `GET [metrics] path` on `[metrics] host`:`port` (docs/metrics.md).

A few lines of HTTP/1.1 on the proxy's event loop (request heads parsed by
proxy/http/wire.py); the text itself is produced in a worker thread of its own, since the
scrape-time collector reads the catalog and stats segment files. Any other path is a 404,
any other method a 405. No login: like Prometheus' own exporters, bind it to an address
only the scraper reaches.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from prometheus_client import CONTENT_TYPE_LATEST

from proxy.config import ConfigError, Settings
from proxy.http.listener import stop_listener
from proxy.http.wire import HttpError, parse_head, response
from proxy.observability.metrics.registry import Metrics

log = logging.getLogger("proxy.metrics")
HEAD_LIMIT = 8192
IDLE_TIMEOUT_S = 60.0        # a keep-alive connection with no request for this long: closed
MAX_CONNECTIONS = 32         # scrapers are few; more is someone else


class MetricsStartError(ConfigError):
    """The endpoint cannot listen; the message names the setting (serve exits 2)."""


async def start_metrics(settings: Settings) -> tuple[Metrics | None, MetricsEndpoint | None]:
    """The Metrics and its listening endpoint, or (None, None) without `[metrics] port`."""
    m = settings.metrics
    if m.port is None:
        return None, None
    metrics = Metrics()
    endpoint = MetricsEndpoint(metrics.render, m.host or settings.server.host, m.port, m.path)
    await endpoint.start()
    return metrics, endpoint


class MetricsEndpoint:
    def __init__(self, render: Callable[[], bytes], host: str, port: int,
                 path: str = "/metrics"):
        self.render = render
        self.host, self.port = host, port
        self.path = "/" + path.lstrip("/")
        self.address: tuple[str, int] | None = None
        self._server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task] = set()
        self._ids = itertools.count(1)
        # one thread: scrapes run one after the other, never on the default executor
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="metrics-scrape")

    async def start(self) -> tuple[str, int]:
        try:
            self._server = await asyncio.start_server(self._accept, self.host, self.port,
                                                      limit=HEAD_LIMIT)
        except OSError as e:
            self._pool.shutdown(wait=False)
            raise MetricsStartError(
                f"cannot listen on [metrics] port {self.port} (host {self.host}): "
                f"{e.strerror or e}") from None
        sock = self._server.sockets[0].getsockname()
        self.address = (sock[0], sock[1])
        log.info("metrics on http://%s:%d%s", sock[0], sock[1], self.path)
        return self.address

    async def close(self) -> None:
        await stop_listener(self._server, self._tasks)
        await asyncio.to_thread(self._pool.shutdown, True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            task.set_name(f"metrics-conn-{next(self._ids)}")
            self._tasks.add(task)
        try:
            if len(self._tasks) > MAX_CONNECTIONS:
                writer.write(response(503, b"too many connections\n", close=True))
            else:
                await self._serve(reader, writer)
            await writer.drain()
        except (ConnectionError, asyncio.TimeoutError, asyncio.IncompleteReadError):
            pass
        finally:
            self._tasks.discard(task)
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                head = await asyncio.wait_for(self._read_head(reader), IDLE_TIMEOUT_S)
                if head is None:
                    return
                req = parse_head(head)
            except HttpError as e:
                writer.write(response(e.status, f"{e.message}\n".encode(), close=True))
                return
            # a body is never read: the connection ends after a request that has one
            keep = req.keep_alive and req.headers.get("content-length", "0") == "0" \
                and "transfer-encoding" not in req.headers
            if req.method not in ("GET", "HEAD"):
                writer.write(response(405, b"only GET\n", headers={"Allow": "GET, HEAD"},
                                      close=True))
                return
            if req.path != self.path:
                writer.write(response(404, f"not found; metrics are at {self.path}\n"
                                      .encode(), close=not keep))
            else:
                try:
                    body = await loop.run_in_executor(self._pool, self.render)
                except Exception:  # noqa: BLE001 - a broken collector fails this scrape only
                    log.exception("metrics: the scrape failed")
                    writer.write(response(500, b"the scrape failed: see the proxy's log\n",
                                          close=True))
                    return
                if req.method == "HEAD":
                    writer.write(response(200, content_type=CONTENT_TYPE_LATEST,
                                          headers={"Content-Length": str(len(body))},
                                          close=not keep))
                else:
                    writer.write(response(200, body, content_type=CONTENT_TYPE_LATEST,
                                          close=not keep))
            await writer.drain()
            if not keep:
                return

    @staticmethod
    async def _read_head(reader: asyncio.StreamReader) -> bytes | None:
        """One request head; None at a clean end of the connection."""
        try:
            return await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as e:
            if e.partial:
                raise HttpError(400, "connection ended inside the request head") from None
            return None
        except asyncio.LimitOverrunError:
            raise HttpError(431, f"request head over {HEAD_LIMIT} bytes") from None
