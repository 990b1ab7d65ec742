"""One handler per TCLIService call.

`Service.handle(conn, message bytes) -> reply bytes`: decode the call, map the client's
handles to upstream handles, forward or answer locally, map handles back. Replies that carry
no handle (FetchResults, GetOperationStatus, GetResultSetMetadata, Cancel/CloseOperation,
GetInfo, ...) are relayed as upstream's bytes with the client's seqid: the row data of a
pass-through query is never decoded.

Operation kinds (proxy.operations.OpKind):
  UPSTREAM  Spark owns the state; every call is forwarded.
  HOOKED    forwarded, but the proxy polls upstream itself and awaits the decision's
            `after` hook before reporting FINISHED (the client polls the proxy).
  LOCAL     the router's runner produces a LocalResult the proxy serves.

Errors: every handler raises; `handle` turns the exception into the call's reply (a TStatus
via errors.to_status, or a TApplicationException for calls without a status field).
"""
from __future__ import annotations

import asyncio
import logging
import re
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from thrift.Thrift import TApplicationException

from proxy import statements
from proxy.config import Settings
from proxy.errors import (ClientError, InvalidHandle, ProxyError, UpstreamError, succeeded,
                          to_status)
from proxy.handles import HandleRegistry, hex_id, mint
from proxy.logsafe import safe
from proxy.operations import OpKind, OpState, Operation
from proxy.results import LocalRowSource, empty_log_rowset
from proxy.router import Local, PassThrough, Reject, Rewrite, Router, StatementContext
from proxy.session import BLOCKED_KEY, Session, semantic_setting
from proxy.slots import SessionSlots, TooManySessions
from proxy.thrift import codec
from proxy.thrift.gen.TCLIService import ttypes as T
from proxy.upstream import UpstreamSession, check

log = logging.getLogger("proxy.service")
stmt_log = logging.getLogger("proxy.statement")

OK = T.TStatus(statusCode=T.TStatusCode.SUCCESS_STATUS)
_RUNNING_STATES = (T.TOperationState.INITIALIZED_STATE, T.TOperationState.RUNNING_STATE,
                   T.TOperationState.PENDING_STATE)
# Matched in full against the statement without its terminator (proxy.statements.bare):
# a trailing `\s*;?\s*$` in the pattern backtracks quadratically over a run of spaces.
_USE = re.compile(r"\s*use\s+(?:database\s+|schema\s+)?`?([\w.]+)`?", re.IGNORECASE)
_SET = re.compile(r"\s*set\s+([^\s=]+)\s*=\s*(.*)", re.IGNORECASE | re.DOTALL)
# Kept on an operation for its log line, which shows less than this.
_STATEMENT_KEPT = 1000
_SESSION_CALLS = ("GetInfo", "GetTypeInfo", "GetCatalogs", "GetSchemas", "GetTables",
                  "GetTableTypes", "GetColumns", "GetFunctions", "GetPrimaryKeys",
                  "GetCrossReference", "GetDelegationToken", "CancelDelegationToken",
                  "RenewDelegationToken", "UploadData", "DownloadData")
_UPSTREAM_INFO_TYPES = frozenset({T.TGetInfoType.CLI_SERVER_NAME, T.TGetInfoType.CLI_DBMS_NAME,
                                   T.TGetInfoType.CLI_DBMS_VER, T.TGetInfoType.CLI_ODBC_KEYWORDS})
# HiveServer2 documents 128 for these; STS 4.3 cannot actually answer them.
_LOCAL_INFO_LENGTHS = frozenset({T.TGetInfoType.CLI_MAX_COLUMN_NAME_LEN,
                                 T.TGetInfoType.CLI_MAX_SCHEMA_NAME_LEN,
                                 T.TGetInfoType.CLI_MAX_TABLE_NAME_LEN})
_METADATA_CALLS = {"GetTypeInfo", "GetCatalogs", "GetSchemas", "GetTables", "GetTableTypes",
                   "GetColumns", "GetFunctions", "GetPrimaryKeys", "GetCrossReference",
                   "UploadData", "DownloadData"}


