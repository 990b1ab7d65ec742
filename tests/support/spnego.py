"""SPNEGO without a realm, for the HTTP login's pure logic: a scripted acceptor (token
b"round1" asks for one more round, b"good" is alice, anything else is refused) and the
`Authorization: Negotiate` header a client sends."""
from __future__ import annotations

import base64
import threading


class Acceptor:
    """Records the threads it ran on: the exchange must stay off the event loop."""

    threads: list[str] = []

    def spnego(self, token: bytes):
        self.threads.append(threading.current_thread().name)
        if token == b"round1":
            return None, b"more"
        if token == b"good":
            return "alice", b"mutual"
        raise RuntimeError("Invalid token (defective token detected)")


def negotiate(token: bytes) -> dict[str, str]:
    return {"authorization": "Negotiate " + base64.b64encode(token).decode()}
