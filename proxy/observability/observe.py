"""What the proxy saw, handed to whoever records it: the query log
(proxy/observability/querylog/log.py), the Prometheus metrics
(proxy/observability/metrics/registry.py) and the audit log
(proxy/observability/audit_log.py). The protocol layer (proxy/hs2) reaches them only
through this interface; proxy/app.py decides which observe.

`Frontend.observers` is one `Observers`; the protocol layer calls it at fixed points:
  rpc          every TCLIService call, with its time on the proxy and whether it failed
  connection   a client connection opened or closed (binary or HTTP)
  session      a session opened, was refused, or closed (with a SessionDetail: who, from
               where, how long, why)
  statement    a statement ended (once per ExecuteStatement, however it ended)
  reopen       SIGHUP: files an observer writes are opened again (log rotation)

Every call runs on the event loop, on the client's path: an observer must only count or
enqueue (no I/O, no parsing). An observer's exception is logged and never reaches the
client.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

log = logging.getLogger("proxy.observe")

# StatementEvent.decision
FORWARDED = "forwarded"     # sent to Spark as written, no datamap could answer
REWRITTEN = "rewritten"     # sent to Spark rewritten onto datamaps (or timeseries translated)
SERVED = "served"           # answered in-process from datamap files (proxy/serving)
LOCAL = "local"             # answered by the proxy itself (datamap DDL, SHOW, EXPLAIN, SET)
REFUSED = "refused"         # a Reject: never reached Spark
BYPASSED = "bypassed"       # not considered for a rewrite: rewriting off for the session,
                            # the statement over rewrite_max_sql_bytes, a blocking setting
DECISIONS = (FORWARDED, REWRITTEN, SERVED, LOCAL, REFUSED, BYPASSED)


@dataclass(frozen=True, slots=True)
class StatementEvent:
    at: float                       # time.time() when ExecuteStatement arrived
    session_id: str
    user: str
    client: str                     # the client tool if known (JDBC ApplicationName...), else ""
    statement: str                  # as the client sent it; an observer redacts what it keeps
    current_db: str
    decision: str                   # one of DECISIONS
    datamaps: tuple[str, ...] = ()  # datamaps that answered, "db.name"
    why_not: tuple[tuple[str, str], ...] = ()   # (datamap "db.name", one-line reason) not used
    duration_s: float = 0.0         # arrival to the statement's end (FINISHED, ERROR...), not
                                    # to the last fetch
    rows: int | None = None         # rows sent to the client, when counted
    outcome: str = "FINISHED"       # FINISHED | ERROR | CANCELED | TIMEDOUT | CLOSED
    sqlstate: str | None = None
    note: str = ""                  # the statement log's label ("rewrite:mv:agg served=duckdb")
    # a datamap answer Spark computed though the proxy serves answers in-process: the
    # serving tier's reason (proxy/observability/querylog/reasons.py not_served_class)
    not_served: str = ""
    real_user: str | None = None    # the authenticated user when the session impersonates `user`
    peer: str = ""                  # the client's address (host:port)
    operation: str | None = None    # the proxy's operation id (hex), None: no operation yet


@dataclass(frozen=True, slots=True)
class SessionDetail:
    """What a session event carries besides its user and client tool."""
    peer: str = ""                  # the client's address (host:port)
    session_id: str | None = None   # None: refused before it had one
    real_user: str | None = None    # the authenticated user when the session impersonates
    configuration: dict | None = None   # open: the OpenSession configuration, unmasked
    duration_s: float | None = None     # open: the open call's time; close: the session's life
    reason: str | None = None       # refused: why; close: who closed it
    sqlstate: str | None = None     # refused: the error's SQLSTATE


class Observer:
    """Base with no-op methods: subclasses override what they record."""

    def rpc(self, name: str, seconds: float, ok: bool) -> None:
        pass

    def connection(self, event: str, transport: str) -> None:
        """event: "open" | "close"; transport: "binary" | "http"."""

    def session(self, event: str, user: str, client: str = "",
                detail: SessionDetail | None = None) -> None:
        """event: "open" | "refused" | "close"."""

    def statement(self, ev: StatementEvent) -> None:
        pass

    def reopen(self) -> None:
        """SIGHUP: open again the files this observer writes."""

    def close(self) -> None:
        pass


class Observers(Observer):
    """Fans each call out to every registered observer; one that raises is logged (once
    per observer and method) and skipped."""

    def __init__(self, *observers: Observer):
        self._observers: list[Observer] = list(observers)
        self._warned: set[tuple[int, str]] = set()

    def add(self, observer: Observer) -> None:
        self._observers.append(observer)

    def __iter__(self):
        return iter(self._observers)

    def _each(self, method: str, *args) -> None:
        for o in self._observers:
            try:
                getattr(o, method)(*args)
            except Exception:  # noqa: BLE001 - recording never fails a client's call
                key = (id(o), method)
                if key not in self._warned:
                    self._warned.add(key)
                    log.warning("observer %s failed in %s", type(o).__name__, method,
                                exc_info=True)

    def rpc(self, name: str, seconds: float, ok: bool) -> None:
        if self._observers:
            self._each("rpc", name, seconds, ok)

    def connection(self, event: str, transport: str) -> None:
        if self._observers:
            self._each("connection", event, transport)

    def session(self, event: str, user: str, client: str = "",
                detail: SessionDetail | None = None) -> None:
        if self._observers:
            self._each("session", event, user, client, detail)

    def statement(self, ev: StatementEvent) -> None:
        if self._observers:
            self._each("statement", ev)

    def reopen(self) -> None:
        self._each("reopen")

    def close(self) -> None:
        self._each("close")
