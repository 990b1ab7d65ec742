"""The client sessions: OpenSession, CloseSession, what happens when a client connection or
a session's upstream connection goes away, and the calls forwarded with only the session
handle swapped (metadata, GetInfo, SetClientInfo).

Each client session is backed by one upstream session (proxy/upstream/client.py), opened as the
client's user once proxy/upstream/slots.py grants it a slot and proxy/hs2/limits.py admits it.
Metadata results get a proxy operation handle (OperationManager); their rows are relayed as
upstream's bytes.
"""
from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Any, Callable

from proxy.errors import ClientError, ProxyError, UpstreamError, succeeded
from proxy.hs2.connection import ClientConnection
from proxy.hs2.handles import HandleRegistry, hex_id
from proxy.hs2.identity import Identity, ImpersonationPolicy, ImpersonationRefused
from proxy.hs2.limits import SessionLimitReached, SessionLimits, client_address
from proxy.hs2.operation import OpKind, OpState, Operation
from proxy.hs2.operation_manager import OperationManager
from proxy.hs2.recovery import Reopen, UpstreamHealth, lose_operations, upstream_for
from proxy.hs2.session import Session
from proxy.logsafe import safe
from proxy.observability.observe import Observers, SessionDetail
from proxy.routing.session_keys import MAX_STALENESS_KEY, session_settings
from proxy.upstream.slots import SessionSlots, TooManySessions
from proxy.thrift import codec
from proxy.thrift.gen.TCLIService import ttypes as T
from proxy.upstream.client import UpstreamSession

