"""Statements under the running-statement cap, for Service's ExecuteStatement
(proxy/hs2/frontend.py, docs/limits.md).

With `[server] max_running_operations` set, a statement bound for Spark takes a slot of
the RunGate (proxy/hs2/limits.py) before it is sent, and gives it back when it ends:

  async, slot free  relayed as any statement (an UPSTREAM operation); the slot goes back
                    when the proxy sees it end: the client's status poll shows a final
                    state, or it is cancelled, closed, reaped, or its connection is lost;
  async, no slot    an operation PENDING in the gate's line is returned at once and the
                    client polls it; once a slot frees up a named task sends it, and from
                    then on it is relayed like the one above;
  sync, or hooked   driven by the proxy: a named task sends it (after waiting in line if
                    need be), polls Spark until it ends and then frees the slot. The
                    client's call (sync) or its polls (hooked) wait for that task.

A full line fails ExecuteStatement (53000); a wait that runs out fails the operation (53000).
The statement's timeout (the smaller of `query_timeout` and the client's queryTimeout) is
sent to Spark, which stops it at the deadline (TIMEDOUT); a statement the proxy drives is
also stopped by the proxy should Spark overrun it.

Upstream calls of the tasks are shielded: cancelling a task (CancelOperation,
CloseOperation) must not cut a Thrift call in half, which would break the session's
connection for the calls after it.
"""
from __future__ import annotations

import asyncio
import logging
import math
import time

from proxy.hs2.calls.statement import ENDED_STATES, OK, _RUNNING_STATES, end_statement, _fail, timed_out
from proxy.classify import Kind, classify
from proxy.errors import ProxyError, UpstreamError, succeeded
from proxy.hs2.handles import hex_id
from proxy.hs2.limits import effective_timeout
from proxy.hs2.operation import OpKind, OpState, Operation
from proxy.hs2.recovery import upstream_for
from proxy.hs2.session import Session
from proxy.thrift.gen.TCLIService import ttypes as T
from proxy.upstream import check

log = logging.getLogger("proxy.service")
# USE and SET only change the session, and clients send them while connecting (PyHive's
# USE, beeline's SETs): holding them back would make connecting fail under load.
_SESSION_STATE = (Kind.USE, Kind.SET, Kind.SET_REWRITE)


