"""Calls Service (proxy/hs2/frontend.py) forwards with only the session handle swapped:
metadata (GetTables & co.), GetInfo, SetClientInfo. Metadata results get a proxy
operation handle; their rows are relayed as upstream's bytes.
"""
from __future__ import annotations

from typing import Any

from proxy.errors import ClientError, UpstreamError, succeeded
from proxy.hs2.operation import OpKind, OpState, Operation
from proxy.hs2.recovery import upstream_for
from proxy.thrift import codec
from proxy.thrift.gen.TCLIService import ttypes as T

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


class MetadataCalls:
    """Part of Service (its session lookup and operation registry)."""

    async def _forward_session_call(self, conn, name: str, req: Any, seqid: int):
        session = self._session(req.sessionHandle)
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
            resp.operationHandle = self._register_op(session, op, resp.operationHandle,
                                                     resp.operationHandle.operationType,
                                                     resp.operationHandle.hasResultSet)
        return resp

    async def _h_GetInfo(self, conn, name, req: T.TGetInfoReq, seqid):
        """Forward only the codes Spark implements: for any other code STS 4.3 fails to
        serialise its own error reply and drops the connection (the session would die)."""
        session = self._session(req.sessionHandle)
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

    async def _h_SetClientInfo(self, conn, name, req: T.TSetClientInfoReq, seqid):
        session = self._session(req.sessionHandle)
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
