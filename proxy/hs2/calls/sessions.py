"""Session calls of Service (proxy/hs2/frontend.py): OpenSession, CloseSession, and what
happens when a client connection or a session's upstream connection goes away.

Each client session is backed by one upstream session (proxy/upstream.py), opened as the
client's user once proxy/slots.py grants it a slot.
"""
from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from proxy.errors import ProxyError, UpstreamError, succeeded
from proxy.hs2.handles import hex_id
from proxy.hs2.identity import Identity, ImpersonationRefused
from proxy.hs2.limits import SessionLimitReached, client_address
from proxy.logsafe import safe
from proxy.hs2.recovery import Reopen, lose_operations
from proxy.hs2.session import Session
from proxy.session import MAX_STALENESS_KEY, session_settings
from proxy.slots import TooManySessions
from proxy.thrift.gen.TCLIService import ttypes as T
from proxy.upstream import UpstreamSession

if TYPE_CHECKING:
    from proxy.hs2.connection import ClientConnection

log = logging.getLogger("proxy.service")
stmt_log = logging.getLogger("proxy.statement")
OK = T.TStatus(statusCode=T.TStatusCode.SUCCESS_STATUS)


class SessionCalls:
    """Part of Service (its registries, slots and upstream factory)."""

    async def _h_OpenSession(self, conn: ClientConnection, name: str, req: T.TOpenSessionReq, seqid: int):
        if conn.sasl_user is not None:     # HS2 trusts the transport, not req.username
            login, password = conn.sasl_user, conn.sasl_password
        else:
            login, password = (req.username or "anonymous"), (req.password or "")
        client_protocol = req.client_protocol if req.client_protocol is not None else 0
        try:
            ident = self.impersonation.resolve(login, req.configuration)
        except ImpersonationRefused as e:
            log.warning("session refused user=%s peer=%s: %s", safe(login, 64), conn.peer, e)
            self.audit.refused(login, conn.peer, e.sqlstate, str(e))
            self.observers.session("refused", login)
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
            self.audit.refused(user, conn.peer, e.sqlstate, str(e), ident.real_user)
            self.observers.session("refused", user)
            raise
        upstream = session = None
        try:
            upstream = self._factory()
            upstream.conn.health = self.health
            session, resp = await self._open_upstream(conn, ident, password, client_protocol,
                                                      upstream)
            session.admitted_as = (user, address)
        except ProxyError as e:
            self.audit.refused(user, conn.peer, e.sqlstate, str(e), ident.real_user)
            self.observers.session("refused", user)
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
        self.audit.session("session_open", session, time.monotonic() - t0)
        self.observers.session("open", user, session.client_info.get("ApplicationName", ""))
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
            self._release_run_slot(op)      # a lost statement no longer counts as running

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
            if session.admitted_as is not None:
                self.session_limits.release(*session.admitted_as)
        log.info("session close id=%s user=%s reason=%s duration=%.1fs", session.id,
                 safe(session.user, 64), reason, time.monotonic() - session.created)
        self.audit.session("session_close", session, time.monotonic() - session.created, reason)
        self.observers.session("close", session.user, session.client_info.get("ApplicationName", ""))

    async def connection_closed(self, conn: ClientConnection) -> None:
        for session in list(conn.sessions):
            await self.close_session(session, "disconnect")