@dataclass(eq=False)
class ClientConnection:
    """What the protocol layer knows about one client connection (no I/O)."""
    peer: str
    sasl_user: str | None = None          # authcid from SASL PLAIN; None under NOSASL
    sasl_password: str = ""
    sessions: set = field(default_factory=set)


UpstreamFactory = Callable[[], UpstreamSession]


class Service:
    def __init__(self, settings: Settings, router: Router,
                 upstream_factory: UpstreamFactory | None = None):
        self.settings = settings
        self.router = router
        statements.install(router)
        self.sessions: HandleRegistry[Session] = HandleRegistry("SessionHandle")
        self.operations: HandleRegistry[Operation] = HandleRegistry("OperationHandle")
        self._factory = upstream_factory or (lambda: UpstreamSession(settings.upstream))
        up = settings.upstream
        self.slots = SessionSlots(up.max_sessions, up.max_sessions_per_user,
                                  up.session_queue_size, up.session_queue_timeout)
        self.inflight = 0
        self._recently_closed: dict[bytes, None] = {}     # insertion-ordered, bounded
        self.long_poll = settings.server.long_poll_timeout
        self._handlers: dict[str, Callable[..., Awaitable[Any]]] = {}
        for name in codec.METHODS:
            h = getattr(self, f"_h_{name}", None)
            if h is None and name in _SESSION_CALLS:
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
        try:
            out = await handler(conn, name, req, seqid)
            if isinstance(out, (bytes, bytearray)):
                return codec.set_seqid(out, seqid)
            return codec.encode_reply(name, seqid, out)
        except Exception as e:  # noqa: BLE001 - the one place errors become replies
            if not isinstance(e, ProxyError):
                log.exception("internal error in %s from %s", name, conn.peer)
            return self._error_reply(name, seqid, e, req)
        finally:
            self.inflight -= 1

    def _error_reply(self, name: str, seqid: int, exc: BaseException, req: Any) -> bytes:
        if name in ("GetQueryId", "UploadData", "DownloadData"):
            return codec.application_exception(name, seqid, str(exc) or type(exc).__name__,
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
        ident = mint()
        op.client_handle = T.TOperationHandle(
            operationId=ident, operationType=op_type, hasResultSet=has_result_set,
            modifiedRowCount=upstream.modifiedRowCount if upstream is not None else None)
        self.operations.add(op, ident)
        session.operations.add(op, ident)
        return op.client_handle

    # ------------------------------------------------------------------ sessions

    async def _h_OpenSession(self, conn: ClientConnection, name: str, req: T.TOpenSessionReq, seqid: int):
        if conn.sasl_user is not None:     # HS2 trusts the transport, not req.username
            user, password = conn.sasl_user, conn.sasl_password
        else:
            user, password = (req.username or "anonymous"), (req.password or "")
        client_protocol = req.client_protocol if req.client_protocol is not None else 0
        t0 = time.monotonic()
        try:
            await self.slots.acquire(user)
        except TooManySessions as e:
            log.warning("session refused user=%s peer=%s after %.1fs: %s", safe(user, 64),
                        conn.peer, time.monotonic() - t0, e)
            raise
        upstream = session = None
        try:
            upstream = self._factory()
            session, resp = await self._open_upstream(conn, user, password, client_protocol,
                                                      req, upstream)
        finally:
            if session is None:
                self.slots.release(user)
                if upstream is not None:
                    upstream.conn.close()
        log.info("session open id=%s user=%s peer=%s protocol=V%d (client V%d) %.0fms",
                 session.id, safe(user, 64), conn.peer, session.protocol + 1, client_protocol + 1,
                 (time.monotonic() - t0) * 1000)
        return T.TOpenSessionResp(status=resp.status, serverProtocolVersion=resp.serverProtocolVersion,
                                  sessionHandle=T.TSessionHandle(sessionId=session.handle),
                                  configuration=resp.configuration)

    async def _open_upstream(self, conn: ClientConnection, user: str, password: str,
                             client_protocol: int, req: T.TOpenSessionReq,
                             upstream: UpstreamSession) -> tuple[Session, T.TOpenSessionResp]:
        try:
            resp = await upstream.open(user, password, client_protocol, req.configuration)
        except UpstreamError as e:
            self._log_open_failed(user, conn, upstream, str(e))
            raise
        if not succeeded(resp.status) or upstream.handle is None:
            self._log_open_failed(user, conn, upstream,
                                  resp.status.errorMessage if resp.status else "no status")
            raise UpstreamError("OpenSession failed", resp.status)
        session = Session(user=user, protocol=resp.serverProtocolVersion,
                          client_protocol=client_protocol,
                          configuration=dict(req.configuration or {}), upstream=upstream,
                          peer=conn.peer)
        session.handle = self.sessions.add(session)
        conn.sessions.add(session)
        session.connection = conn
        upstream.conn.on_break = lambda reason: self._upstream_lost(session, reason)
        return session, resp

    @staticmethod
    def _log_open_failed(user: str, conn: ClientConnection, upstream: UpstreamSession,
                         reason: str | None) -> None:
        log.warning("upstream OpenSession failed user=%s peer=%s upstream=%s: %s", safe(user, 64),
                    conn.peer, upstream.conn.addr, safe(reason or "no reason given", 500))

    def _upstream_lost(self, session: Session, reason: str) -> None:
        """The upstream connection of `session` broke: every statement it was running is
        gone with it. Say which (the client may only see a generic 08S01 later)."""
        call = session.upstream.conn.current
        if call is not None and call[0] == "ExecuteStatement":
            stmt_log.warning("statement cut by upstream failure session=%s user=%s op=- "
                             "call=ExecuteStatement sql=%s: %s", session.id, safe(session.user, 64),
                             safe(call[1].statement or ""), safe(reason))
        for op in list(session.operations.values()):
            if not op.state.running:
                continue
            stmt_log.warning("statement cut by upstream failure session=%s user=%s op=%s "
                             "decision=%s state=%s sql=%s: %s", session.id, safe(session.user, 64),
                             hex_id(op.client_handle.operationId), op.decision, op.state.name,
                             safe(op.statement or ""), safe(reason))
            if op.kind is OpKind.UPSTREAM:
                # mirrored state: a dead statement must not keep the session from idling
                # out or hold up shutdown's drain
                op.state = OpState.ERROR

    async def _h_CloseSession(self, conn, name, req: T.TCloseSessionReq, seqid):
        session = self._session(req.sessionHandle)
        await self.close_session(session, "client")
        return T.TCloseSessionResp(status=OK)

    async def close_session(self, session: Session, reason: str) -> None:
        """Close a session's operations and its upstream session. Idempotent."""
        if self.sessions.remove(session.handle) is None:
            return
        conn = getattr(session, "connection", None)
        if conn is not None:
            conn.sessions.discard(session)
        for op in list(session.operations.values()):
            self._forget_op(op, "session closed")
        try:
            await session.upstream.close()
        finally:
            self.slots.release(session.user)
        log.info("session close id=%s user=%s reason=%s duration=%.1fs", session.id,
                 safe(session.user, 64), reason, time.monotonic() - session.created)

    async def connection_closed(self, conn: ClientConnection) -> None:
        for session in list(conn.sessions):
            await self.close_session(session, "disconnect")

    # ------------------------------------------------------------------ generic forwarding

    async def _forward_session_call(self, conn, name: str, req: Any, seqid: int):
        session = self._session(req.sessionHandle)
        up = session.upstream
        client_session_handle = req.sessionHandle
        req.sessionHandle = up.handle
        if name not in _METADATA_CALLS:
            return await up.conn.call_raw(codec.encode_call(name, seqid, req))
        try:
            resp = await up.conn.call(name, req, seqid)
        finally:
            req.sessionHandle = client_session_handle
        if resp.operationHandle is not None and succeeded(resp.status):
            op = Operation(OpKind.UPSTREAM, resp.operationHandle.operationType, statement=name,
                           decision="metadata", state=OpState.FINISHED)
            resp.operationHandle = self._register_op(session, op, resp.operationHandle,
                                                     resp.operationHandle.operationType,
                                                     resp.operationHandle.hasResultSet)
        return resp

    async def _forward_op_call(self, op: Operation, name: str, req: Any, seqid: int) -> bytes:
        saved = req.operationHandle
        req.operationHandle = op.upstream_handle
        try:
            return await op.session.upstream.conn.call_raw(codec.encode_call(name, seqid, req))
        finally:
            req.operationHandle = saved

    async def _h_GetInfo(self, conn, name, req: T.TGetInfoReq, seqid):
        """Forward only the codes Spark implements: for any other code STS 4.3 fails to
        serialise its own error reply and drops the connection (the session would die)."""
        session = self._session(req.sessionHandle)
        if req.infoType in _UPSTREAM_INFO_TYPES:
            saved, req.sessionHandle = req.sessionHandle, session.upstream.handle
            try:
                return await session.upstream.conn.call_raw(codec.encode_call(name, seqid, req))
            finally:
                req.sessionHandle = saved
        if req.infoType in _LOCAL_INFO_LENGTHS:
            return T.TGetInfoResp(status=OK, infoValue=T.TGetInfoValue(lenValue=128))
        label = T.TGetInfoType._VALUES_TO_NAMES.get(req.infoType, str(req.infoType))
        raise ClientError(f"Unrecognized GetInfoType value: {label}", "HY096")

    async def _h_SetClientInfo(self, conn, name, req: T.TSetClientInfoReq, seqid):
        session = self._session(req.sessionHandle)
        session.client_info.update(req.configuration or {})
        saved, req.sessionHandle = req.sessionHandle, session.upstream.handle
        try:
            return await session.upstream.conn.call(name, req, seqid)
        except UpstreamError as e:
            if "rejected SetClientInfo" in str(e):   # backend predates the call
                return T.TSetClientInfoResp(status=OK)
            raise
        finally:
            req.sessionHandle = saved

    # ------------------------------------------------------------------ ExecuteStatement

    async def _h_ExecuteStatement(self, conn, name, req: T.TExecuteStatementReq, seqid):
        session = self._session(req.sessionHandle)
        statement = req.statement or ""
        conf = session.conf
        if req.confOverlay and any(semantic_setting(k.split(":")[-1]) for k in req.confOverlay):
            # this statement alone runs under other result-affecting settings
            conf = {**conf, BLOCKED_KEY: "the statement's confOverlay changes a setting "
                                         "datamaps were not built with"}
        ctx = StatementContext(session_id=session.id, user=session.user,
                               current_db=session.current_db, conf=conf,
                               protocol_version=session.protocol)
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
            self._log_statement(session, None, "reject", "ERROR", 0.0, statement)
            raise ClientError(decision.message, decision.sqlstate)
        if isinstance(decision, Local):
            return await self._execute_local(session, req, decision)
        sql = decision.sql if isinstance(decision, Rewrite) else statement
        label = f"rewrite:{decision.note}" if isinstance(decision, Rewrite) and decision.note else (
            "rewrite" if isinstance(decision, Rewrite) else "pass")
        if decision.after is not None:
            return await self._execute_hooked(session, req, sql, label, decision.after)
        return await self._execute_upstream(session, req, sql, label, seqid)

    async def _execute_upstream(self, session: Session, req: T.TExecuteStatementReq, sql: str,
                                label: str, seqid: int):
        up = session.upstream
        fwd = T.TExecuteStatementReq(sessionHandle=up.handle, statement=sql,
                                     confOverlay=req.confOverlay, runAsync=req.runAsync,
                                     queryTimeout=req.queryTimeout)
        t0 = time.monotonic()
        resp = await up.conn.call("ExecuteStatement", fwd, seqid)
        if not succeeded(resp.status) or resp.operationHandle is None:
            self._log_statement(session, None, label, "ERROR", time.monotonic() - t0, req.statement)
            return resp
        self._track_session_state(session, req.statement)
        op = Operation(OpKind.UPSTREAM, T.TOperationType.EXECUTE_STATEMENT,
                       statement=req.statement[:_STATEMENT_KEPT], decision=label,
                       state=OpState.RUNNING if req.runAsync else OpState.FINISHED)
        resp.operationHandle = self._register_op(session, op, resp.operationHandle,
                                                 resp.operationHandle.operationType,
                                                 resp.operationHandle.hasResultSet)
        return resp

    def _track_session_state(self, session: Session, statement: str) -> None:
        statement = statements.bare(statement)
        m = _USE.fullmatch(statement)
        if m:
            session.current_db = m.group(1).lower()
            return
        m = _SET.fullmatch(statement)
        if m:
            session.conf[m.group(1)] = m.group(2)

    def _new_proxy_op(self, session: Session, kind: OpKind, statement: str, label: str) -> Operation:
        op = Operation(kind, T.TOperationType.EXECUTE_STATEMENT, statement=statement[:_STATEMENT_KEPT],
                       decision=label)
        op.done = asyncio.Event()
        return op

    async def _finish_sync(self, op: Operation) -> None:
        """runAsync=false: block until the operation is terminal; failures become the
        ExecuteStatement status."""
        await op.done.wait()
        if op.state is not OpState.FINISHED:
            status = op.error or T.TStatus(statusCode=T.TStatusCode.ERROR_STATUS, sqlState="HY000",
                                           errorMessage=f"Statement ended in state {op.state.name}")
            self._forget_op(op, "failed synchronously")
            raise UpstreamError(status.errorMessage or "statement failed", status)

    async def _execute_local(self, session: Session, req: T.TExecuteStatementReq, decision: Local):
        label = f"local:{decision.note}" if decision.note else "local"
        op = self._new_proxy_op(session, OpKind.LOCAL, req.statement, label)
        handle = self._register_op(session, op, None, T.TOperationType.EXECUTE_STATEMENT, True)
        timeout = req.queryTimeout if req.queryTimeout and req.queryTimeout > 0 else None
        op.task = asyncio.create_task(self._run_local(session, op, decision, timeout),
                                      name=f"local-op-{hex_id(handle.operationId)[:12]}")
        if not req.runAsync:
            await self._finish_sync(op)
        return T.TExecuteStatementResp(status=OK, operationHandle=handle)

    async def _run_local(self, session: Session, op: Operation, decision: Local,
                         timeout: float | None) -> None:
        op.to(OpState.RUNNING)
        try:
            async with asyncio.timeout(timeout):
                result = await decision.runner(session.upstream.run_sql)
            op.result = LocalRowSource(result.columns, result.rows, session.protocol)
            op.to(OpState.FINISHED)
        except asyncio.CancelledError:
            if op.state.running:
                op.to(OpState.CANCELED)
        except TimeoutError:
            op.error = T.TStatus(statusCode=T.TStatusCode.ERROR_STATUS, sqlState="HYT00",
                                 errorMessage=f"Query timed out after {timeout} seconds")
            op.to(OpState.TIMEDOUT)
        except Exception as e:  # noqa: BLE001 - reported through the operation's status
            _fail(op, e, "local statement failed")
        finally:
            op.done.set()

    async def _execute_hooked(self, session: Session, req: T.TExecuteStatementReq, sql: str,
                              label: str, after) -> T.TExecuteStatementResp:
        up = session.upstream
        fwd = T.TExecuteStatementReq(sessionHandle=up.handle, statement=sql,
                                     confOverlay=req.confOverlay, runAsync=True,
                                     queryTimeout=req.queryTimeout)
        resp = await up.conn.call("ExecuteStatement", fwd)
        if not succeeded(resp.status) or resp.operationHandle is None:
            self._log_statement(session, None, label, "ERROR", 0.0, req.statement)
            return resp
        self._track_session_state(session, req.statement)
        op = self._new_proxy_op(session, OpKind.HOOKED, req.statement, label)
        uh = resp.operationHandle
        resp.operationHandle = self._register_op(session, op, uh, uh.operationType, uh.hasResultSet)
        op.task = asyncio.create_task(self._run_hooked(session, op, after),
                                      name=f"hooked-op-{hex_id(resp.operationHandle.operationId)[:12]}")
        if not req.runAsync:
            await self._finish_sync(op)
        return resp

    async def _run_hooked(self, session: Session, op: Operation, after) -> None:
        op.to(OpState.RUNNING)
        conn = session.upstream.conn
        try:
            while True:
                t0 = time.monotonic()
                st = await conn.call("GetOperationStatus",
                                     T.TGetOperationStatusReq(operationHandle=op.upstream_handle))
                check(st.status, "GetOperationStatus")
                if st.operationState not in _RUNNING_STATES:
                    break
                if time.monotonic() - t0 < 0.5:   # upstream did not long-poll
                    await asyncio.sleep(0.1)
            if st.operationState == T.TOperationState.FINISHED_STATE:
                await after(session.upstream.run_sql)
                op.to(OpState.FINISHED)
                return
            op.error = T.TStatus(statusCode=T.TStatusCode.ERROR_STATUS, sqlState=st.sqlState,
                                 errorCode=st.errorCode, errorMessage=st.errorMessage)
            op.to({T.TOperationState.CANCELED_STATE: OpState.CANCELED,
                   T.TOperationState.TIMEDOUT_STATE: OpState.TIMEDOUT,
                   T.TOperationState.CLOSED_STATE: OpState.CLOSED}.get(st.operationState, OpState.ERROR))
        except asyncio.CancelledError:
            if op.state.running:
                op.to(OpState.CANCELED)
        except Exception as e:  # noqa: BLE001 - reported through the operation's status
            _fail(op, e, "post-statement hook failed")
        finally:
            op.done.set()

    # ------------------------------------------------------------------ operation calls

    async def _h_GetOperationStatus(self, conn, name, req: T.TGetOperationStatusReq, seqid):
        op = self._op(req.operationHandle)
        if op.kind is OpKind.UPSTREAM:
            reply = await self._forward_op_call(op, name, req, seqid)
            self._mirror_state(op, reply)
            return reply
        if op.state.running:
            try:
                await asyncio.wait_for(op.done.wait(), self.long_poll)
            except asyncio.TimeoutError:
                pass
        resp = T.TGetOperationStatusResp(status=OK, operationState=int(op.state))
        if op.state in (OpState.ERROR, OpState.TIMEDOUT, OpState.CANCELED) and op.error is not None:
            resp.sqlState = op.error.sqlState
            resp.errorCode = op.error.errorCode or 0
            resp.errorMessage = op.error.errorMessage
        return resp

    @staticmethod
    def _mirror_state(op: Operation, reply: bytes) -> None:
        """Remember upstream's state (small reply) so shutdown can drain running statements."""
        try:
            resp = codec.decode_reply(reply, "GetOperationStatus")
        except Exception:  # noqa: BLE001 - the client gets the reply as is
            return
        if resp.operationState is not None and resp.operationState in OpState._value2member_map_:
            op.state = OpState(resp.operationState)   # mirrored, not driven: no transition check

    async def _h_GetResultSetMetadata(self, conn, name, req: T.TGetResultSetMetadataReq, seqid):
        op = self._op(req.operationHandle)
        if op.kind is not OpKind.LOCAL:
            return await self._forward_op_call(op, name, req, seqid)
        self._require_finished(op)
        return T.TGetResultSetMetadataResp(status=OK, schema=op.result.schema())

    def _require_finished(self, op: Operation) -> None:
        if op.state is not OpState.FINISHED:
            if op.state is OpState.ERROR and op.error is not None:
                raise UpstreamError(op.error.errorMessage or "statement failed", op.error)
            raise ClientError(f"Expected state FINISHED, but found {op.state.name}", "HY010")

    async def _h_FetchResults(self, conn, name, req: T.TFetchResultsReq, seqid):
        op = self._op(req.operationHandle)
        if op.kind is OpKind.UPSTREAM:
            return await self._forward_op_call(op, name, req, seqid)
        columnar = op.session.columnar
        if req.fetchType == 1:        # operation log: must always succeed
            if op.kind is OpKind.HOOKED:
                return await self._forward_op_call(op, name, req, seqid)
            return T.TFetchResultsResp(status=OK, hasMoreRows=False, results=empty_log_rowset(columnar))
        if op.kind is OpKind.HOOKED:
            self._require_finished(op)
            return await self._forward_op_call(op, name, req, seqid)
        self._require_finished(op)
        if op.result.costly(req.maxRows):
            rowset, more = await asyncio.to_thread(op.result.fetch, req.maxRows, req.orientation)
        else:
            rowset, more = op.result.fetch(req.maxRows, req.orientation)
        return T.TFetchResultsResp(status=OK, hasMoreRows=more, results=rowset)

    async def _h_CancelOperation(self, conn, name, req: T.TCancelOperationReq, seqid):
        op = self._op(req.operationHandle)
        if op.task is not None and not op.task.done():
            op.task.cancel()
        if op.kind is OpKind.LOCAL:
            return T.TCancelOperationResp(status=OK)
        return await self._forward_op_call(op, name, req, seqid)

    async def _h_CloseOperation(self, conn, name, req: T.TCloseOperationReq, seqid):
        ident = req.operationHandle.operationId if req.operationHandle else None
        op = self.operations.find(ident)
        if op is None:
            # Tolerate handles this proxy already closed; unknown ones are an error.
            if ident is not None and bytes(ident.guid or b"") in self._recently_closed:
                return T.TCloseOperationResp(status=OK)
            raise InvalidHandle("OperationHandle", hex_id(ident))
        op.session.touch()
        reply: Any = T.TCloseOperationResp(status=OK)
        if op.upstream_handle is not None:
            try:
                reply = await self._forward_op_call(op, name, req, seqid)
            finally:
                self._forget_op(op, "closed")
        else:
            self._forget_op(op, "closed")
        return reply

    def _forget_op(self, op: Operation, why: str) -> None:
        if self.operations.remove(op.client_handle.operationId) is None:
            return
        op.session.operations.remove(op.client_handle.operationId)
        self._recently_closed[bytes(op.client_handle.operationId.guid)] = None
        if len(self._recently_closed) > 10000:
            self._recently_closed.pop(next(iter(self._recently_closed)))
        if op.task is not None and not op.task.done():
            op.task.cancel()
        final = op.state.name
        if op.kind is OpKind.UPSTREAM:
            op.state = OpState.CLOSED
        elif op.state is not OpState.CLOSED:
            op.to(OpState.CLOSED)
        self._log_statement(op.session, op, op.decision, final, time.monotonic() - op.created,
                            op.statement)

    def _log_statement(self, session: Session, op: Operation | None, decision: str, state: str,
                       duration: float, statement: str) -> None:
        if stmt_log.isEnabledFor(logging.INFO):
            stmt_log.info("statement session=%s user=%s op=%s decision=%s state=%s duration=%.3fs sql=%s",
                          session.id, safe(session.user, 100),
                          hex_id(op.client_handle.operationId) if op is not None else "-",
                          decision, state, duration, safe(statement or "", 200))

    async def _h_GetQueryId(self, conn, name, req: T.TGetQueryIdReq, seqid):
        op = self._op(req.operationHandle)
        if op.kind is OpKind.LOCAL:
            return T.TGetQueryIdResp(queryId=hex_id(op.client_handle.operationId))
        return await self._forward_op_call(op, name, req, seqid)

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
                    if op.upstream_handle is not None:
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


def _fail(op: Operation, exc: Exception, what: str) -> None:
    """A proxy-run operation ended in an error: the client reads it from the status (our
    own ProxyErrors are expected outcomes; anything else is logged with its traceback)."""
    if not isinstance(exc, ProxyError):
        log.exception("%s: %s", what, safe(op.statement, 200))
    op.error = to_status(exc)
    if op.state.running:
        op.to(OpState.ERROR)
