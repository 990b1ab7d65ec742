"""Operation calls of Service (proxy/hs2/frontend.py): GetOperationStatus,
GetResultSetMetadata, FetchResults, CancelOperation, CloseOperation, GetQueryId.

UPSTREAM operations are forwarded (handle swapped, reply relayed as bytes); LOCAL ones are
answered from their LocalRowSource; HOOKED ones report the proxy's state and forward
the rest once FINISHED (proxy/hs2/calls/statement.py runs them).
"""
from __future__ import annotations

import asyncio
from typing import Any

from proxy.errors import ClientError, InvalidHandle, UpstreamError
from proxy.hs2.handles import hex_id
from proxy.hs2.operation import OpKind, OpState, Operation
from proxy.results import empty_log_rowset, log_rowset
from proxy.thrift import codec
from proxy.thrift.rowcount import fetched_rows, rowset_rows
from proxy.thrift.gen.TCLIService import ttypes as T

OK = T.TStatus(statusCode=T.TStatusCode.SUCCESS_STATUS)


class OperationCalls:
    """Part of Service (its operation registry and long-poll bound)."""

    async def _h_GetOperationStatus(self, conn, name, req: T.TGetOperationStatusReq, seqid):
        op = self._op(req.operationHandle)
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
                self._release_run_slot(op)
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

    async def _h_GetResultSetMetadata(self, conn, name, req: T.TGetResultSetMetadataReq, seqid):
        op = self._op(req.operationHandle)
        if op.kind is not OpKind.LOCAL and op.upstream_handle is not None:
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
        columnar = op.session.columnar
        if req.fetchType == 1 and op.log_lines and not op.log_sent:
            op.log_sent = True        # the proxy's lines first, once; then upstream's log
            return T.TFetchResultsResp(status=OK, hasMoreRows=False,
                                       results=log_rowset(op.log_lines, columnar))
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
            OperationCalls._restart_count(op, req)
            op.count_rows(fetched_rows(reply))
        return reply

    async def _h_CancelOperation(self, conn, name, req: T.TCancelOperationReq, seqid):
        op = self._op(req.operationHandle)
        if op.task is not None and not op.task.done():
            op.task.cancel()
        op.session.upstream.conn.probe()
        # local, still waiting for a running slot, or lost with its upstream session
        if op.upstream_handle is None or op.lost is not None:
            return T.TCancelOperationResp(status=OK)
        try:
            return await self._forward_op_call(op, name, req, seqid)
        finally:
            self._release_run_slot(op)      # cancelled: no longer counts as running

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
        op.session.upstream.conn.probe()
        if op.upstream_handle is not None and op.lost is None:
            try:
                reply = await self._forward_op_call(op, name, req, seqid)
            finally:
                self._forget_op(op, "closed")
        else:
            self._forget_op(op, "closed")
        return reply

    async def _h_GetQueryId(self, conn, name, req: T.TGetQueryIdReq, seqid):
        op = self._op(req.operationHandle)
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
