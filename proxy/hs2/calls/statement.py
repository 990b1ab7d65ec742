"""Statements the proxy runs itself, for Service's ExecuteStatement (proxy/hs2/frontend.py):
LOCAL (the router's runner makes the result) and HOOKED (forwarded, then the proxy polls
upstream and awaits the decision's `after` hook before reporting FINISHED). Each runs in
a named task owned by its operation (cancelled when the operation is closed).
"""
from __future__ import annotations

import asyncio
import logging
import time

from proxy.errors import ProxyError, UpstreamError, succeeded, to_status
from proxy.hs2.handles import hex_id
from proxy.hs2.limits import effective_timeout
from proxy.logsafe import safe
from proxy.hs2.operation import OpKind, OpState, Operation
from proxy.hs2.recovery import execute_statement, upstream_for
from proxy.results import LocalRowSource
from proxy.router import Local
from proxy.hs2.session import Session
from proxy.thrift.gen.TCLIService import ttypes as T
from proxy.upstream import check

log = logging.getLogger("proxy.service")
OK = T.TStatus(statusCode=T.TStatusCode.SUCCESS_STATUS)
_RUNNING_STATES = (T.TOperationState.INITIALIZED_STATE, T.TOperationState.RUNNING_STATE,
                   T.TOperationState.PENDING_STATE)
ENDED_STATES = {T.TOperationState.CANCELED_STATE: OpState.CANCELED,
                T.TOperationState.TIMEDOUT_STATE: OpState.TIMEDOUT,
                T.TOperationState.CLOSED_STATE: OpState.CLOSED}
# Kept on an operation for its log line, which shows less than this.
STATEMENT_KEPT = 1000


