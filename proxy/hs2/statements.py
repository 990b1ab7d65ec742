"""ExecuteStatement: the router's decision, then the statement forwarded (UPSTREAM), run by
the proxy (LOCAL: the router's runner makes the result; a datamap answer already served),
or forwarded and then finished by the proxy (HOOKED: it polls upstream and awaits the
decision's `after` hook before reporting FINISHED). Each proxy-run statement runs in a
named task owned by its operation (cancelled when the operation is closed).

Statements under the running-statement cap (docs/limits.md): with `[server]
max_running_operations` set, a statement bound for Spark takes a slot of the RunGate
(proxy/hs2/limits.py) before it is sent, and gives it back when it ends:

  async, slot free  relayed as any statement (an UPSTREAM operation); the slot goes back
                    when the proxy sees it end (proxy/hs2/run_slots.py): the client's status
                    poll shows a final state, or it is cancelled, closed, reaped, or its
                    connection is lost;
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
import dataclasses
import logging
import math

from proxy.routing.classify import Kind, classify
from proxy.errors import ClientError, ProxyError, UpstreamError, succeeded
from proxy.hs2 import statement_facts
from proxy.hs2.statement_facts import decided
from proxy.hs2.handles import hex_id
from proxy.hs2.limits import RunGate, effective_timeout
from proxy.hs2.operation import OpKind, OpState, Operation
from proxy.hs2.operation_manager import OperationManager
from proxy.hs2.recovery import execute_statement, upstream_for
from proxy.hs2.run_slots import hold_while_running
from proxy.hs2.session import Session, track_statement
from proxy.hs2.session_manager import SessionManager
from proxy.hs2.statement_ops import (ENDED_STATES, STATEMENT_KEPT, end_statement, fail,
                                     new_proxy_op, poll_until_done, stop_upstream, timed_out)
from proxy.observability.observe import BYPASSED, FORWARDED, LOCAL, REFUSED, REWRITTEN, SERVED
from proxy.thrift.rowsets import LocalRowSource
from proxy.routing.router import (
    Local, PassThrough, Reject, Rewrite, Router, Serve, StatementContext,
)
from proxy.routing import progress
from proxy.routing.router import log_line
from proxy.routing.session_keys import BLOCKED_KEY, semantic_setting
from proxy.thrift.gen.TCLIService import ttypes as T

log = logging.getLogger("proxy.service")
OK = T.TStatus(statusCode=T.TStatusCode.SUCCESS_STATUS)
# USE and SET only change the session, and clients send them while connecting (PyHive's
# USE, beeline's SETs): holding them back would make connecting fail under load.
_SESSION_STATE = (Kind.USE, Kind.SET, Kind.SET_REWRITE)


def _spark_because(how: str) -> str:
    """ServingTier.answer's `how` when Spark answers, "spark (<why>)" -> <why>."""
    if how.startswith("spark (") and how.endswith(")"):
        return how[len("spark ("):-1]
    return how


