"""Raw HiveServer2 on a socket, with the proxy's own codec: a minimal blocking client
(`Raw`, SASL PLAIN or NOSASL), one SASL PLAIN attempt (`sasl_login`), whether the peer
closed a socket (`closed_by_peer`) and a GetInfo call as bytes (`CALL`)."""
from __future__ import annotations

import socket
import struct

from proxy.thrift import codec, sasl
from proxy.thrift.gen.TCLIService import ttypes as T


class Raw:
    """Minimal blocking HS2 client on the proxy's own codec (SASL PLAIN or NOSASL)."""

    def __init__(self, host, port, user="me", use_sasl=True):
        self.s = socket.create_connection((host, port), timeout=60)
        self.sasl = use_sasl
        self.buf = bytearray()
        self.frames = sasl.FrameDecoder(1 << 30)
        if use_sasl:
            self.s.sendall(sasl.PlainClient(user, "x").initial())
            hdr = self._recv_exact(5)
            status, n = struct.unpack("!BI", hdr)
            payload = self._recv_exact(n)
            assert status == sasl.COMPLETE, payload

    def _recv_exact(self, n):
        out = b""
        while len(out) < n:
            chunk = self.s.recv(n - len(out))
            if not chunk:
                raise EOFError
            out += chunk
        return out

    def send_raw(self, data: bytes) -> bytes:
        self.s.sendall(sasl.encode_frame(data) if self.sasl else data)
        while True:
            n = codec.message_length(self.buf) if self.buf else None
            if n is not None:
                out = bytes(self.buf[:n])
                del self.buf[:n]
                return out
            chunk = self.s.recv(1 << 20)
            if not chunk:
                raise EOFError("proxy closed the connection")
            if self.sasl:
                for p in self.frames.feed(chunk):
                    self.buf += p
            else:
                self.buf += chunk

    def call(self, name, req, seqid=0):
        return codec.decode_reply(self.send_raw(codec.encode_call(name, seqid, req)), name)

    def open(self, protocol=T.TProtocolVersion.HIVE_CLI_SERVICE_PROTOCOL_V10, config=None):
        resp = self.call("OpenSession", T.TOpenSessionReq(client_protocol=protocol, username="me",
                                                           configuration=config))
        assert resp.status.statusCode == 0, resp.status
        self.session = resp.sessionHandle
        return resp

    def execute(self, sql, run_async=False):
        return self.call("ExecuteStatement", T.TExecuteStatementReq(
            sessionHandle=self.session, statement=sql, runAsync=run_async))

    def fetch(self, op, n=100, orientation=T.TFetchOrientation.FETCH_NEXT, fetch_type=0):
        return self.call("FetchResults", T.TFetchResultsReq(
            operationHandle=op, orientation=orientation, maxRows=n, fetchType=fetch_type))

    def close(self):
        self.s.close()


def closed_by_peer(s: socket.socket, within: float) -> bool:
    """True when the proxy closes `s` (EOF or reset) within `within` seconds; whatever it
    sent first (a SASL BAD message) is read and dropped."""
    s.settimeout(within)
    try:
        while s.recv(65536):
            pass
        return True
    except ConnectionError:
        return True
    except socket.timeout:
        return False


def sasl_login(host, port, user: str, password: str, mechanism: bytes = b"PLAIN") -> tuple[int, bytes]:
    """One SASL PLAIN attempt: the server's (status, message)."""
    with socket.create_connection((host, port), timeout=30) as s:
        token = b"\x00" + user.encode() + b"\x00" + password.encode()
        s.sendall(sasl.encode_negotiation(sasl.START, mechanism)
                  + sasl.encode_negotiation(sasl.OK, token))
        hdr = s.recv(5, socket.MSG_WAITALL)
        status, n = struct.unpack("!BI", hdr)
        return status, s.recv(n, socket.MSG_WAITALL) if n else b""


CALL = codec.encode_call("GetInfo", 7, T.TGetInfoReq(
    sessionHandle=T.TSessionHandle(sessionId=T.THandleIdentifier(b"\0" * 16, b"\0" * 16)),
    infoType=T.TGetInfoType.CLI_SERVER_NAME))
