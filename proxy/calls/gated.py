"""Statements run under the running-operation cap or the server's query timeout, for
Service's ExecuteStatement (proxy/service.py, docs/limits.md).

With `[server] max_running_operations` or `query_timeout` set, a statement bound for Spark
is driven by the proxy (an OpKind.HOOKED operation) instead of being relayed: the proxy must
know when it ends to free its slot, and must be able to stop it at its deadline whatever the
client does. Without either setting nothing here runs and statements are relayed as before.

  slot free  -> ExecuteStatement is forwarded at once (its errors are the call's, as when
                relayed), then a named task polls Spark until the statement ends;
  no slot    -> the operation is PENDING in the RunGate's line (async: the handle is
                returned at once and the client polls; sync: the call waits); once a slot
                frees up the task forwards it. A full line fails the call (53000); a wait
                that runs out fails the operation (53000).
  deadline   -> the smaller of query_timeout and the client's queryTimeout, counted from
                the forward: the proxy cancels the statement upstream and the operation is
                TIMEDOUT, "Query timed out after N seconds" (HYT00). The session stays.

Upstream calls of the task are shielded: cancelling the task (CancelOperation,
CloseOperation) must not cut a Thrift call in half, which would break the session's
connection for the calls after it.
"""
from __future__ import annotations

import asyncio
import logging
import math
import time

from proxy.calls.statement import OK, _RUNNING_STATES, _call, _fail, timed_out
from proxy.errors import ProxyError, UpstreamError, succeeded
from proxy.handles import hex_id
from proxy.limits import effective_timeout
from proxy.operations import OpKind, OpState, Operation
from proxy.session import Session
from proxy.thrift.gen.TCLIService import ttypes as T
from proxy.upstream import check

log = logging.getLogger("proxy.service")
_ENDED = {T.TOperationState.CANCELED_STATE: OpState.CANCELED,
          T.TOperationState.TIMEDOUT_STATE: OpState.TIMEDOUT,
          T.TOperationState.CLOSED_STATE: OpState.CLOSED}