class ProxyRunStatements:
    """Part of Service (its operation registry and statement log)."""

    def _new_proxy_op(self, session: Session, kind: OpKind, statement: str, label: str) -> Operation:
        op = Operation(kind, T.TOperationType.EXECUTE_STATEMENT, statement=statement[:STATEMENT_KEPT],
                       decision=label)
        op.done = asyncio.Event()
        return op

    def _spark_sql(self, session: Session):
        """run_sql on the session's Spark session for a proxy-run statement: opened anew
        first if Spark restarted (proxy/hs2/recovery.py)."""
        async def run_sql(sql: str):
            return await (await upstream_for(self, session)).run_sql(sql)
        return run_sql

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
        timeout = effective_timeout(self.settings.server.query_timeout, req.queryTimeout)
        op.task = asyncio.create_task(self._run_local(session, op, decision, timeout),
                                      name=f"local-op-{hex_id(handle.operationId)[:12]}")
        if not req.runAsync:
            await self._finish_sync(op)
        return T.TExecuteStatementResp(status=OK, operationHandle=handle)

    def _execute_served(self, session: Session, req: T.TExecuteStatementReq, result,
                        label: str, log_lines: tuple[str, ...] = ()) -> T.TExecuteStatementResp:
        """A datamap answer the proxy computed already (proxy/serving): the operation is
        FINISHED when the client gets its handle."""
        op = self._new_proxy_op(session, OpKind.LOCAL, req.statement, label)
        op.log_lines = log_lines
        handle = self._register_op(session, op, None, T.TOperationType.EXECUTE_STATEMENT, True)
        op.to(OpState.RUNNING)
        try:
            op.result = LocalRowSource(result.columns, result.rows, session.protocol)
            op.to(OpState.FINISHED)
        except Exception as e:  # noqa: BLE001 - reported through the operation's status
            _fail(op, e, "served result failed")
        op.done.set()
        return T.TExecuteStatementResp(status=OK, operationHandle=handle)

    async def _run_local(self, session: Session, op: Operation, decision: Local,
                         timeout: float | None) -> None:
        op.to(OpState.RUNNING)
        try:
            async with asyncio.timeout(timeout):
                result = await decision.runner(self._spark_sql(session))
            op.result = LocalRowSource(result.columns, result.rows, session.protocol)
            op.to(OpState.FINISHED)
        except asyncio.CancelledError:
            if op.state.running:
                op.to(OpState.CANCELED)
        except TimeoutError:
            op.error = timed_out(timeout)
            op.to(OpState.TIMEDOUT)
        except Exception as e:  # noqa: BLE001 - reported through the operation's status
            _fail(op, e, "local statement failed")
        finally:
            op.done.set()

    async def _execute_hooked(self, session: Session, req: T.TExecuteStatementReq, sql: str,
                              label: str, after, ended=None) -> T.TExecuteStatementResp:
        try:
            resp = await self._start_hooked(session, req, sql, label, after, ended)
        except BaseException:
            end_statement(ended)
            raise
        return resp

    async def _start_hooked(self, session: Session, req: T.TExecuteStatementReq, sql: str,
                            label: str, after, ended) -> T.TExecuteStatementResp:
        up = session.upstream
        fwd = T.TExecuteStatementReq(sessionHandle=up.handle, statement=sql,
                                     confOverlay=req.confOverlay, runAsync=True,
                                     queryTimeout=self._upstream_timeout(req))
        try:
            resp = await execute_statement(up, fwd, req.statement or "")
        except ProxyError as e:       # the connection broke under it
            self._log_statement(session, None, label, "ERROR", req.statement,
                                sqlstate=e.sqlstate)
            raise
        if not succeeded(resp.status) or resp.operationHandle is None:
            self._log_statement(session, None, label, "ERROR", req.statement,
                                sqlstate=resp.status.sqlState if resp.status else None)
            end_statement(ended)
            return resp
        self._track_session_state(session, req.statement)
        op = self._new_proxy_op(session, OpKind.HOOKED, req.statement, label)
        uh = resp.operationHandle
        resp.operationHandle = self._register_op(session, op, uh, uh.operationType, uh.hasResultSet)
        op.task = asyncio.create_task(self._run_hooked(session, op, after, ended),
                                      name=f"hooked-op-{hex_id(resp.operationHandle.operationId)[:12]}")
        if not req.runAsync:
            await self._finish_sync(op)
        return resp

    async def _run_hooked(self, session: Session, op: Operation, after, ended=None) -> None:
        op.to(OpState.RUNNING)
        try:
            st = await self._poll_until_done(session, op)
            if st.operationState == T.TOperationState.FINISHED_STATE:
                await after(self._spark_sql(session))
                op.to(OpState.FINISHED)
                return
            op.error = T.TStatus(statusCode=T.TStatusCode.ERROR_STATUS, sqlState=st.sqlState,
                                 errorCode=st.errorCode, errorMessage=st.errorMessage)
            op.to(ENDED_STATES.get(st.operationState, OpState.ERROR))
        except asyncio.CancelledError:
            if op.state.running:
                op.to(OpState.CANCELED)
        except Exception as e:  # noqa: BLE001 - reported through the operation's status
            _fail(op, e, "post-statement hook failed")
        finally:
            end_statement(ended)
            op.done.set()

    async def _poll_until_done(self, session: Session, op: Operation,
                               timeout: float | None = None) -> T.TGetOperationStatusResp | None:
        """Upstream's final status of `op`, or None once Spark overran `timeout` (it
        long-polls, so that is noticed within a few seconds). The calls are shielded:
        cancelling the caller must not cut one in half and break the connection."""
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


def timed_out(seconds: float) -> T.TStatus:
    """HiveServer2's text for a statement stopped at its query timeout."""
    return T.TStatus(statusCode=T.TStatusCode.ERROR_STATUS, sqlState="HYT00",
                     errorMessage=f"Query timed out after {seconds:g} seconds")


def end_statement(ended) -> None:
    """Run a decision's `ended` hook (a load's hold on its tables ends) once the statement is
    over or was never sent; a failing hook is logged, never the statement's error."""
    if ended is not None:
        try:
            ended()
        except Exception:  # noqa: BLE001 - bookkeeping must not fail the statement
            log.warning("statement end hook failed", exc_info=True)


def _fail(op: Operation, exc: Exception, what: str) -> None:
    """A proxy-run operation ended in an error: the client reads it from the status (our
    own ProxyErrors are expected outcomes; anything else is logged with its traceback)."""
    if not isinstance(exc, ProxyError):
        log.exception("%s: %s", what, safe(op.statement, 200))
    op.error = op.lost or to_status(exc)     # lost: the upstream failure, named
    if op.state.running:
        op.to(OpState.ERROR)
