"""The read loop and the stop of the proxy's small HTTP/1.1 listeners (the http transport's,
the console's, the metrics endpoint's): request heads read off a stream into a buffer."""
from __future__ import annotations

import asyncio

from proxy.http import wire as hw

_READ = 1 << 16


async def stop_listener(server, tasks: set, timeout: float = 5.0) -> None:
    """Close a small HTTP listener of the proxy's (the console's, the metrics'): stop
    accepting, cancel its connection tasks, and wait (at most `timeout`) for both."""
    if server is not None:
        server.close()
    for t in list(tasks):
        t.cancel()
    if tasks:
        await asyncio.wait(list(tasks), timeout=timeout)
    if server is not None:
        await asyncio.wait_for(server.wait_closed(), timeout)


async def read_head(reader, buf: bytearray, limit: int) -> hw.Request | None:
    """The next request head read into `buf` (of at most `limit` bytes); None at a clean
    end of the connection. The web console reads its requests with it too."""
    while True:
        n = hw.head_length(buf, limit)
        if n is not None:
            req = hw.parse_head(bytes(buf[:n]))
            del buf[:n]
            return req
        chunk = await reader.read(_READ)
        if not chunk:
            if buf:
                raise hw.HttpError(400, "connection closed inside the request head")
            return None
        buf += chunk
