"""Asyncio HiveServer2 client towards Spark: one connection + one session per client session.

Strict request/reply: one lock per connection, every await bounded by a timeout. A timeout
or a broken socket makes the connection unusable (the byte stream cannot be resynchronised),
so it is closed and every later call fails fast with UpstreamError (SQLSTATE 08S01).

`call_raw(bytes) -> bytes` moves already-encoded messages (the relay path: replies without
handles go back to the client undecoded); `call(name, req)` encodes/decodes.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any

from thrift.Thrift import TApplicationException

from proxy.config import UpstreamSettings
from proxy.errors import UpstreamError
from proxy.router import LocalResult
from proxy.results import decode_rowset, schema_columns
from proxy.thrift import codec, sasl
from proxy.thrift.gen.TCLIService import ttypes as T

log = logging.getLogger("proxy.upstream")

_READ_CHUNK = 1 << 20
# Replies at least this big are trusted to end at a SASL frame boundary (Thrift servers flush
# once per message) instead of being walked by the skip-parser: keeps relaying cheap.
_TRUST_FRAME_BYTES = 1 << 16


class UpstreamConnection:
    # Who is at the other end, for messages (the `sync` command talks to the proxy itself).
    peer = "Spark Thrift Server"
    nosasl_hint = "--upstream-auth nosasl"

    def __init__(self, settings: UpstreamSettings, max_frame_bytes: int):
        self.settings = settings
        self.max_bytes = max_frame_bytes
        self.addr = f"{settings.host}:{settings.port}"
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._lock = asyncio.Lock()
        self._sasl = settings.auth == "plain"
        self._frames: sasl.FrameDecoder | None = None
        self._buf = bytearray()
        self.broken: str | None = None

    async def connect(self, user: str, password: str) -> None:
        s = self.settings
        try:
            self._reader, self._writer = await asyncio.wait_for(
                asyncio.open_connection(s.host, s.port, limit=_READ_CHUNK), s.connect_timeout)
        except (OSError, asyncio.TimeoutError) as e:
            reason = "timed out" if isinstance(e, asyncio.TimeoutError) else (e.strerror or str(e))
            raise UpstreamError(f"Cannot connect to {self.peer} at {self.addr}: {reason}") from None
        if not self._sasl:
            return
        client = sasl.PlainClient(s.user or user, s.password if s.user else password)
        try:
            self._writer.write(client.initial())
            await asyncio.wait_for(self._writer.drain(), s.connect_timeout)
            buf = bytearray()
            while not client.complete:
                got = sasl.decode_negotiation(buf, self.max_bytes)
                if got is None:
                    chunk = await asyncio.wait_for(self._reader.read(65536), s.connect_timeout)
                    if not chunk:
                        raise UpstreamError(
                            f"{self.peer} at {self.addr} closed the connection during SASL "
                            f"negotiation (is it configured for NOSASL? try {self.nosasl_hint})")
                    buf += chunk
                    continue
                status, payload, used = got
                del buf[:used]
                client.on_message(status, payload)
        except sasl.SaslError as e:
            self.close()
            raise UpstreamError(f"SASL with {self.peer} at {self.addr} failed: {e}") from None
        except (OSError, asyncio.TimeoutError) as e:
            self.close()
            raise UpstreamError(f"SASL with {self.peer} at {self.addr} failed: "
                                f"{'timed out' if isinstance(e, asyncio.TimeoutError) else e}") from None
        except UpstreamError:
            self.close()
            raise
        self._frames = sasl.FrameDecoder(self.max_bytes)

    async def call_raw(self, data: bytes, timeout: float | None = None) -> bytes:
        if self.broken:
            raise UpstreamError(f"Connection to {self.peer} at {self.addr} is lost: {self.broken}")
        timeout = self.settings.call_timeout if timeout is None else timeout
        async with self._lock:
            try:
                async with asyncio.timeout(timeout):      # no extra task per call
                    return await self._roundtrip(data)
            except TimeoutError:
                self._break(f"no reply within {timeout:g}s")
            except (OSError, EOFError, asyncio.IncompleteReadError) as e:
                self._break(str(e) or type(e).__name__)
            except (codec.ProtocolError, sasl.SaslError) as e:
                self._break(f"bad reply: {e}")
        raise UpstreamError(f"Connection to {self.peer} at {self.addr} is lost: {self.broken}")

    def _break(self, reason: str) -> None:
        self.broken = reason
        log.warning("upstream %s connection broken: %s", self.addr, reason)
        self.close()

    async def _roundtrip(self, data: bytes) -> bytes:
        w, r = self._writer, self._reader
        if w is None or r is None:
            raise EOFError("not connected")
        w.write(sasl.encode_frame(data) if self._sasl else data)
        await w.drain()
        buf = self._buf
        frames = self._frames if self._sasl else None
        while True:
            if buf:
                # Strict request/reply: buf holds only (part of) this reply. Under SASL it
                # holds whole frames, and big ones are trusted to end the message.
                if frames is not None and len(buf) >= _TRUST_FRAME_BYTES:
                    n: int | None = len(buf)
                else:
                    n = codec.message_length(buf, self.max_bytes)
                if n is not None:
                    out = bytes(buf[:n])
                    del buf[:n]
                    return out
            chunk = await r.read(_READ_CHUNK)
            if not chunk:
                raise EOFError("Spark closed the connection")
            if frames is None:
                buf += chunk
            else:
                for payload in frames.feed(chunk):
                    buf += payload

    async def call(self, name: str, req: Any, seqid: int = 0, timeout: float | None = None) -> Any:
        reply = await self.call_raw(codec.encode_call(name, seqid, req), timeout)
        try:
            return codec.decode_reply(reply, name)
        except TApplicationException as e:
            raise UpstreamError(f"{self.peer} rejected {name}: {e.message}") from None
        except codec.ProtocolError as e:
            self._break(f"bad {name} reply: {e}")
            raise UpstreamError(f"Connection to {self.peer} at {self.addr} is lost: {e}") from None

    def close(self) -> None:
        if self._writer is not None:
            try:
                self._writer.close()
            except Exception:  # noqa: BLE001 - already gone
                pass
            self._writer = None
            self._reader = None


def check(status: T.TStatus | None, what: str) -> None:
    """Raise UpstreamError (status passed through) unless status is SUCCESS/SUCCESS_WITH_INFO."""
    if status is None:
        raise UpstreamError(f"Spark Thrift Server sent {what} without a status")
    if status.statusCode not in (T.TStatusCode.SUCCESS_STATUS, T.TStatusCode.SUCCESS_WITH_INFO_STATUS):
        raise UpstreamError(status.errorMessage or f"{what} failed", status)


class UpstreamSession:
    """The upstream HS2 session backing one client session."""

    def __init__(self, settings: UpstreamSettings, max_frame_bytes: int):
        self.settings = settings
        self.conn = UpstreamConnection(settings, max_frame_bytes)
        self.handle: T.TSessionHandle | None = None
        self.protocol: int | None = None

    async def open(self, user: str, password: str, client_protocol: int,
                   configuration: dict[str, str] | None) -> T.TOpenSessionResp:
        """Connect and OpenSession; returns upstream's response (status checked by caller)."""
        await self.conn.connect(user, password)
        proto = min(client_protocol, self.settings.max_protocol)
        if self.settings.user and self.settings.user != user:
            # A service account connects; the end user is impersonated (HS2 doAs).
            configuration = dict(configuration or {})
            configuration.setdefault("hive.server2.proxy.user", user)
        req = T.TOpenSessionReq(client_protocol=proto, username=self.settings.user or user,
                                password=(self.settings.password if self.settings.user else password) or None,
                                configuration=configuration)
        try:
            resp = await self.conn.call("OpenSession", req, timeout=self.settings.connect_timeout)
        except UpstreamError:
            self.conn.close()
            raise
        if resp.status is not None and resp.status.statusCode in (0, 1) and resp.sessionHandle:
            self.handle = resp.sessionHandle
            self.protocol = resp.serverProtocolVersion
        else:
            self.conn.close()
        return resp

    async def close(self) -> None:
        if self.handle is not None and not self.conn.broken:
            try:
                await self.conn.call("CloseSession", T.TCloseSessionReq(sessionHandle=self.handle),
                                     timeout=min(self.settings.call_timeout, 30.0))
            except UpstreamError as e:
                log.info("upstream CloseSession failed: %s", e)
        self.handle = None
        self.conn.close()

    async def run_sql(self, sql: str) -> LocalResult:
        """Run one statement synchronously on this session and return all its rows."""
        resp = await self.conn.call("ExecuteStatement", T.TExecuteStatementReq(
            sessionHandle=self.handle, statement=sql, confOverlay={}, runAsync=False))
        check(resp.status, "ExecuteStatement")
        op = resp.operationHandle
        try:
            if not op.hasResultSet:
                return LocalResult(columns=[], rows=[])
            meta = await self.conn.call("GetResultSetMetadata", T.TGetResultSetMetadataReq(operationHandle=op))
            check(meta.status, "GetResultSetMetadata")
            columns = schema_columns(meta.schema)
            rows: list[tuple] = []
            while True:
                fr = await self.conn.call("FetchResults", T.TFetchResultsReq(
                    operationHandle=op, orientation=T.TFetchOrientation.FETCH_NEXT, maxRows=10000))
                check(fr.status, "FetchResults")
                batch = decode_rowset(fr.results, len(columns))
                if not batch:
                    break
                rows.extend(batch)
            return LocalResult(columns=columns, rows=rows)
        finally:
            try:
                await self.conn.call("CloseOperation", T.TCloseOperationReq(operationHandle=op))
            except UpstreamError:
                pass
