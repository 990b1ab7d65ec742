"""A 127.0.0.1 TCP relay between the proxy and its upstream whose live connections a test
can cut, like Spark dying under them."""
from __future__ import annotations

import asyncio
import socket
import threading


class Relay:
    """127.0.0.1 TCP relay to (host, port) whose live connections can be cut."""

    def __init__(self, host: str, port: int):
        self.target = (host, port)
        self.loop = asyncio.new_event_loop()
        self.pairs: list[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = []
        self.port = 0
        ready = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(ready,), daemon=True)
        self.thread.start()
        ready.wait(10)

    def _run(self, ready):
        asyncio.set_event_loop(self.loop)

        async def pipe(r, w):
            try:
                while data := await r.read(65536):
                    w.write(data)
                    await w.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                w.close()

        async def handle(cr, cw):
            try:
                ur, uw = await asyncio.open_connection(*self.target)
            except OSError:
                cw.close()
                return
            self.pairs.append((cw, uw))
            await asyncio.gather(pipe(cr, uw), pipe(ur, cw))

        async def main():
            self.server = await asyncio.start_server(handle, "127.0.0.1", 0)
            self.port = self.server.sockets[0].getsockname()[1]
            ready.set()
            await asyncio.Event().wait()

        try:
            self.loop.run_until_complete(main())
        except RuntimeError:
            pass

    def cut(self, index: int | None = None) -> None:
        """Reset one (or every) relayed connection, like Spark dying under it."""
        def do():
            for i, (a, b) in enumerate(self.pairs):
                if index is None or i == index:
                    for w in (a, b):
                        if w.is_closing():      # ended already (a probe's session, say)
                            continue
                        sock = w.get_extra_info("socket")
                        try:
                            if sock is not None:
                                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                                b"\x01\x00\x00\x00\x00\x00\x00\x00")
                        except OSError:         # its peer closed it meanwhile
                            pass
                        w.close()
        self.loop.call_soon_threadsafe(do)

    def close(self):
        self.loop.call_soon_threadsafe(self.loop.stop)