class GatedStatements:
    """Part of Service (its RunGate, settings, registries and statement log)."""

    def _gated(self) -> bool:
        return self.run_gate.enabled or self.settings.server.query_timeout > 0

    async def _execute_gated(self, session: Session, req: T.TExecuteStatementReq, sql: str,
                             label: str, after=None, ended=None,
                             log_lines: tuple[str, ...] = ()) -> T.TExecuteStatementResp:
        try:
            waiter = self.run_gate.enter()         # a full line: this call fails now
        except ProxyError:
            self._log_statement(session, None, label, "REFUSED", 0.0, req.statement)
            _call(ended)
            raise
        op = self._new_proxy_op(session, OpKind.HOOKED, req.statement, label)
        op.log_lines = log_lines
        timeout = effective_timeout(self.settings.server.query_timeout, req.queryTimeout)
        if waiter is None:
            try:
                resp = await self._forward_gated(session, op, req, sql, timeout)
            except BaseException:
                self.run_gate.release()
                _call(ended)
                raise
            if not succeeded(resp.status):
                self.run_gate.release()
                self._log_statement(session, None, label, "ERROR", 0.0, req.statement)
                _call(ended)
                return resp
            uh = op.upstream_handle
            handle = self._register_op(session, op, uh, uh.operationType, uh.hasResultSet)
            self._track_session_state(session, req.statement)
        else:
            handle = self._register_op(session, op, None, T.TOperationType.EXECUTE_STATEMENT, True)
            op.to(OpState.PENDING)
        op.task = asyncio.create_task(
            self._run_gated(session, op, req, sql, waiter, timeout, after, ended),
            name=f"gated-op-{hex_id(handle.operationId)[:12]}")
        if not req.runAsync:
            await self._finish_sync(op)
        return T.TExecuteStatementResp(status=OK, operationHandle=handle)

    async def _forward_gated(self, session: Session, op: Operation, req: T.TExecuteStatementReq,
                             sql: str, timeout: float | None) -> T.TExecuteStatementResp:
        # Spark enforces the deadline too (its own TIMEDOUT) and to the second; the proxy's
        # check below is the backstop.
        fwd = T.TExecuteStatementReq(sessionHandle=session.upstream.handle, statement=sql,
                                     confOverlay=req.confOverlay, runAsync=True,
                                     queryTimeout=math.ceil(timeout) if timeout else 0)
        resp = await asyncio.shield(session.upstream.conn.call("ExecuteStatement", fwd))
        if succeeded(resp.status) and resp.operationHandle is not None:
            op.upstream_handle = resp.operationHandle
        elif succeeded(resp.status):
            resp.status = T.TStatus(statusCode=T.TStatusCode.ERROR_STATUS, sqlState="HY000",
                                    errorMessage="Spark returned no operation handle")
        return resp

    async def _run_gated(self, session: Session, op: Operation, req: T.TExecuteStatementReq,
                         sql: str, waiter, timeout: float | None, after, ended) -> None:
        holding = waiter is None
        forwarding = None
        try:
            if waiter is not None:
                await self.run_gate.wait(waiter)
                holding = True
                forwarding = asyncio.create_task(
                    self._forward_gated(session, op, req, sql, timeout),
                    name=f"{asyncio.current_task().get_name()}-forward")
                resp = await asyncio.shield(forwarding)
                if not succeeded(resp.status):
                    op.error = resp.status
                    op.to(OpState.ERROR)
                    return
                self._track_session_state(session, req.statement)
            op.to(OpState.RUNNING)
            st = await self._poll_until_done(session, op, timeout)
            if st is None:                       # the proxy's deadline passed
                await self._stop_upstream(session, op)
                op.error = timed_out(timeout)
                op.to(OpState.TIMEDOUT)
                log.info("statement timed out after %gs, cancelled upstream: op=%s", timeout,
                         hex_id(op.client_handle.operationId))
            elif st.operationState == T.TOperationState.FINISHED_STATE:
                if after is not None:
                    await after(session.upstream.run_sql)
                op.to(OpState.FINISHED)
            else:
                state = _ENDED.get(st.operationState, OpState.ERROR)
                op.error = (timed_out(timeout) if state is OpState.TIMEDOUT and timeout
                            and not st.errorMessage else
                            T.TStatus(statusCode=T.TStatusCode.ERROR_STATUS, sqlState=st.sqlState,
                                      errorCode=st.errorCode, errorMessage=st.errorMessage))
                op.to(state)
        except asyncio.CancelledError:
            if forwarding is not None and not forwarding.done():
                # cancelled or closed while Spark was starting it: let the call finish,
                # then stop what it started (the client can no longer reach it)
                await asyncio.wait({forwarding})
                if op.upstream_handle is not None:
                    await self._stop_upstream(session, op, close=op.state is OpState.CLOSED)
            if op.state.running:
                op.to(OpState.CANCELED)
        except Exception as e:  # noqa: BLE001 - reported through the operation's status
            _fail(op, e, "statement failed")
        finally:
            if holding:
                self.run_gate.release()
            _call(ended)
            op.done.set()

    async def _poll_until_done(self, session: Session, op: Operation,
                               timeout: float | None) -> T.TGetOperationStatusResp | None:
        """Upstream's final status, or None once `timeout` passed (a status call in flight
        is awaited first: Spark long-polls, so that is a few seconds at most)."""
        deadline = None if timeout is None else time.monotonic() + timeout + 1.0
        conn = session.upstream.conn
        while True:
            t0 = time.monotonic()
            if deadline is not None and t0 >= deadline:
                return None
            st = await asyncio.shield(conn.call(
                "GetOperationStatus", T.TGetOperationStatusReq(operationHandle=op.upstream_handle)))
            check(st.status, "GetOperationStatus")
            if st.operationState not in _RUNNING_STATES:
                return st
            if time.monotonic() - t0 < 0.5:       # upstream did not long-poll
                await asyncio.sleep(0.1)

    @staticmethod
    async def _stop_upstream(session: Session, op: Operation, close: bool = False) -> None:
        name, req = (("CloseOperation", T.TCloseOperationReq(operationHandle=op.upstream_handle))
                     if close else
                     ("CancelOperation", T.TCancelOperationReq(operationHandle=op.upstream_handle)))
        try:
            resp = await asyncio.shield(session.upstream.conn.call(name, req))
            check(resp.status, name)
        except UpstreamError as e:
            log.warning("%s of a statement upstream failed: %s", name, e)
