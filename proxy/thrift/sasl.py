"""SASL (binary transport) for HiveServer2: negotiation state machines and data framing.
No I/O: callers feed bytes in and write the bytes these objects return.

Negotiation message: u8 status | u32 BE length | payload. Status START=1, OK=2, BAD=3,
ERROR=4, COMPLETE=5. PLAIN only (QOP auth: the data phase is unwrapped).

Server side (clients -> proxy): START "PLAIN", then the initial response
`authzid NUL authcid NUL passwd` with status COMPLETE (Java TSaslClientTransport) or OK
(Python thrift_sasl: PyHive, impyla); both are accepted. The state machine hands the
credentials to the caller (checking may be slow: salted hashes), which then calls
`accept()` or `reject(reason)`.

Client side (proxy -> Spark): PLAIN written by hand; see PlainClient.

Data phase: every message travels as frames `u32 BE length | bytes`. Frames are a byte
stream (a message may span frames), so FrameDecoder only de-frames; codec.message_length
finds message boundaries.
"""
from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from proxy.logsafe import safe

START, OK, BAD, ERROR, COMPLETE = 1, 2, 3, 4, 5
STATUS_NAMES = {START: "START", OK: "OK", BAD: "BAD", ERROR: "ERROR", COMPLETE: "COMPLETE"}
MECHANISM = b"PLAIN"

_hdr = struct.Struct("!BI")
_len = struct.Struct("!I")


class SaslError(Exception):
    """The SASL exchange failed; the connection must be closed."""


class SaslRejected(SaslError):
    """The server refused the credentials (BAD/ERROR), as opposed to a broken exchange."""


def encode_negotiation(status: int, payload: bytes = b"") -> bytes:
    return _hdr.pack(status, len(payload)) + payload


def decode_negotiation(buf: bytes | bytearray, max_bytes: int) -> tuple[int, bytes, int] | None:
    """(status, payload, bytes consumed) of the first negotiation message, or None if
    incomplete. Raises SaslError on an unknown status or an oversized payload."""
    if len(buf) < 5:
        return None
    status, length = _hdr.unpack_from(buf, 0)
    if status not in STATUS_NAMES:
        raise SaslError(f"invalid SASL status byte {status} (0x{status:02x})")
    if length > max_bytes:
        raise SaslError(f"SASL negotiation payload of {length} bytes exceeds {max_bytes}")
    if len(buf) < 5 + length:
        return None
    return status, bytes(buf[5:5 + length]), 5 + length


def encode_frame(payload: bytes) -> bytes:
    return _len.pack(len(payload)) + payload


class FrameDecoder:
    """Incremental de-framer for the SASL data phase."""

    __slots__ = ("_buf", "max_bytes")

    def __init__(self, max_bytes: int):
        self._buf = bytearray()
        self.max_bytes = max_bytes

    def feed(self, data: bytes) -> list[bytes]:
        self._buf += data
        out = []
        buf = self._buf
        pos = 0
        while len(buf) - pos >= 4:
            (length,) = _len.unpack_from(buf, pos)
            if length > self.max_bytes:
                raise SaslError(f"SASL frame of {length} bytes exceeds {self.max_bytes}")
            if len(buf) - pos - 4 < length:
                break
            out.append(bytes(buf[pos + 4:pos + 4 + length]))
            pos += 4 + length
        if pos:
            del buf[:pos]
        return out

    @property
    def pending(self) -> int:
        return len(self._buf)


class NegState(enum.Enum):
    AWAIT_START = "await_start"
    AWAIT_RESPONSE = "await_response"
    AWAIT_VERDICT = "await_verdict"       # credentials handed to the caller
    COMPLETE = "complete"
    FAILED = "failed"


@dataclass(frozen=True)
class Credentials:
    authzid: str
    user: str
    password: str


@dataclass
class Step:
    reply: bytes = b""                    # bytes to send now
    credentials: Credentials | None = None  # check these, then accept()/reject()
    error: str | None = None              # negotiation failed: send `reply`, then close


class PlainServer:
    """Server side of SASL PLAIN negotiation."""

    def __init__(self) -> None:
        self.state = NegState.AWAIT_START
        self.user: str | None = None

    def _fail(self, status: int, reason: str) -> Step:
        self.state = NegState.FAILED
        return Step(reply=encode_negotiation(status, reason.encode("utf-8", "replace")), error=reason)

    def on_message(self, status: int, payload: bytes) -> Step:
        if self.state is NegState.AWAIT_START:
            if status != START:
                return self._fail(ERROR, f"expected SASL START, got {STATUS_NAMES.get(status, status)}")
            mech = payload.decode("ascii", "replace").strip().upper()
            if mech != "PLAIN":
                return self._fail(BAD, f"Unsupported mechanism type {safe(mech, 64)}")
            self.state = NegState.AWAIT_RESPONSE
            return Step()
        if self.state is NegState.AWAIT_RESPONSE:
            if status not in (OK, COMPLETE):
                return self._fail(ERROR, f"expected SASL OK/COMPLETE, got {STATUS_NAMES.get(status, status)}")
            parts = payload.split(b"\x00")
            if len(parts) == 2:
                parts.insert(0, b"")
            if len(parts) != 3:
                return self._fail(BAD, "Invalid PLAIN message: expected authzid NUL user NUL password")
            try:
                authzid, user, password = (p.decode("utf-8") for p in parts)
            except UnicodeDecodeError:
                return self._fail(BAD, "Invalid PLAIN message: not UTF-8")
            if not user:
                return self._fail(BAD, "PLAIN authentication failed: empty user name")
            if not password:
                return self._fail(BAD, "PLAIN authentication failed: empty password")
            self.state = NegState.AWAIT_VERDICT
            return Step(credentials=Credentials(authzid, user, password))
        return self._fail(ERROR, f"unexpected SASL message in state {self.state.value}")

    def accept(self, user: str) -> bytes:
        if self.state is not NegState.AWAIT_VERDICT:
            raise SaslError(f"accept() in state {self.state.value}")
        self.state = NegState.COMPLETE
        self.user = user
        return encode_negotiation(COMPLETE)

    def reject(self, reason: str) -> bytes:
        self.state = NegState.FAILED
        return encode_negotiation(BAD, reason.encode("utf-8", "replace"))


class PlainClient:
    """Client side of SASL PLAIN (proxy -> Spark)."""

    def __init__(self, user: str, password: str):
        if not user:
            raise SaslError("upstream SASL PLAIN needs a non-empty user")
        self.user = user
        # Hive's PlainSaslServer rejects an empty password; send a placeholder like PyHive.
        self.password = password or "x"
        self.complete = False

    def initial(self) -> bytes:
        """START + initial response, sent back to back (as Java and thrift_sasl do)."""
        token = b"\x00" + self.user.encode() + b"\x00" + self.password.encode()
        return encode_negotiation(START, MECHANISM) + encode_negotiation(OK, token)

    def on_message(self, status: int, payload: bytes) -> None:
        if status == COMPLETE:
            self.complete = True
            return
        reason = payload.decode("utf-8", "replace")
        if status in (BAD, ERROR):
            raise SaslRejected(f"upstream rejected SASL PLAIN ({STATUS_NAMES[status]}): {reason}")
        raise SaslError(f"unexpected SASL status {STATUS_NAMES.get(status, status)} from upstream")