log = logging.getLogger("proxy.service")
stmt_log = logging.getLogger("proxy.statement")
OK = T.TStatus(statusCode=T.TStatusCode.SUCCESS_STATUS)
SESSION_CALLS = ("GetInfo", "GetTypeInfo", "GetCatalogs", "GetSchemas", "GetTables",
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

UpstreamFactory = Callable[[], UpstreamSession]


class SessionManager:
    """The session registry, the upstream sessions behind it (slots, limits after login,
    impersonation, the upstream's health) and the session calls."""

    def __init__(self, settings, upstream_factory: UpstreamFactory, operations: OperationManager,
                 observers: Observers, health_path: Path | None = None):
        self.settings = settings
        self.sessions: HandleRegistry[Session] = HandleRegistry("SessionHandle")
        self._factory = upstream_factory
        self.operations = operations
        up = settings.upstream
        self.slots = SessionSlots(up.max_sessions, up.max_sessions_per_user,
                                  up.session_queue_size, up.session_queue_timeout)
        s = settings.server          # limits after login (proxy/hs2/limits.py, docs/limits.md)
        self.session_limits = SessionLimits(s.limit_connections_per_user,
                                            s.limit_connections_per_ipaddress,
                                            s.limit_connections_per_user_ipaddress)
        self.health = UpstreamHealth(f"{up.host}:{up.port}", health_path,
                                     listen=f"{s.host}:{s.port}")
        self.impersonation = ImpersonationPolicy(settings.server.impersonation)   # SIGHUP: update()
        self.observers = observers

    def session(self, handle: T.TSessionHandle | None) -> Session:
        s = self.sessions.get(handle.sessionId if handle else None)
        s.touch()
        return s

    # ------------------------------------------------------------------ open, close

    async def open(self, conn: ClientConnection, name: str, req: T.TOpenSessionReq, seqid: int):
        if conn.sasl_user is not None:     # HS2 trusts the transport, not req.username
            login, password = conn.sasl_user, conn.sasl_password
        else:
            login, password = (req.username or "anonymous"), (req.password or "")
        client_protocol = req.client_protocol if req.client_protocol is not None else 0
        try:
            ident = self.impersonation.resolve(login, req.configuration)
        except ImpersonationRefused as e:
            log.warning("session refused user=%s peer=%s: %s", safe(login, 64), conn.peer, e)
            self._refused(login, conn, e)
            raise
        user = ident.user
        session_settings(ident.configuration)   # a bad proxy setting fails before Spark is asked
        t0 = time.monotonic()
        address = client_address(conn.peer)
        try:
            self.session_limits.admit(user, address)
            try:
                await self.slots.acquire(user)
            except BaseException:
                self.session_limits.release(user, address)
                raise
        except (TooManySessions, SessionLimitReached) as e:
            log.warning("session refused user=%s peer=%s after %.1fs: %s", safe(user, 64),
                        conn.peer, time.monotonic() - t0, e)
            self._refused(user, conn, e, ident.real_user)
            raise
        upstream = session = None
        try:
            upstream = self._factory()
            upstream.conn.health = self.health
            session, resp = await self._open_upstream(conn, ident, password, client_protocol,
                                                      upstream)
            session.admitted_as = (user, address)
        except ProxyError as e:
            self._refused(user, conn, e, ident.real_user)
            raise
        finally:
            if session is None:
                self.slots.release(user)
                self.session_limits.release(user, address)
                if upstream is not None:
                    upstream.conn.close()
        log.info("session open id=%s user=%s peer=%s protocol=V%d (client V%d) %.0fms",
                 session.id, safe(user, 64), conn.peer, session.protocol + 1, client_protocol + 1,
                 (time.monotonic() - t0) * 1000)
        self._observe("open", session, time.monotonic() - t0)
        return T.TOpenSessionResp(status=resp.status, serverProtocolVersion=resp.serverProtocolVersion,
                                  sessionHandle=T.TSessionHandle(sessionId=session.handle),
                                  configuration=resp.configuration)

    async def _open_upstream(self, conn: ClientConnection, ident: Identity, password: str,
                             client_protocol: int,
                             upstream: UpstreamSession) -> tuple[Session, T.TOpenSessionResp]:
        user = ident.user
        try:
            resp = await upstream.open(user, password, client_protocol, ident.configuration,
                                       real_user=ident.real_user)
        except UpstreamError as e:
            self._log_open_failed(user, conn, upstream, str(e))
            raise
        if not succeeded(resp.status) or upstream.handle is None:
            self._log_open_failed(user, conn, upstream,
                                  resp.status.errorMessage if resp.status else "no status")
            raise UpstreamError("OpenSession failed", resp.status)
        session = Session(user=user, protocol=resp.serverProtocolVersion,
                          client_protocol=client_protocol,
                          configuration=ident.configuration, upstream=upstream,
                          peer=conn.peer, real_user=ident.real_user)
        # what `SET datamap.max_staleness` shows until the session sets its own
        session.conf.setdefault(MAX_STALENESS_KEY, self.settings.datamaps.max_staleness)
        session.handle = self.sessions.add(session)
        conn.sessions.add(session)
        session.connection = conn
        session.reopen = Reopen(password)
        upstream.conn.on_break = lambda reason: self._upstream_lost(session, reason)
        return session, resp

    def _refused(self, user: str, conn: ClientConnection, e: Exception,
                 real_user: str | None = None) -> None:
        self.observers.session("refused", user, "", SessionDetail(
            peer=conn.peer, real_user=real_user, reason=str(e), sqlstate=e.sqlstate))

    def _observe(self, event: str, session: Session, duration_s: float,
                 reason: str | None = None) -> None:
        detail = SessionDetail(peer=session.peer, session_id=session.id,
                               real_user=session.real_user,
                               configuration=session.configuration if event == "open" else None,
                               duration_s=duration_s, reason=reason)
        self.observers.session(event, session.user,
                               session.client_info.get("ApplicationName", ""), detail)

    @staticmethod
    def _log_open_failed(user: str, conn: ClientConnection, upstream: UpstreamSession,
                         reason: str | None) -> None:
        log.warning("upstream OpenSession failed user=%s peer=%s upstream=%s: %s", safe(user, 64),
                    conn.peer, upstream.conn.addr, safe(reason or "no reason given", 500))

    def _upstream_lost(self, session: Session, reason: str) -> None:
        """The upstream connection of `session` broke: every statement it was running is
        gone with it. Say which; the session stays, and its next call that needs Spark
        opens a new upstream session (proxy/hs2/recovery.py)."""
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
        lose_operations(session, reason)
        for op in list(session.operations.values()):
            self.operations.release_run_slot(op)      # a lost statement no longer counts as running

    async def close_call(self, conn, name, req: T.TCloseSessionReq, seqid):
        session = self.session(req.sessionHandle)
        await self.close(session, "client")
        return T.TCloseSessionResp(status=OK)

    async def close(self, session: Session, reason: str) -> None:
        """Close a session's operations and its upstream session. Idempotent."""
        if self.sessions.remove(session.handle) is None:
            return
        conn = getattr(session, "connection", None)
        if conn is not None:
            conn.sessions.discard(session)
        for op in list(session.operations.values()):
            self.operations.forget(op, "session closed")
        try:
            await session.upstream.close()
        finally:
            self.slots.release(session.user)
            if session.admitted_as is not None:
                self.session_limits.release(*session.admitted_as)
        log.info("session close id=%s user=%s reason=%s duration=%.1fs", session.id,
                 safe(session.user, 64), reason, time.monotonic() - session.created)
        self._observe("close", session, time.monotonic() - session.created, reason)

    async def connection_closed(self, conn: ClientConnection) -> None:
        for session in list(conn.sessions):
            await self.close(session, "disconnect")

    async def reap_idle(self, now: float) -> None:
        """Close the sessions idle for longer than idle_session_timeout."""
        s_to = self.settings.server.idle_session_timeout
        if s_to and s_to > 0:
            for session in list(self.sessions.values()):
                if session.idle_for(now) > s_to:
                    await self.close(session, "idle timeout")

    async def close_all(self, reason: str) -> None:
        for session in list(self.sessions.values()):
            try:
                await asyncio.wait_for(self.close(session, reason), 30.0)
            except (asyncio.TimeoutError, ProxyError) as e:
                log.warning("closing session %s: %s", session.id, e)

    # ------------------------------------------------------------------ forwarded calls

    async def forward(self, conn, name: str, req: Any, seqid: int):
        session = self.session(req.sessionHandle)
        up = await upstream_for(self, session)
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
            resp.operationHandle = self.operations.register(session, op, resp.operationHandle,
                                                            resp.operationHandle.operationType,
                                                            resp.operationHandle.hasResultSet)
        return resp

    async def get_info(self, conn, name, req: T.TGetInfoReq, seqid):
        """Forward only the codes Spark implements: for any other code STS 4.3 fails to
        serialise its own error reply and drops the connection (the session would die)."""
        session = self.session(req.sessionHandle)
        if req.infoType in _UPSTREAM_INFO_TYPES:
            up = await upstream_for(self, session)
            saved, req.sessionHandle = req.sessionHandle, up.handle
            try:
                return await up.conn.call_raw(codec.encode_call(name, seqid, req))
            finally:
                req.sessionHandle = saved
        if req.infoType in _LOCAL_INFO_LENGTHS:
            return T.TGetInfoResp(status=OK, infoValue=T.TGetInfoValue(lenValue=128))
        label = T.TGetInfoType._VALUES_TO_NAMES.get(req.infoType, str(req.infoType))
        raise ClientError(f"Unrecognized GetInfoType value: {label}", "HY096")

    async def set_client_info(self, conn, name, req: T.TSetClientInfoReq, seqid):
        session = self.session(req.sessionHandle)
        session.client_info.update(req.configuration or {})
        up = await upstream_for(self, session)
        saved, req.sessionHandle = req.sessionHandle, up.handle
        try:
            return await up.conn.call(name, req, seqid)
        except UpstreamError as e:
            if "rejected SetClientInfo" in str(e):   # backend predates the call
                return T.TSetClientInfoResp(status=OK)
            raise
        finally:
            req.sessionHandle = saved
