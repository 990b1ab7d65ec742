"""The operations of every session and their calls: GetOperationStatus,
GetResultSetMetadata, FetchResults, CancelOperation, CloseOperation, GetQueryId.

UPSTREAM operations are forwarded (handle swapped, reply relayed as bytes); LOCAL ones are
answered from their LocalRowSource; HOOKED ones report the proxy's state and forward
the rest once FINISHED (proxy/hs2/statements.py runs them).

The registry maps client handles to operations; an operation leaves it when it is closed,
with its session, or when idle, and its statement's log line and event are written then
(`log_statement`; the audit log is one of the event's observers). A statement counted by
the RunGate gives its slot back here once it ended (`release_run_slot`).
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from proxy.errors import ClientError, InvalidHandle, UpstreamError
from proxy.hs2 import statement_facts
from proxy.hs2.handles import HandleRegistry, hex_id, mint
from proxy.hs2.limits import RunGate
from proxy.hs2.operation import OpKind, OpState, Operation
from proxy.hs2.session import Session
from proxy.logsafe import redact, safe
from proxy.observability.observe import Observers
from proxy.thrift.rowsets import empty_log_rowset, log_rowset
from proxy.thrift import codec
from proxy.thrift.rowcount import fetched_rows, rowset_rows
from proxy.thrift.gen.TCLIService import ttypes as T

stmt_log = logging.getLogger("proxy.statement")
OK = T.TStatus(statusCode=T.TStatusCode.SUCCESS_STATUS)


class OperationManager:
    """The operation registry, the operation calls and each statement's final log line."""

    def __init__(self, settings, run_gate: RunGate, observers: Observers):
        self.settings = settings
        self.operations: HandleRegistry[Operation] = HandleRegistry("OperationHandle")
        self._recently_closed: dict[bytes, None] = {}     # insertion-ordered, bounded
        self.long_poll = settings.server.long_poll_timeout
        self.run_gate = run_gate
        self.observers = observers

    # ------------------------------------------------------------------ registry

    def op(self, handle: T.TOperationHandle | None) -> Operation:
        op = self.operations.get(handle.operationId if handle else None)
        op.touch()
        op.session.touch()
        return op

    def find(self, ident) -> Operation | None:
        return self.operations.find(ident)

    def register(self, session: Session, op: Operation, upstream: T.TOperationHandle | None,
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

    def forget(self, op: Operation, why: str) -> None:
        if self.operations.remove(op.client_handle.operationId) is None:
            return
        op.session.operations.remove(op.client_handle.operationId)
        self._recently_closed[bytes(op.client_handle.operationId.guid)] = None
        if len(self._recently_closed) > 10000:
            self._recently_closed.pop(next(iter(self._recently_closed)))
        if op.task is not None and not op.task.done():
            op.task.cancel()
        self.release_run_slot(op)
        final = op.state.name
        if op.kind is OpKind.UPSTREAM:
            op.state = OpState.CLOSED
        elif op.state is not OpState.CLOSED:
            op.to(OpState.CLOSED)
        self.log_statement(op.session, op, op.decision, final, op.statement)

    def release_run_slot(self, op: Operation) -> None:
        if op.holds_run_slot:
            op.holds_run_slot = False
            self.run_gate.release()

    def log_statement(self, session: Session, op: Operation | None, decision: str, state: str,
                      statement: str, sqlstate: str | None = None) -> None:
        """The statement's one log line and event (the audit line is its observer's). Its
        duration runs from ExecuteStatement's arrival to the end first seen (the sync call's
        return, the first final status relayed, the proxy's own run ending), not to
        CloseOperation."""
        op_id = hex_id(op.client_handle.operationId) if op is not None else None
        facts, duration = statement_facts.timing(op)
        if stmt_log.isEnabledFor(logging.INFO):
            stmt_log.info("statement session=%s user=%s op=%s decision=%s state=%s duration=%.3fs sql=%s",
                          session.id, safe(session.user, 100), op_id or "-",
                          decision, state, duration, safe(redact((statement or "")[:2000]), 200))
        if op is not None and op.error is not None:
            sqlstate = op.error.sqlState or sqlstate
        self.observers.statement(statement_facts.event(session, op, facts, duration, decision,
                                                       state, statement, sqlstate, op_id))

    def running(self) -> int:
        """Statements still running (upstream ones as last reported to their client)."""
        return sum(1 for op in self.operations.values() if op.state.running)

    def touched_within(self, settle: float) -> bool:
        """Has an operation been used within `settle` seconds (results being fetched)?"""
        now = time.monotonic()
        return any(now - op.last_access < settle for op in self.operations.values())

    async def reap_idle(self, now: float) -> None:
        """Close idle terminal operations (and idle upstream ones)."""
        o_to = self.settings.server.idle_operation_timeout
        if not o_to or o_to <= 0:
            return
        for op in list(self.operations.values()):
            if now - op.last_access > o_to and (op.kind is OpKind.UPSTREAM or op.state.terminal):
                if op.upstream_handle is not None and op.lost is None:
                    try:
                        await op.session.upstream.conn.call(
                            "CloseOperation", T.TCloseOperationReq(operationHandle=op.upstream_handle),
                            timeout=30.0)
                    except UpstreamError:
                        pass
                self.forget(op, "idle")

    # ------------------------------------------------------------------ calls

    async def get_status(self, conn, name, req: T.TGetOperationStatusReq, seqid):
        op = self.op(req.operationHandle)
        if op.kind is OpKind.UPSTREAM:
            try:
                reply = await self._forward_op_call(op, name, req, seqid)
            except UpstreamError:
                if op.lost is None:
                    raise
                return T.TGetOperationStatusResp(status=op.lost, operationState=int(OpState.ERROR),
                                                 sqlState=op.lost.sqlState,
                                                 errorMessage=op.lost.errorMessage)
            self._mirror_state(op, reply)
            if op.state.terminal:
                self.release_run_slot(op)
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
            op.mirror(OpState(resp.operationState))   # mirrored, not driven: no transition check
            if op.state is OpState.ERROR and resp.sqlState:     # for the audit line
                op.error = T.TStatus(statusCode=T.TStatusCode.ERROR_STATUS, sqlState=resp.sqlState)

    async def get_result_set_metadata(self, conn, name, req: T.TGetResultSetMetadataReq, seqid):
        op = self.op(req.operationHandle)
        if op.kind is not OpKind.LOCAL and op.upstream_handle is not None:
            return await self._forward_op_call(op, name, req, seqid)
        self._require_finished(op)
        return T.TGetResultSetMetadataResp(status=OK, schema=op.result.schema())

    @staticmethod
    def _require_finished(op: Operation) -> None:
        if op.state is not OpState.FINISHED:
            if op.state is OpState.ERROR and op.error is not None:
                raise UpstreamError(op.error.errorMessage or "statement failed", op.error)
            raise ClientError(f"Expected state FINISHED, but found {op.state.name}", "HY010")

    async def fetch_results(self, conn, name, req: T.TFetchResultsReq, seqid):
        op = self.op(req.operationHandle)
        columnar = op.session.columnar
        if req.fetchType == 1 and len(op.log_lines) > op.log_sent:
            # the proxy's lines first, each once; then upstream's log
            lines, sent = op.log_lines, op.log_sent
            op.log_sent = len(lines)
            return T.TFetchResultsResp(status=OK, hasMoreRows=False,
                                       results=log_rowset(lines[sent:], columnar))
        if op.kind is OpKind.UPSTREAM:
            return self._counted(op, req, await self._forward_op_call(op, name, req, seqid))
        if req.fetchType == 1:        # operation log: must always succeed
            if op.kind is OpKind.HOOKED and op.upstream_handle is not None:
                return await self._forward_op_call(op, name, req, seqid)
            return T.TFetchResultsResp(status=OK, hasMoreRows=False, results=empty_log_rowset(columnar))
        if op.kind is OpKind.HOOKED:
            self._require_finished(op)
            return self._counted(op, req, await self._forward_op_call(op, name, req, seqid))
        self._require_finished(op)
        if op.result.costly(req.maxRows):
            rowset, more = await asyncio.to_thread(op.result.fetch, req.maxRows, req.orientation)
        else:
            rowset, more = op.result.fetch(req.maxRows, req.orientation)
        self._restart_count(op, req)
        op.count_rows(rowset_rows(rowset))
        return T.TFetchResultsResp(status=OK, hasMoreRows=more, results=rowset)

    @staticmethod
    def _restart_count(op: Operation, req: T.TFetchResultsReq) -> None:
        # the client reads the result again from its start (JDBC beforeFirst): the rows
        # sent are those of one pass, not the sum of both
        if req.orientation == T.TFetchOrientation.FETCH_FIRST:
            op.rows = None

    @staticmethod
    def _counted(op: Operation, req: T.TFetchResultsReq, reply: bytes) -> bytes:
        """Rows sent, for the query log: read from the relayed bytes (codec-free scan)."""
        if req.fetchType != 1:
            OperationManager._restart_count(op, req)
            op.count_rows(fetched_rows(reply))
        return reply

    async def cancel(self, conn, name, req: T.TCancelOperationReq, seqid):
        op = self.op(req.operationHandle)
        if op.task is not None and not op.task.done():
            op.task.cancel()
        op.session.upstream.conn.probe()
        # local, still waiting for a running slot, or lost with its upstream session
        if op.upstream_handle is None or op.lost is not None:
            return T.TCancelOperationResp(status=OK)
        try:
            return await self._forward_op_call(op, name, req, seqid)
        finally:
            self.release_run_slot(op)      # cancelled: no longer counts as running

    async def close(self, conn, name, req: T.TCloseOperationReq, seqid):
        ident = req.operationHandle.operationId if req.operationHandle else None
        op = self.operations.find(ident)
        if op is None:
            # Tolerate handles this proxy already closed; unknown ones are an error.
            if ident is not None and bytes(ident.guid or b"") in self._recently_closed:
                return T.TCloseOperationResp(status=OK)
            raise InvalidHandle("OperationHandle", hex_id(ident))
        op.session.touch()
        reply: Any = T.TCloseOperationResp(status=OK)
        op.session.upstream.conn.probe()
        if op.upstream_handle is not None and op.lost is None:
            try:
                reply = await self._forward_op_call(op, name, req, seqid)
            finally:
                self.forget(op, "closed")
        else:
            self.forget(op, "closed")
        return reply

    async def get_query_id(self, conn, name, req: T.TGetQueryIdReq, seqid):
        op = self.op(req.operationHandle)
        if op.upstream_handle is None:
            return T.TGetQueryIdResp(queryId=hex_id(op.client_handle.operationId))
        return await self._forward_op_call(op, name, req, seqid)

    async def _forward_op_call(self, op: Operation, name: str, req: Any, seqid: int) -> bytes:
        op.session.upstream.conn.probe()     # Spark gone? then op.lost says so, not a new session
        if op.lost is not None:
            raise UpstreamError(op.lost.errorMessage, op.lost)
        saved = req.operationHandle
        req.operationHandle = op.upstream_handle
        try:
            return await op.session.upstream.conn.call_raw(codec.encode_call(name, seqid, req))
        finally:
            req.operationHandle = saved
