"""Codec: roundtrips for every TCLIService message, TApplicationException, boundary finding."""
import struct

import pytest
from thrift.Thrift import TApplicationException

from proxy.thrift import codec
from proxy.thrift.gen.TCLIService import ttypes as T
from tests.support.thrift_samples import ALL_METHODS, sample_handle, sample_req, sample_resp


def test_all_25_methods_present():
    assert len(ALL_METHODS) == 25
    for m in ("GetQueryId", "SetClientInfo", "UploadData", "DownloadData"):
        assert m in codec.METHODS


@pytest.mark.parametrize("name", ALL_METHODS)
def test_call_roundtrip(name):
    req = sample_req(name)
    data = codec.encode_call(name, 42, req)
    assert codec.message_length(data) == len(data)
    msg = codec.decode(data)
    assert (msg.name, msg.type, msg.seqid) == (name, codec.CALL, 42)
    assert msg.body.req == req


@pytest.mark.parametrize("name", ALL_METHODS)
def test_reply_roundtrip(name):
    resp = sample_resp(name)
    data = codec.encode_reply(name, 7, resp)
    assert codec.message_length(data) == len(data)
    assert codec.decode_reply(data, name) == resp


def test_v11_fields_on_wire():
    resp = T.TGetOperationStatusResp(status=T.TStatus(statusCode=0), operationState=2,
                                     numModifiedRows=12)
    data = codec.encode_reply("GetOperationStatus", 0, resp)
    assert codec.decode_reply(data, "GetOperationStatus").numModifiedRows == 12
    assert T.TTypeId.TIMESTAMPLOCALTZ_TYPE == 22
    assert T.TProtocolVersion.HIVE_CLI_SERVICE_PROTOCOL_V11 == 10
    assert T.TGetInfoType.CLI_ODBC_KEYWORDS == 10006


def test_unknown_method_decodes_header_only_and_exception_reply():
    data = codec.encode("GetLog", codec.CALL, 5, T.TStatus(statusCode=0))
    assert codec.message_length(data) == len(data)
    msg = codec.decode(data)
    assert msg.name == "GetLog" and msg.body is None and msg.seqid == 5
    reply = codec.application_exception("GetLog", 5, "Invalid method name: 'GetLog'")
    name, mtype, seqid = codec.decode_header(reply)
    assert (name, mtype, seqid) == ("GetLog", codec.EXCEPTION, 5)
    with pytest.raises(TApplicationException) as ei:
        codec.decode_reply(reply, "GetLog")
    assert ei.value.type == TApplicationException.UNKNOWN_METHOD


def test_boundaries_over_split_buffers():
    msgs = [codec.encode_call(n, i, sample_req(n)) for i, n in enumerate(ALL_METHODS)]
    stream = b"".join(msgs)
    # Feed one byte at a time; every message must be found exactly at its end.
    buf = bytearray()
    found = []
    for b in stream:
        buf.append(b)
        n = codec.message_length(buf)
        if n is not None:
            found.append(bytes(buf[:n]))
            del buf[:n]
    assert found == msgs and not buf


def test_boundaries_for_large_rowset_reply():
    col = T.TColumn(stringVal=T.TStringColumn(values=[f"s{i}" for i in range(5000)], nulls=b""))
    dcol = T.TColumn(doubleVal=T.TDoubleColumn(values=[1.5] * 5000, nulls=b"\x00"))
    resp = T.TFetchResultsResp(status=T.TStatus(statusCode=0), hasMoreRows=False,
                               results=T.TRowSet(startRowOffset=0, rows=[], columns=[col, dcol]))
    data = codec.encode_reply("FetchResults", 0, resp)
    assert codec.message_length(data) == len(data)
    assert codec.message_length(data[:-1]) is None
    assert codec.message_length(data + b"\x80") == len(data)


def test_non_strict_header():
    from thrift.protocol.TBinaryProtocol import TBinaryProtocol
    from thrift.transport.TTransport import TMemoryBuffer
    buf = TMemoryBuffer()
    p = TBinaryProtocol(buf, strictWrite=False)
    p.writeMessageBegin("CloseSession", codec.CALL, 9)
    codec.METHODS["CloseSession"][0](req=sample_req("CloseSession")).write(p)
    data = buf.getvalue()
    assert data[0] == 0
    assert codec.message_length(data) == len(data)
    msg = codec.decode(data)
    assert msg.name == "CloseSession" and msg.seqid == 9
    assert codec.decode_header(codec.set_seqid(data, 11))[2] == 11


def test_garbage_and_oversize_rejected():
    with pytest.raises(codec.ProtocolError):
        codec.message_length(b"\x81\x02\x00\x01" + b"\x00" * 20)
    with pytest.raises(codec.ProtocolError):
        codec.message_length(b"GET / HTTP/1.1\r\n")
    big = codec.encode_call("ExecuteStatement", 1, T.TExecuteStatementReq(
        sessionHandle=T.TSessionHandle(sessionId=sample_handle()), statement="x" * 5000))
    with pytest.raises(codec.ProtocolError):
        codec.message_length(big, max_bytes=1000)
    # A declared-but-unsent huge string must fail fast, not wait for 2 GB.
    hdr = struct.pack("!iI", -2147418111, 16) + b"ExecuteStatement" + struct.pack("!i", 0)
    evil = hdr + b"\x0c\x00\x01" + b"\x0b\x00\x02" + struct.pack("!i", 2_000_000_000)
    with pytest.raises(codec.ProtocolError):
        codec.message_length(evil, max_bytes=1000)


def test_set_seqid_relay_keeps_body():
    data = codec.encode_reply("FetchResults", 1, sample_resp("FetchResults"))
    out = codec.set_seqid(data, 99)
    assert len(out) == len(data) and out[-50:] == data[-50:]
    assert codec.decode_header(out)[2] == 99
