"""The mechanics of the statements the proxy drives (proxy/hs2/statements.py): a new
operation, waiting for Spark to end one, stopping one upstream, a decision's `ended` hook,
and the status an operation ends with when it fails or times out."""
from __future__ import annotations

import asyncio
import logging
import time

from proxy.errors import ProxyError, UpstreamError, to_status
from proxy.hs2.operation import OpKind, OpState, Operation
from proxy.hs2.session import Session
from proxy.logsafe import safe
from proxy.thrift.gen.TCLIService import ttypes as T
from proxy.upstream.client import check

log = logging.getLogger("proxy.service")
_RUNNING_STATES = (T.TOperationState.INITIALIZED_STATE, T.TOperationState.RUNNING_STATE,
                   T.TOperationState.PENDING_STATE)
ENDED_STATES = {T.TOperationState.CANCELED_STATE: OpState.CANCELED,
                T.TOperationState.TIMEDOUT_STATE: OpState.TIMEDOUT,
                T.TOperationState.CLOSED_STATE: OpState.CLOSED}
# Kept on an operation for its log line, which shows less than this.
STATEMENT_KEPT = 1000


def new_proxy_op(kind: OpKind, statement: str, label: str) -> Operation:
    """An EXECUTE_STATEMENT operation the proxy drives (its `done` is set when it ends)."""
    op = Operation(kind, T.TOperationType.EXECUTE_STATEMENT, statement=statement[:STATEMENT_KEPT],
                   decision=label)
    op.done = asyncio.Event()
    return op


async def poll_until_done(session: Session, op: Operation,
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


async def stop_upstream(session: Session, op: Operation, close: bool = False) -> None:
    """Cancel (or close) what Spark runs for `op`; a failure is logged, not raised."""
    name, req = (("CloseOperation", T.TCloseOperationReq(operationHandle=op.upstream_handle))
                 if close else
                 ("CancelOperation", T.TCancelOperationReq(operationHandle=op.upstream_handle)))
    try:
        resp = await asyncio.shield(session.upstream.conn.call(name, req))
        check(resp.status, name)
    except UpstreamError as e:
        log.warning("%s of a statement upstream failed: %s", name, e)


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


def fail(op: Operation, exc: Exception, what: str) -> None:
    """A proxy-run operation ended in an error: the client reads it from the status (our
    own ProxyErrors are expected outcomes; anything else is logged with its traceback)."""
    if not isinstance(exc, ProxyError):
        log.exception("%s: %s", what, safe(op.statement, 200))
    op.error = op.lost or to_status(exc)     # lost: the upstream failure, named
    if op.state.running:
        op.to(OpState.ERROR)
