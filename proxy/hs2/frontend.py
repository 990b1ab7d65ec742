"""The TCLIService frontend: one handler per TCLIService call.

`Frontend.handle(conn, message bytes) -> reply bytes`: decode the call, map the client's
handles to upstream handles, forward or answer locally, map handles back. Replies that carry
no handle (FetchResults, GetOperationStatus, GetResultSetMetadata, Cancel/CloseOperation,
GetInfo, ...) are relayed as upstream's bytes with the client's seqid: the row data of a
pass-through query is never decoded.

Operation kinds (proxy.hs2.operation.OpKind):
  UPSTREAM  Spark owns the state; every call is forwarded.
  HOOKED    forwarded, but the proxy polls upstream itself and awaits the decision's
            `after` hook before reporting FINISHED (the client polls the proxy).
  LOCAL     the router's runner produces a LocalResult the proxy serves.

Here: dispatch and housekeeping. The calls are answered by three managers (after Kyuubi's
FrontendService / SessionManager / OperationManager): session_manager.py (the session
registry, Open/CloseSession, the calls forwarded with the session handle swapped: GetTables
& co., GetInfo, SetClientInfo), operation_manager.py (the operation registry: status,
fetch, cancel, close) and statements.py (ExecuteStatement: the decision, LOCAL and HOOKED
statements the proxy runs itself, statements under [server] max_running_operations, and
sync ones with a timeout).

Errors: every handler raises; `handle` turns the exception into the call's reply (a TStatus
via errors.to_status, or a TApplicationException for calls without a status field).
"""
from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

from thrift.Thrift import TApplicationException

from proxy.config import Settings
from proxy.errors import ProxyError, to_status
from proxy.hs2.connection import ClientConnection
from proxy.hs2.limits import RunGate
from proxy.hs2.operation_manager import OperationManager
from proxy.hs2.session_manager import SESSION_CALLS, SessionManager, UpstreamFactory
from proxy.hs2.statements import StatementRunner
from proxy.logsafe import redact
from proxy.observability.observe import Observers
from proxy.routing.router import Router
from proxy.thrift import codec
from proxy.thrift.gen.TCLIService import ttypes as T
from proxy.upstream.client import UpstreamSession

log = logging.getLogger("proxy.service")