class StatementRunner:
    """ExecuteStatement over the session and operation managers: decide, then forward, run
    locally, serve, or forward and finish (hooked), under the running-statement cap."""

    def __init__(self, settings, router: Router, sessions: SessionManager,
                 operations: OperationManager, run_gate: RunGate):
        self.settings = settings
        self.router = router
        self.sessions = sessions
        self.operations = operations
        self.run_gate = run_gate

    async def execute(self, conn, name, req: T.TExecuteStatementReq, seqid):
        with statement_facts.arriving():
            return await self._execute_statement(req, seqid)

    async def _execute_statement(self, req: T.TExecuteStatementReq, seqid: int):
        session = self.sessions.session(req.sessionHandle)
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
            self.operations.log_statement(session, None, "reject", "ERROR", statement,
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
                f"{note} served={how}" if note else f"served={how}"),
                not_served=_spark_because(how))
        decided(BYPASSED if decision.bypassed else
                 REWRITTEN if isinstance(decision, Rewrite) else FORWARDED,
                 getattr(decision, "datamaps", ()), decision.why_not,
                 getattr(decision, "not_served", ""))
        sql = decision.sql if isinstance(decision, Rewrite) else statement
        label = ("rewrite" if isinstance(decision, Rewrite) else "pass") + (
            f":{decision.note}" if decision.note else "")
        try:
            up = await upstream_for(self.sessions, session)     # a new one if Spark restarted
            for first in decision.before:    # e.g. REFRESH TABLE: its failure is the statement's
                await up.run_sql(first)
        except BaseException as e:
            # never sent: a load's hold on its tables ends here, and the audit says so
            end_statement(getattr(decision, "ended", None))
            if isinstance(e, ProxyError):
                self.operations.log_statement(session, None, label, "ERROR", statement,
                                              sqlstate=e.sqlstate)
            raise
        log_lines = decision.log
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
            self.operations.log_statement(session, None, label, "ERROR", req.statement, sqlstate=e.sqlstate)
            raise
        if not succeeded(resp.status) or resp.operationHandle is None:
            self.operations.log_statement(session, None, label, "ERROR", req.statement,
                                          sqlstate=resp.status.sqlState if resp.status else None)
            return resp
        self._track_session_state(session, req.statement)
        op = Operation(OpKind.UPSTREAM, T.TOperationType.EXECUTE_STATEMENT,
                       statement=req.statement[:STATEMENT_KEPT], decision=label,
                       state=OpState.RUNNING if req.runAsync else OpState.FINISHED,
                       log_lines=log_lines)
        resp.operationHandle = self.operations.register(session, op, resp.operationHandle,
                                                        resp.operationHandle.operationType,
                                                        resp.operationHandle.hasResultSet)
        return resp

    def _track_session_state(self, session: Session, statement: str) -> None:
        track_statement(session, statement)

    def _spark_sql(self, session: Session):
        """run_sql on the session's Spark session for a proxy-run statement: opened anew
        first if Spark restarted (proxy/hs2/recovery.py)."""
        async def run_sql(sql: str):
            return await (await upstream_for(self.sessions, session)).run_sql(sql)
        return run_sql

    async def _finish_sync(self, op: Operation) -> None:
        """runAsync=false: block until the operation is terminal; failures become the
        ExecuteStatement status."""
        await op.done.wait()
        if op.state is not OpState.FINISHED:
            status = op.error or T.TStatus(statusCode=T.TStatusCode.ERROR_STATUS, sqlState="HY000",
                                           errorMessage=f"Statement ended in state {op.state.name}")
            self.operations.forget(op, "failed synchronously")
            raise UpstreamError(status.errorMessage or "statement failed", status)

    async def _execute_local(self, session: Session, req: T.TExecuteStatementReq, decision: Local):
        label = f"local:{decision.note}" if decision.note else "local"
        op = new_proxy_op(OpKind.LOCAL, req.statement, label)
        handle = self.operations.register(session, op, None, T.TOperationType.EXECUTE_STATEMENT, True)
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
        op = new_proxy_op(OpKind.LOCAL, req.statement, label)
        op.log_lines = log_lines
        handle = self.operations.register(session, op, None, T.TOperationType.EXECUTE_STATEMENT, True)
        op.to(OpState.RUNNING)
        try:
            op.result = LocalRowSource(result.columns, result.rows, session.protocol)
            op.to(OpState.FINISHED)
        except Exception as e:  # noqa: BLE001 - reported through the operation's status
            fail(op, e, "served result failed")
        op.done.set()
        return T.TExecuteStatementResp(status=OK, operationHandle=handle)

    async def _run_local(self, session: Session, op: Operation, decision: Local,
                         timeout: float | None) -> None:
        op.to(OpState.RUNNING)
        try:
            # a long datamap job's stages and Spark progress reach the client's log
            with progress.reporting(op.add_log):
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
            fail(op, e, "local statement failed")
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
            self.operations.log_statement(session, None, label, "ERROR", req.statement,
                                          sqlstate=e.sqlstate)
            raise
        if not succeeded(resp.status) or resp.operationHandle is None:
            self.operations.log_statement(session, None, label, "ERROR", req.statement,
                                          sqlstate=resp.status.sqlState if resp.status else None)
            end_statement(ended)
            return resp
        self._track_session_state(session, req.statement)
        op = new_proxy_op(OpKind.HOOKED, req.statement, label)
        uh = resp.operationHandle
        resp.operationHandle = self.operations.register(session, op, uh, uh.operationType, uh.hasResultSet)
        op.task = asyncio.create_task(self._run_hooked(session, op, after, ended),
                                      name=f"hooked-op-{hex_id(resp.operationHandle.operationId)[:12]}")
        if not req.runAsync:
            await self._finish_sync(op)
        return resp

    async def _run_hooked(self, session: Session, op: Operation, after, ended=None) -> None:
        op.to(OpState.RUNNING)
        try:
            st = await poll_until_done(session, op)
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
            fail(op, e, "post-statement hook failed")
        finally:
            end_statement(ended)
            op.done.set()

    def _gated(self, session: Session, req: T.TExecuteStatementReq) -> bool:
        # sync with a timeout: Spark would report success and then fail the fetch with no
        # SQLSTATE; driven by the proxy, the call itself fails with the timeout error
        return ((self.run_gate.enabled or (not req.runAsync and self._upstream_timeout(req)))
                and classify(req.statement or "", session.current_db).kind not in _SESSION_STATE)

    def _upstream_timeout(self, req: T.TExecuteStatementReq) -> int:
        """The queryTimeout sent to Spark (whole seconds; 0 = none)."""
        t = effective_timeout(self.settings.server.query_timeout, req.queryTimeout)
        return math.ceil(t) if t else 0

    async def _execute_gated(self, session: Session, req: T.TExecuteStatementReq, sql: str,
                             label: str, seqid: int, after=None, ended=None,
                             log_lines: tuple[str, ...] = ()) -> T.TExecuteStatementResp:
        try:
            waiter = self.run_gate.enter()         # a full line: this call fails now
        except ProxyError as e:
            self.operations.log_statement(session, None, label, "REFUSED", req.statement,
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
                hold_while_running(self.operations, op)
            return resp
        op = new_proxy_op(OpKind.HOOKED, req.statement, label)
        op.log_lines = log_lines
        op.holds_run_slot = waiter is None
        handle = self.operations.register(session, op, None, T.TOperationType.EXECUTE_STATEMENT, True)
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
                hold_while_running(self.operations, op)
                return
            op.to(OpState.RUNNING)
            timeout = effective_timeout(self.settings.server.query_timeout, req.queryTimeout)
            st = await poll_until_done(session, op, timeout)
            if st is None:                       # Spark overran the deadline
                await stop_upstream(session, op)
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
                    await stop_upstream(session, op, close=op.state is OpState.CLOSED)
            if op.state.running:
                op.to(OpState.CANCELED)
        except Exception as e:  # noqa: BLE001 - reported through the operation's status
            fail(op, e, "statement failed")
        finally:
            if op.kind is not OpKind.UPSTREAM:
                self.operations.release_run_slot(op)
            end_statement(ended)
            op.done.set()

    async def _forward_gated(self, session: Session, op: Operation,
                             req: T.TExecuteStatementReq, sql: str) -> T.TExecuteStatementResp:
        # Spark may have restarted while the statement waited in line: reopen first
        up = await upstream_for(self.sessions, session)
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
