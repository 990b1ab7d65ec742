"""One handler per TCLIService call.

`Service.handle(conn, message bytes) -> reply bytes`: decode the call, map the client's
handles to upstream handles, forward or answer locally, map handles back. Replies that carry
no handle (FetchResults, GetOperationStatus, GetResultSetMetadata, Cancel/CloseOperation,
GetInfo, ...) are relayed as upstream's bytes with the client's seqid: the row data of a
pass-through query is never decoded.

Operation kinds (proxy.hs2.operation.OpKind):
  UPSTREAM  Spark owns the state; every call is forwarded.
  HOOKED    forwarded, but the proxy polls upstream itself and awaits the decision's
            `after` hook before reporting FINISHED (the client polls the proxy).
  LOCAL     the router's runner produces a LocalResult the proxy serves.

Here: dispatch, the handle registries, ExecuteStatement's decision, housekeeping. The
other calls are mixins in proxy/hs2/calls/: sessions.py (Open/CloseSession), metadata.py
(GetTables & co., GetInfo, SetClientInfo), operation.py (status, fetch, cancel, close),
statement.py (LOCAL and HOOKED statements the proxy runs itself), gated.py (statements
under [server] max_running_operations, and sync ones with a timeout).

Errors: every handler raises; `handle` turns the exception into the call's reply (a TStatus
via errors.to_status, or a TApplicationException for calls without a status field).
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

from thrift.Thrift import TApplicationException

from proxy import statements
from proxy.audit_log import AuditLog
from proxy.hs2.calls import facts as statement_facts
from proxy.hs2.calls.facts import decided
from proxy.hs2.calls.gated import GatedStatements
from proxy.hs2.calls.metadata import SESSION_CALLS, MetadataCalls
from proxy.hs2.calls.operation import OperationCalls
from proxy.hs2.calls.sessions import SessionCalls
from proxy.hs2.calls.statement import STATEMENT_KEPT, ProxyRunStatements, end_statement
from proxy.config import Settings
from proxy.errors import ClientError, ProxyError, UpstreamError, succeeded, to_status
from proxy.hs2.handles import HandleRegistry, hex_id, mint
from proxy.hs2.connection import ClientConnection
from proxy.hs2.identity import ImpersonationPolicy
from proxy.hs2.limits import RunGate, SessionLimits
from proxy.logsafe import redact, safe
from proxy.observe import BYPASSED, FORWARDED, LOCAL, REFUSED, REWRITTEN, SERVED, Observers
from proxy.hs2.operation import OpKind, OpState, Operation
from proxy.hs2.recovery import UpstreamHealth, execute_statement, upstream_for
from proxy.router import Local, PassThrough, Reject, Rewrite, Router, Serve, StatementContext
from proxy.serving.tier import log_line
from proxy.hs2.session import Session, track_statement
from proxy.session import BLOCKED_KEY, semantic_setting
from proxy.slots import SessionSlots
from proxy.thrift import codec
from proxy.thrift.gen.TCLIService import ttypes as T
from proxy.upstream import UpstreamSession

log = logging.getLogger("proxy.service")
stmt_log = logging.getLogger("proxy.statement")


UpstreamFactory = Callable[[], UpstreamSession]


class Service(SessionCalls, MetadataCalls, OperationCalls, ProxyRunStatements, GatedStatements):
    """Dispatch, the handle registries, ExecuteStatement's decision and housekeeping; the
    other calls are in proxy/hs2/calls/."""

    def __init__(self, settings: Settings, router: Router,
                 upstream_factory: UpstreamFactory | None = None, *,
                 observers: Observers | None = None, health_path: Path | None = None):
        """observers: the query log and the metrics (proxy/observe.py; serve's App passes
        them); health_path: where the upstream's health is kept for doctor
        (proxy/hs2/recovery.py HEALTH_FILE in the state directory), None: in memory only."""
        self.settings = settings
        self.router = router
        statements.install(router)
        self.sessions: HandleRegistry[Session] = HandleRegistry("SessionHandle")
        self.operations: HandleRegistry[Operation] = HandleRegistry("OperationHandle")
        self._factory = upstream_factory or (lambda: UpstreamSession(settings.upstream))
        up = settings.upstream
        self.slots = SessionSlots(up.max_sessions, up.max_sessions_per_user,
                                  up.session_queue_size, up.session_queue_timeout)
        s = settings.server          # limits after login (proxy/hs2/limits.py, docs/limits.md)
        self.session_limits = SessionLimits(s.limit_connections_per_user,
                                            s.limit_connections_per_ipaddress,
                                            s.limit_connections_per_user_ipaddress)
        self.run_gate = RunGate(s.max_running_operations, s.operation_queue_size,
                                s.operation_queue_timeout)
        self.health = UpstreamHealth(f"{up.host}:{up.port}", health_path)
        self.inflight = 0
        self._recently_closed: dict[bytes, None] = {}     # insertion-ordered, bounded
        self.long_poll = settings.server.long_poll_timeout
        self.impersonation = ImpersonationPolicy(settings.server.impersonation)   # SIGHUP: update()
        self.audit = AuditLog(settings.server.audit_log)
        self.observers = observers if observers is not None else Observers()
        self._handlers: dict[str, Callable[..., Awaitable[Any]]] = {}
        for name in codec.METHODS:
            h = getattr(self, f"_h_{name}", None)
            if h is None and name in SESSION_CALLS:
                h = self._forward_session_call
            self._handlers[name] = h

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

    # ------------------------------------------------------------------ lookups

    def _session(self, handle: T.TSessionHandle | None) -> Session:
        s = self.sessions.get(handle.sessionId if handle else None)
        s.touch()
        return s

    def _op(self, handle: T.TOperationHandle | None) -> Operation:
        op = self.operations.get(handle.operationId if handle else None)
        op.touch()
        op.session.touch()
        return op

    def _register_op(self, session: Session, op: Operation, upstream: T.TOperationHandle | None,
                     op_type: int, has_result_set: bool) -> T.TOperationHandle:
        op.session = session
        op.upstream_handle = upstream
        facts = statement_facts.current()
        if facts is not None and op.facts is None:
            op.facts, op.arrived = facts, facts.arrived
        if op.state.terminal and op.ended_at is None:     # a synchronous statement that ended
            op.ended_at = time.monotonic()
        ident = mint()
        op.client_handle = T.TOperationHandle(
            operationId=ident, operationType=op_type, hasResultSet=has_result_set,
            modifiedRowCount=upstream.modifiedRowCount if upstream is not None else None)
        self.operations.add(op, ident)
        session.operations.add(op, ident)
        return op.client_handle

    # ------------------------------------------------------------------ ExecuteStatement

    async def _h_ExecuteStatement(self, conn, name, req: T.TExecuteStatementReq, seqid):
        with statement_facts.arriving():
            return await self._execute_statement(req, seqid)

    async def _execute_statement(self, req: T.TExecuteStatementReq, seqid: int):
        session = self._session(req.sessionHandle)
        statement = req.statement or ""
        conf = session.conf
        if req.confOverlay and any(semantic_setting(k.split(":")[-1]) for k in req.confOverlay):
            # this statement alone runs under other result-affecting settings
            conf = {**conf, BLOCKED_KEY: "the statement's confOverlay changes a setting "
                                         "datamaps were not built with"}
        facts = statement_facts.current()
        ctx = StatementContext(session_id=session.id, user=session.user,
                               current_db=session.current_db, conf=conf,
                               protocol_version=session.protocol, opened=session.created,
                               arrived=facts.arrived if facts is not None else None)
        try:
            decision = await self.router.decide_async(ctx, statement)
        except ProxyError:
            raise
        except RecursionError:   # the client's deeply nested input, not a bug: no traceback
            log.warning("statement of %d characters is nested too deeply to analyse; "
                        "forwarding it unchanged", len(statement))
            decision = PassThrough()
        except Exception:  # noqa: BLE001 - a broken handler must not break pass-through
            log.exception("router failed on statement; forwarding unchanged")
            decision = PassThrough()
        if isinstance(decision, Reject):
            decided(REFUSED)
            self._log_statement(session, None, "reject", "ERROR", statement,
                                sqlstate=decision.sqlstate)
            raise ClientError(decision.message, decision.sqlstate)
        session.conf.update(decision.settings)
        if isinstance(decision, Local):
            decided(LOCAL)
            return await self._execute_local(session, req, decision)
        if isinstance(decision, Serve):
            result, how = await decision.attempt()
            note = decision.fallback.note
            label = f"rewrite:{note} served={how}" if note else f"rewrite served={how}"
            if result is not None:
                decided(SERVED, decision.fallback.datamaps)
                return self._execute_served(session, req, result, label,
                                            decision.fallback.log + (log_line(how),))
            decision = dataclasses.replace(decision.fallback, note=(
                f"{note} served={how}" if note else f"served={how}"))
        decided(BYPASSED if decision.bypassed else
                 REWRITTEN if isinstance(decision, Rewrite) else FORWARDED,
                 getattr(decision, "datamaps", ()), decision.why_not)
        sql = decision.sql if isinstance(decision, Rewrite) else statement
        label = ("rewrite" if isinstance(decision, Rewrite) else "pass") + (
            f":{decision.note}" if decision.note else "")
        try:
            up = await upstream_for(self, session)     # a new one if Spark restarted
            for first in decision.before:    # e.g. REFRESH TABLE: its failure is the statement's
                await up.run_sql(first)
        except BaseException as e:
            # never sent: a load's hold on its tables ends here, and the audit says so
            end_statement(getattr(decision, "ended", None))
            if isinstance(e, ProxyError):
                self._log_statement(session, None, label, "ERROR", statement,
                                    sqlstate=e.sqlstate)
            raise
        log_lines = decision.log if isinstance(decision, Rewrite) else ()
        if self._gated(session, req):     # [server] max_running_operations, timeouts
            return await self._execute_gated(session, req, sql, label, seqid, decision.after,
                                             getattr(decision, "ended", None), log_lines)
        if decision.after is not None:
            return await self._execute_hooked(session, req, sql, label, decision.after,
                                              getattr(decision, "ended", None))
        return await self._execute_upstream(session, req, sql, label, seqid, log_lines)

    async def _execute_upstream(self, session: Session, req: T.TExecuteStatementReq, sql: str,
                                label: str, seqid: int, log_lines: tuple[str, ...] = ()):
        up = session.upstream
        fwd = T.TExecuteStatementReq(sessionHandle=up.handle, statement=sql,
                                     confOverlay=req.confOverlay, runAsync=req.runAsync,
                                     queryTimeout=self._upstream_timeout(req))
        try:
            resp = await execute_statement(up, fwd, req.statement or "", seqid)
        except ProxyError as e:       # the connection broke under it
            self._log_statement(session, None, label, "ERROR", req.statement, sqlstate=e.sqlstate)
            raise
        if not succeeded(resp.status) or resp.operationHandle is None:
            self._log_statement(session, None, label, "ERROR", req.statement,
                                sqlstate=resp.status.sqlState if resp.status else None)
            return resp
        self._track_session_state(session, req.statement)
        op = Operation(OpKind.UPSTREAM, T.TOperationType.EXECUTE_STATEMENT,
                       statement=req.statement[:STATEMENT_KEPT], decision=label,
                       state=OpState.RUNNING if req.runAsync else OpState.FINISHED,
                       log_lines=log_lines)
        resp.operationHandle = self._register_op(session, op, resp.operationHandle,
                                                 resp.operationHandle.operationType,
                                                 resp.operationHandle.hasResultSet)
        return resp

    def _track_session_state(self, session: Session, statement: str) -> None:
        track_statement(session, statement)

    # ------------------------------------------------------------------ operations

    def _forget_op(self, op: Operation, why: str) -> None:
        if self.operations.remove(op.client_handle.operationId) is None:
            return
        op.session.operations.remove(op.client_handle.operationId)
        self._recently_closed[bytes(op.client_handle.operationId.guid)] = None
        if len(self._recently_closed) > 10000:
            self._recently_closed.pop(next(iter(self._recently_closed)))
        if op.task is not None and not op.task.done():
            op.task.cancel()
        self._release_run_slot(op)
        final = op.state.name
        if op.kind is OpKind.UPSTREAM:
            op.state = OpState.CLOSED
        elif op.state is not OpState.CLOSED:
            op.to(OpState.CLOSED)
        self._log_statement(op.session, op, op.decision, final, op.statement)

    def _log_statement(self, session: Session, op: Operation | None, decision: str, state: str,
                       statement: str, sqlstate: str | None = None) -> None:
        """The statement's one log line, audit line and event. Its duration runs from
        ExecuteStatement's arrival to the end first seen (the sync call's return, the first
        final status relayed, the proxy's own run ending), not to CloseOperation."""
        op_id = hex_id(op.client_handle.operationId) if op is not None else None
        facts, duration = statement_facts.timing(op)
        if stmt_log.isEnabledFor(logging.INFO):
            stmt_log.info("statement session=%s user=%s op=%s decision=%s state=%s duration=%.3fs sql=%s",
                          session.id, safe(session.user, 100), op_id or "-",
                          decision, state, duration, safe(redact((statement or "")[:2000]), 200))
        if op is not None and op.error is not None:
            sqlstate = op.error.sqlState or sqlstate
        self.audit.statement(session, op_id, decision, state, sqlstate, duration, statement)
        self.observers.statement(statement_facts.event(session, op, facts, duration, decision,
                                                       state, statement, sqlstate))

    # ------------------------------------------------------------------ housekeeping

    def running_operations(self) -> int:
        """Statements still running (upstream ones as last reported to their client)."""
        return sum(1 for op in self.operations.values() if op.state.running)

    def busy(self, settle: float = 1.0) -> bool:
        """In-flight calls, running statements, or results being fetched right now (an
        operation touched within `settle` seconds): what a graceful shutdown waits for."""
        if self.inflight or self.running_operations():
            return True
        now = time.monotonic()
        return any(now - op.last_access < settle for op in self.operations.values())

    async def reap_idle(self, now: float | None = None) -> None:
        """Close idle sessions and idle terminal operations (server timer)."""
        now = time.monotonic() if now is None else now
        s_to = self.settings.server.idle_session_timeout
        o_to = self.settings.server.idle_operation_timeout
        if o_to and o_to > 0:
            for op in list(self.operations.values()):
                if now - op.last_access > o_to and (op.kind is OpKind.UPSTREAM or op.state.terminal):
                    if op.upstream_handle is not None and op.lost is None:
                        try:
                            await op.session.upstream.conn.call(
                                "CloseOperation", T.TCloseOperationReq(operationHandle=op.upstream_handle),
                                timeout=30.0)
                        except UpstreamError:
                            pass
                    self._forget_op(op, "idle")
        if s_to and s_to > 0:
            for session in list(self.sessions.values()):
                if session.idle_for(now) > s_to:
                    await self.close_session(session, "idle timeout")

    async def close_all(self, reason: str) -> None:
        for session in list(self.sessions.values()):
            try:
                await asyncio.wait_for(self.close_session(session, reason), 30.0)
            except (asyncio.TimeoutError, ProxyError) as e:
                log.warning("closing session %s: %s", session.id, e)