class GatedStatements:
    """Part of Service (its RunGate, settings, registries and statement log)."""

    def _gated(self, session: Session, req: T.TExecuteStatementReq) -> bool:
        # sync with a timeout: Spark would report success and then fail the fetch with no
        # SQLSTATE; driven by the proxy, the call itself fails with the timeout error
        return ((self.run_gate.enabled or (not req.runAsync and self._upstream_timeout(req)))
                and classify(req.statement or "", session.current_db).kind not in _SESSION_STATE)

    def _upstream_timeout(self, req: T.TExecuteStatementReq) -> int:
        """The queryTimeout sent to Spark (whole seconds; 0 = none)."""
        t = effective_timeout(self.settings.server.query_timeout, req.queryTimeout)
        return math.ceil(t) if t else 0

    def _release_run_slot(self, op: Operation) -> None:
        if op.holds_run_slot:
            op.holds_run_slot = False
            self.run_gate.release()

    async def _execute_gated(self, session: Session, req: T.TExecuteStatementReq, sql: str,
                             label: str, seqid: int, after=None, ended=None,
                             log_lines: tuple[str, ...] = ()) -> T.TExecuteStatementResp:
        try:
            waiter = self.run_gate.enter()         # a full line: this call fails now
        except ProxyError as e:
            self._log_statement(session, None, label, "REFUSED", req.statement,
                                sqlstate=e.sqlstate)
            end_statement(ended)
            raise
        if waiter is None and req.runAsync and after is None:
            try:
                resp = await self._execute_upstream(session, req, sql, label, seqid, log_lines)
            except BaseException:
                self.run_gate.release()
                raise
            handle = resp.operationHandle if succeeded(resp.status) else None
            op = self.operations.find(handle.operationId) if handle is not None else None
            if op is None:
                self.run_gate.release()
            else:
                self._hold_while_running(op)
            return resp
        op = self._new_proxy_op(session, OpKind.HOOKED, req.statement, label)
        op.log_lines = log_lines
        op.holds_run_slot = waiter is None
        handle = self._register_op(session, op, None, T.TOperationType.EXECUTE_STATEMENT, True)
        if waiter is not None:
            op.to(OpState.PENDING)
        driven = after is not None or not req.runAsync
        op.task = asyncio.create_task(
            self._run_gated(session, op, req, sql, waiter, driven, after, ended),
            name=f"gated-op-{hex_id(handle.operationId)[:12]}")
        if not req.runAsync:
            await self._finish_sync(op)
        return T.TExecuteStatementResp(status=OK, operationHandle=handle)

    async def _run_gated(self, session: Session, op: Operation, req: T.TExecuteStatementReq,
                         sql: str, waiter, driven: bool, after, ended) -> None:
        forwarding = None
        try:
            if waiter is not None:
                await self.run_gate.wait(waiter)
                op.holds_run_slot = True
            forwarding = asyncio.create_task(
                self._forward_gated(session, op, req, sql),
                name=f"{asyncio.current_task().get_name()}-forward")
            resp = await asyncio.shield(forwarding)
            if not succeeded(resp.status):
                op.error = resp.status
                op.to(OpState.ERROR)
                return
            self._track_session_state(session, req.statement)
            if not driven:     # from now on relayed; the slot is given back as for those
                op.kind = OpKind.UPSTREAM
                op.state = OpState.RUNNING
                self._hold_while_running(op)
                return
            op.to(OpState.RUNNING)
            timeout = effective_timeout(self.settings.server.query_timeout, req.queryTimeout)
            st = await self._poll_until_done(session, op, timeout)
            if st is None:                       # Spark overran the deadline
                await self._stop_upstream(session, op)
                op.error = timed_out(timeout)
                op.to(OpState.TIMEDOUT)
            elif st.operationState == T.TOperationState.FINISHED_STATE:
                if after is not None:
                    await after(self._spark_sql(session))
                op.to(OpState.FINISHED)
            else:
                state = ENDED_STATES.get(st.operationState, OpState.ERROR)
                op.error = (timed_out(timeout) if state is OpState.TIMEDOUT and timeout
                            else T.TStatus(statusCode=T.TStatusCode.ERROR_STATUS,
                                           sqlState=st.sqlState, errorCode=st.errorCode,
                                           errorMessage=st.errorMessage))
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
            if op.kind is not OpKind.UPSTREAM:
                self._release_run_slot(op)
            end_statement(ended)
            op.done.set()

    def _hold_while_running(self, op: Operation) -> None:
        op.holds_run_slot = True
        op.task = asyncio.create_task(self._watch_slot(op),
                                      name=f"run-slot-{hex_id(op.client_handle.operationId)[:12]}")

    async def _watch_slot(self, op: Operation) -> None:
        """Free the slot of a relayed statement that ended while its client was not looking
        (a client that polls frees it itself, through the mirrored state). Only a statement
        its client has not touched for a while is asked about: a status call holds the
        session's upstream connection for up to Spark's long poll."""
        quiet = max(2.0, self.long_poll + 1.0)
        conn = op.session.upstream.conn
        try:
            while op.holds_run_slot:
                await asyncio.sleep(quiet)
                if time.monotonic() - op.last_access < quiet or not op.holds_run_slot:
                    continue
                st = await asyncio.shield(conn.call("GetOperationStatus", T.TGetOperationStatusReq(
                    operationHandle=op.upstream_handle)))
                if succeeded(st.status) and st.operationState in _RUNNING_STATES:
                    continue
                if succeeded(st.status) and st.operationState in OpState._value2member_map_:
                    op.mirror(OpState(st.operationState))    # mirrored, as for the client
                break
        except UpstreamError:
            pass                  # the connection is gone: so is the statement
        self._release_run_slot(op)

    async def _forward_gated(self, session: Session, op: Operation,
                             req: T.TExecuteStatementReq, sql: str) -> T.TExecuteStatementResp:
        # Spark may have restarted while the statement waited in line: reopen first
        up = await upstream_for(self, session)
        fwd = T.TExecuteStatementReq(sessionHandle=up.handle, statement=sql,
                                     confOverlay=req.confOverlay, runAsync=True,
                                     queryTimeout=self._upstream_timeout(req))
        resp = await up.conn.call("ExecuteStatement", fwd)
        if succeeded(resp.status) and resp.operationHandle is not None:
            op.upstream_handle = resp.operationHandle
        elif succeeded(resp.status):
            resp.status = T.TStatus(statusCode=T.TStatusCode.ERROR_STATUS, sqlState="HY000",
                                    errorMessage="Spark returned no operation handle")
        return resp

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
