"""One client connection as the protocol layer sees it: who logged in on it (SASL or the
HTTP request's credentials) and the sessions opened on it, which close with it. No I/O:
the gateway (proxy/gateway/server.py, proxy/gateway/http_transport.py) owns the socket."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(eq=False)
class ClientConnection:
    """What the protocol layer knows about one client connection (no I/O)."""
    peer: str
    sasl_user: str | None = None          # authcid from SASL PLAIN; None under NOSASL
    sasl_password: str = field(default="", repr=False)
    sessions: set = field(default_factory=set)