class Frontend:
    """Dispatch over the session manager, the operation manager and the statement runner,
    and housekeeping."""

    def __init__(self, settings: Settings, router: Router,
                 upstream_factory: UpstreamFactory | None = None, *,
                 observers: Observers | None = None, health_path: Path | None = None):
        """router: decides each statement; serve's is built with the gateway's own
        handlers first (proxy.routing.statements.HANDLERS, proxy/app.py).
        observers: the query log, the metrics and the audit log
        (proxy/observability/observe.py; serve's App passes them); health_path: where the
        upstream's health is kept for doctor (proxy/hs2/recovery.py HEALTH_FILE in the
        state directory), None: in memory only."""
        self.router = router
        s = settings.server
        self.run_gate = RunGate(s.max_running_operations, s.operation_queue_size,
                                s.operation_queue_timeout)
        self.observers = observers if observers is not None else Observers()
        self.operation_manager = OperationManager(settings, self.run_gate, self.observers)
        self.session_manager = SessionManager(
            settings, upstream_factory or (lambda: UpstreamSession(settings.upstream)),
            self.operation_manager, self.observers, health_path)
        self.statement_runner = StatementRunner(settings, router, self.session_manager,
                                                self.operation_manager, self.run_gate)
        self.settings = settings
        self.inflight = 0
        self._handlers = self._handler_table()

    def _handler_table(self) -> dict[str, Callable[..., Awaitable[Any]] | None]:
        """TCLIService call -> the manager's method that answers it (conn, name, req,
        seqid); None for a call the proxy does not answer (Invalid method name)."""
        sessions, operations = self.session_manager, self.operation_manager
        table = {
            "OpenSession": sessions.open,
            "CloseSession": sessions.close_call,
            "GetInfo": sessions.get_info,
            "SetClientInfo": sessions.set_client_info,
            "ExecuteStatement": self.statement_runner.execute,
            "GetOperationStatus": operations.get_status,
            "GetResultSetMetadata": operations.get_result_set_metadata,
            "FetchResults": operations.fetch_results,
            "CancelOperation": operations.cancel,
            "CloseOperation": operations.close,
            "GetQueryId": operations.get_query_id,
        }
        return {name: table.get(name) or (sessions.forward if name in SESSION_CALLS else None)
                for name in codec.METHODS}

    @property
    def settings(self) -> Settings:
        return self._settings

    @settings.setter
    def settings(self, settings: Settings) -> None:
        """New settings (SIGHUP): idle timeouts and query_timeout are read per use."""
        self._settings = settings
        for manager in (self.operation_manager, self.session_manager, self.statement_runner):
            manager.settings = settings

    # ------------------------------------------------------------------ dispatch

    async def handle(self, conn: ClientConnection, data: bytes) -> bytes:
        try:
            msg = codec.decode(data)          # one pass: header + (small) request body
        except codec.ProtocolError as e:
            name, _, seqid = codec.decode_header(data)     # re-raises if the header is bad
            return codec.application_exception(name, seqid, str(e), TApplicationException.PROTOCOL_ERROR)
        name, seqid = msg.name, msg.seqid
        if msg.type not in (codec.CALL, codec.ONEWAY):
            return codec.application_exception(name, seqid, f"Expected a call, got message type {msg.type}",
                                               TApplicationException.INVALID_MESSAGE_TYPE)
        handler = self._handlers.get(name)
        if handler is None or msg.body is None:
            return codec.application_exception(name, seqid, f"Invalid method name: '{name}'")
        req = msg.body.req
        if req is None:
            return codec.application_exception(name, seqid, f"{name} call without a request",
                                               TApplicationException.PROTOCOL_ERROR)
        self.inflight += 1
        t0 = time.perf_counter()
        ok = False
        try:
            out = await handler(conn, name, req, seqid)
            ok = True
            if isinstance(out, (bytes, bytearray)):
                return codec.set_seqid(out, seqid)
            return codec.encode_reply(name, seqid, out)
        except Exception as e:  # noqa: BLE001 - the one place errors become replies
            if not isinstance(e, ProxyError):
                log.exception("internal error in %s from %s", name, conn.peer)
            return self._error_reply(name, seqid, e, req)
        finally:
            self.inflight -= 1
            self.observers.rpc(name, time.perf_counter() - t0, ok)

    def _error_reply(self, name: str, seqid: int, exc: BaseException, req: Any) -> bytes:
        if name in ("GetQueryId", "UploadData", "DownloadData"):
            return codec.application_exception(name, seqid, redact(str(exc) or type(exc).__name__),
                                               TApplicationException.INTERNAL_ERROR)
        status = to_status(exc)
        resp_cls = codec.METHODS[name][1].thrift_spec[0][3][0]
        resp = resp_cls(status=status)
        if name == "OpenSession":
            resp.serverProtocolVersion = min(req.client_protocol or 0,
                                             self.settings.upstream.max_protocol)
        elif name == "GetInfo":
            resp.infoValue = T.TGetInfoValue(stringValue="")
        return codec.encode_reply(name, seqid, resp)

    # ------------------------------------------------------------------ housekeeping

    def running_operations(self) -> int:
        """Statements still running (upstream ones as last reported to their client)."""
        return self.operation_manager.running()

    def busy(self, settle: float = 1.0) -> bool:
        """In-flight calls, running statements, or results being fetched right now (an
        operation touched within `settle` seconds): what a graceful shutdown waits for."""
        if self.inflight or self.running_operations():
            return True
        return self.operation_manager.touched_within(settle)

    async def reap_idle(self, now: float | None = None) -> None:
        """Close idle sessions and idle terminal operations (server timer)."""
        now = time.monotonic() if now is None else now
        await self.operation_manager.reap_idle(now)
        await self.session_manager.reap_idle(now)

    async def close_all(self, reason: str) -> None:
        await self.session_manager.close_all(reason)

    # ------------------------------------------------------------------ readers

    @property
    def health(self):
        """The upstream's health (proxy/hs2/recovery.py), which serve and the metrics read."""
        return self.session_manager.health
