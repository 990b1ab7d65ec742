"""A request and a reply of every TCLIService method, with their handles filled in, for the
codec's tests (round trips, skipping unknown fields)."""
from __future__ import annotations

from proxy.thrift import codec
from proxy.thrift.gen.TCLIService import ttypes as T


ALL_METHODS = sorted(codec.METHODS)


def sample_req(name):
    """A populated request struct for method `name`, generic over the IDL."""
    args_cls = codec.METHODS[name][0]
    req_cls = args_cls.thrift_spec[1][3][0]
    req = req_cls()
    for spec in req_cls.thrift_spec[1:]:
        if spec is None:
            continue
        _, ttype, fname, extra, _ = spec
        if fname == "sessionHandle":
            setattr(req, fname, T.TSessionHandle(sessionId=sample_handle()))
        elif fname == "operationHandle":
            setattr(req, fname, sample_op())
        elif ttype == 11:
            setattr(req, fname, b"\x00\x01bin" if fname == "values" else f"v-{fname}")
        elif ttype in (8, 10, 6):
            setattr(req, fname, 3)
        elif ttype == 2:
            setattr(req, fname, True)
        elif ttype == 13:
            setattr(req, fname, {"k": "v", "use:database": "db1"})
        elif ttype == 15:
            setattr(req, fname, ["TABLE", "VIEW"])
    return req


def sample_resp(name):
    result_cls = codec.METHODS[name][1]
    resp_cls = result_cls.thrift_spec[0][3][0]
    resp = resp_cls()
    for spec in resp_cls.thrift_spec[1:]:
        if spec is None:
            continue
        _, ttype, fname, extra, _ = spec
        if fname == "status":
            resp.status = T.TStatus(statusCode=3, sqlState="42000", errorCode=7, errorMessage="no")
        elif fname == "operationHandle":
            resp.operationHandle = sample_op()
        elif fname == "sessionHandle":
            resp.sessionHandle = T.TSessionHandle(sessionId=sample_handle())
        elif fname == "infoValue":
            resp.infoValue = T.TGetInfoValue(stringValue="Spark SQL")
        elif fname == "schema":
            resp.schema = T.TTableSchema(columns=[])
        elif fname == "results":
            resp.results = T.TRowSet(startRowOffset=0, rows=[], columns=[
                T.TColumn(i32Val=T.TI32Column(values=[1, 0, 3], nulls=b"\x02"))])
        elif ttype == 11:
            setattr(resp, fname, f"v-{fname}")
        elif ttype in (8, 10):
            setattr(resp, fname, 2)
        elif ttype == 2:
            setattr(resp, fname, False)
        elif ttype == 13:
            setattr(resp, fname, {"a": "b"})
    return resp


def sample_handle():
    return T.THandleIdentifier(guid=b"g" * 16, secret=b"s" * 16)


def sample_op():
    return T.TOperationHandle(operationId=sample_handle(), operationType=0, hasResultSet=True)
