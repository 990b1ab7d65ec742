"""Thrift binary-protocol codec for TCLIService messages. No I/O.

bytes <-> Message(name, type, seqid, body) using the C-accelerated binary protocol
(thrift.protocol.fastbinary). Also:

* `message_length(buf)`: a skip-parser that finds where the first complete message in a
  growing buffer ends, without building objects. NOSASL has no length prefix, so this is
  the only way to cut the byte stream into messages; it also bounds sizes (max_bytes) so a
  hostile length field cannot make us buffer forever.
* `application_exception(...)`: TApplicationException replies (UNKNOWN_METHOD etc.) with
  the caller's seqid, so clients that probe with unknown RPCs (impyla's GetLog) carry on.
* `set_seqid(...)`: relay replies as bytes. A FetchResults reply carries no handle (only
  status, hasMoreRows and the rowset), so the proxy forwards upstream's reply bytes as-is
  after stamping the client's seqid: no decoding of row data on the hot path.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from thrift.protocol.TBinaryProtocol import TBinaryProtocolAccelerated
from thrift.Thrift import TApplicationException, TMessageType, TType
from thrift.transport.TTransport import TMemoryBuffer

from proxy.thrift.gen.TCLIService import TCLIService as _svc

VERSION_1 = 0x80010000
VERSION_MASK = 0xFFFF0000

CALL = TMessageType.CALL
REPLY = TMessageType.REPLY
EXCEPTION = TMessageType.EXCEPTION
ONEWAY = TMessageType.ONEWAY

# Method name -> (args class, result class). Built once from the generated service module.
METHODS: dict[str, tuple[type, type]] = {}
for _name in dir(_svc.Iface):
    if not _name.startswith("_"):
        METHODS[_name] = (getattr(_svc, f"{_name}_args"), getattr(_svc, f"{_name}_result"))


class ProtocolError(Exception):
    """Malformed or oversized Thrift data: the connection cannot continue."""


class MessageTooLarge(ProtocolError):
    """The message is bigger than the limit given; the stream itself may be well-formed."""


class Incomplete(Exception):
    """The buffer does not yet hold a whole message."""


@dataclass
class Message:
    name: str
    type: int
    seqid: int
    body: Any           # <Method>_args / <Method>_result instance, or None if unknown method


# ---------------------------------------------------------------- encode / decode

def encode(name: str, mtype: int, seqid: int, body: Any) -> bytes:
    buf = TMemoryBuffer()
    prot = TBinaryProtocolAccelerated(buf)
    prot.writeMessageBegin(name, mtype, seqid)
    body.write(prot)
    prot.writeMessageEnd()
    return buf.getvalue()


def encode_call(name: str, seqid: int, req: Any) -> bytes:
    args_cls = METHODS[name][0]
    return encode(name, CALL, seqid, args_cls(req=req))


def encode_reply(name: str, seqid: int, resp: Any) -> bytes:
    result_cls = METHODS[name][1]
    return encode(name, REPLY, seqid, result_cls(success=resp))


def application_exception(name: str, seqid: int, message: str,
                          kind: int = TApplicationException.UNKNOWN_METHOD) -> bytes:
    return encode(name, EXCEPTION, seqid, TApplicationException(kind, message))


def _reader(data: bytes) -> TBinaryProtocolAccelerated:
    # strictRead=False: old non-strict clients send the name length first (first byte 0x00).
    return TBinaryProtocolAccelerated(TMemoryBuffer(data), strictRead=False)


def decode_header(data: bytes) -> tuple[str, int, int]:
    try:
        return _reader(data).readMessageBegin()
    except Exception as e:  # noqa: BLE001 - any decoding failure is a protocol error
        raise ProtocolError(f"bad Thrift message header: {e}") from e


def decode(data: bytes) -> Message:
    """Decode one whole message. Unknown method names (CALL) come back with body=None."""
    prot = _reader(data)
    try:
        name, mtype, seqid = prot.readMessageBegin()
    except Exception as e:  # noqa: BLE001
        raise ProtocolError(f"bad Thrift message header: {e}") from e
    classes = METHODS.get(name)
    if mtype == EXCEPTION:
        body: Any = TApplicationException()
    elif classes is None:
        return Message(name, mtype, seqid, None)
    else:
        body = classes[0]() if mtype in (CALL, ONEWAY) else classes[1]()
    try:
        body.read(prot)
        prot.readMessageEnd()
    except Exception as e:  # noqa: BLE001
        raise ProtocolError(f"cannot decode {name} message: {e}") from e
    return Message(name, mtype, seqid, body)


def decode_reply(data: bytes, expect: str) -> Any:
    """Decode a REPLY to `expect` and return its `success` value; a TApplicationException
    reply is raised as such."""
    msg = decode(data)
    if msg.type == EXCEPTION:
        raise msg.body
    if msg.name != expect or msg.type != REPLY:
        raise ProtocolError(f"expected {expect} reply, got {msg.name} type {msg.type}")
    if msg.body.success is None:
        raise ProtocolError(f"{expect} reply has no result")
    return msg.body.success


def set_seqid(data: bytes | bytearray, seqid: int) -> bytes:
    """Return a copy of a message with its seqid replaced (header is not re-encoded)."""
    (word,) = struct.unpack_from("!i", data, 0)
    if word < 0:                                  # strict: version, name, seqid
        (nlen,) = struct.unpack_from("!i", data, 4)
        off = 8 + nlen
    else:                                         # non-strict: name, type byte, seqid
        off = 4 + word + 1
    if struct.unpack_from("!i", data, off)[0] == seqid:
        return bytes(data)
    out = bytearray(data)
    struct.pack_into("!i", out, off, seqid)
    return bytes(out)


# ---------------------------------------------------------------- skip parser

_FIXED = {TType.BOOL: 1, TType.BYTE: 1, TType.I16: 2, TType.I32: 4, TType.I64: 8,
          TType.DOUBLE: 8}
_unpack_i32 = struct.Struct("!i").unpack_from
_unpack_hdr = struct.Struct("!bh").unpack_from          # field type, field id
_unpack_map = struct.Struct("!bbi").unpack_from
_unpack_list = struct.Struct("!bi").unpack_from
_MAX_DEPTH = 64


def message_length(buf: bytes | bytearray | memoryview, max_bytes: int = 104_857_600) -> int | None:
    """Length of the first complete message in `buf`, or None if more bytes are needed.

    Raises ProtocolError on garbage or when the message would exceed `max_bytes`."""
    n = len(buf)
    try:
        if n < 4:
            return None
        (word,) = _unpack_i32(buf, 0)
        if word < 0:
            if (word & VERSION_MASK) != VERSION_1:
                raise ProtocolError(f"bad Thrift version word 0x{word & 0xFFFFFFFF:08x}")
            (nlen,) = _unpack_i32(buf, 4)
            if nlen < 0 or nlen > 4096:
                raise ProtocolError(f"bad method name length {nlen}")
            pos = 8 + nlen + 4
        else:
            if word > 4096:
                raise ProtocolError(f"bad method name length {word} (not a Thrift message)")
            pos = 4 + word + 1 + 4
        end = _skip(buf, pos, TType.STRUCT, 0, max_bytes)
    except Incomplete:
        if n > max_bytes:
            raise MessageTooLarge(f"message larger than {max_bytes} bytes") from None
        return None
    except struct.error:
        return None
    if end > n:
        if end > max_bytes:
            raise MessageTooLarge(f"message larger than {max_bytes} bytes")
        return None
    return end


def _need(n: int, pos: int, size: int, limit: int) -> None:
    if size < 0:
        raise ProtocolError(f"negative size {size}")
    if pos + size > limit:
        raise MessageTooLarge(f"message larger than {limit} bytes")
    if pos + size > n:
        raise Incomplete


def _skip(buf, pos: int, ttype: int, depth: int, limit: int) -> int:
    n = len(buf)
    if depth > _MAX_DEPTH:
        raise ProtocolError("Thrift structure nested too deeply")
    fixed = _FIXED.get(ttype)
    if fixed is not None:
        return pos + fixed
    if ttype == TType.STRING:
        _need(n, pos, 4, limit)
        (size,) = _unpack_i32(buf, pos)
        _need(n, pos + 4, size, limit)
        return pos + 4 + size
    if ttype == TType.STRUCT:
        while True:
            _need(n, pos, 1, limit)
            ftype = buf[pos]
            if ftype == TType.STOP:
                return pos + 1
            _need(n, pos, 3, limit)
            pos = _skip(buf, pos + 3, ftype, depth + 1, limit)
    if ttype in (TType.LIST, TType.SET):
        _need(n, pos, 5, limit)
        etype, count = _unpack_list(buf, pos)
        pos += 5
        _need(n, pos, count, limit)   # every element takes >= 1 byte
        efixed = _FIXED.get(etype)
        if efixed is not None:
            return pos + efixed * count
        if etype == TType.STRING:
            # Hot for NOSASL row data: a tight loop without recursion.
            for _ in range(count):
                if pos + 4 > n:
                    raise Incomplete
                (size,) = _unpack_i32(buf, pos)
                if size < 0:
                    raise ProtocolError(f"negative string size {size}")
                pos += 4 + size
            if pos > limit:
                raise MessageTooLarge(f"message larger than {limit} bytes")
            return pos
        for _ in range(count):
            pos = _skip(buf, pos, etype, depth + 1, limit)
        return pos
    if ttype == TType.MAP:
        _need(n, pos, 6, limit)
        ktype, vtype, count = _unpack_map(buf, pos)
        pos += 6
        _need(n, pos, count, limit)
        for _ in range(count):
            pos = _skip(buf, pos, ktype, depth + 1, limit)
            pos = _skip(buf, pos, vtype, depth + 1, limit)
        return pos
    raise ProtocolError(f"unknown Thrift type id {ttype}")



# ---------------------------------------------------------------- streaming skip

_READ, _DROP = "read", "drop"


class MessageSkipper:
    """Finds where one message ends when it arrives in pieces, keeping nothing but the few
    bytes of the size field being read: how an oversized reply is read past (and dropped)
    so that the connection stays in step with the server. Slower per byte than
    message_length (a generator step per field); it only runs on that rare path."""

    def __init__(self) -> None:
        self._walk = _walk_message()
        self._step: tuple[str, int] | None = next(self._walk)
        self._part = bytearray()
        self.size = 0                 # bytes of the message consumed so far

    @property
    def done(self) -> bool:
        return self._step is None

    def feed(self, data: bytes | bytearray | memoryview) -> int | None:
        """Consume `data`. Once the message has ended, return how many bytes of `data`
        follow it; until then None. Raises ProtocolError on garbage."""
        view = memoryview(data)
        pos = 0
        while self._step is not None:
            op, n = self._step
            if op is _DROP:
                k = min(n, len(view) - pos)
                pos += k
                if k < n:
                    self._step = (_DROP, n - k)
                    break
                got = None
            else:
                k = min(n - len(self._part), len(view) - pos)
                self._part += view[pos:pos + k]
                pos += k
                if len(self._part) < n:
                    break
                got = bytes(self._part)
                self._part.clear()
            try:
                self._step = self._walk.send(got)
            except StopIteration:
                self._step = None
        self.size += pos
        return None if self._step is not None else len(view) - pos


def _walk_message():
    (word,) = _unpack_i32((yield _READ, 4), 0)
    if word < 0:
        if (word & VERSION_MASK) != VERSION_1:
            raise ProtocolError(f"bad Thrift version word 0x{word & 0xFFFFFFFF:08x}")
        (nlen,) = _unpack_i32((yield _READ, 4), 0)
        if nlen < 0 or nlen > 4096:
            raise ProtocolError(f"bad method name length {nlen}")
        yield _DROP, nlen + 4
    else:
        if word > 4096:
            raise ProtocolError(f"bad method name length {word} (not a Thrift message)")
        yield _DROP, word + 1 + 4
    yield from _walk(TType.STRUCT, 0)


def _walk(ttype: int, depth: int):
    """_skip as a generator: yields (READ, n) to receive n bytes, (DROP, n) to pass n."""
    if depth > _MAX_DEPTH:
        raise ProtocolError("Thrift structure nested too deeply")
    fixed = _FIXED.get(ttype)
    if fixed is not None:
        yield _DROP, fixed
    elif ttype == TType.STRING:
        (size,) = _unpack_i32((yield _READ, 4), 0)
        if size < 0:
            raise ProtocolError(f"negative string size {size}")
        yield _DROP, size
    elif ttype == TType.STRUCT:
        while (ftype := (yield _READ, 1)[0]) != TType.STOP:
            yield _DROP, 2
            yield from _walk(ftype, depth + 1)
    elif ttype in (TType.LIST, TType.SET):
        etype, count = _unpack_list((yield _READ, 5), 0)
        if count < 0:
            raise ProtocolError(f"negative list size {count}")
        efixed = _FIXED.get(etype)
        if efixed is not None:
            yield _DROP, efixed * count
        else:
            for _ in range(count):
                yield from _walk(etype, depth + 1)
    elif ttype == TType.MAP:
        ktype, vtype, count = _unpack_map((yield _READ, 6), 0)
        if count < 0:
            raise ProtocolError(f"negative map size {count}")
        for _ in range(count):
            yield from _walk(ktype, depth + 1)
            yield from _walk(vtype, depth + 1)
    else:
        raise ProtocolError(f"unknown Thrift type id {ttype}")

__all__ = [
    "CALL", "REPLY", "EXCEPTION", "ONEWAY", "METHODS", "Message", "ProtocolError",
    "encode", "encode_call", "encode_reply", "application_exception", "decode",
    "decode_header", "decode_reply", "set_seqid", "message_length", "MessageTooLarge",
    "MessageSkipper",
]
