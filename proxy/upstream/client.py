"""Asyncio HiveServer2 client towards Spark: one connection + one session per client session.

Strict request/reply: one lock per connection, every await bounded by a timeout. A timeout
or a broken socket makes the connection unusable (the byte stream cannot be resynchronised),
so it is closed and every later call fails fast with UpstreamError (SQLSTATE 08S01).

A reply larger than [upstream] max_reply_bytes (a result page too big to hold) fails that
one call and nothing else: it is read past without being kept (SASL: the rest of its frame;
NOSASL: codec.MessageSkipper walks it), so the connection stays in step and the session,
its temporary views and settings, live on. Reconnecting instead would lose all of those:
an HS2 session dies with its TCP connection.

`call_raw(bytes) -> bytes` moves already-encoded messages (the relay path: replies without
handles go back to the client undecoded); `call(name, req)` encodes/decodes.

It is the tree's one HiveServer2 client: `sync` (cli.py), doctor and the periodic time-zone
check (show_settings, through run_blocking) and the tests' raw client use it too.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import struct
import time
from typing import Any, Callable, Coroutine, Iterable

from thrift.Thrift import TApplicationException

from proxy.config import UpstreamSettings
from proxy.errors import UpstreamError, succeeded
from proxy.routing.router import LocalResult
from proxy.thrift.rowsets import decode_rowset, schema_columns
from proxy.thrift import codec, sasl
from proxy.thrift.gen.TCLIService import ttypes as T

log = logging.getLogger("proxy.upstream")

_READ_CHUNK = 1 << 20
# Replies at least this big are trusted to end at a SASL frame boundary (Thrift servers flush
# once per message) instead of being walked by the skip-parser: keeps relaying cheap.
_TRUST_FRAME_BYTES = 1 << 16
_NEGOTIATION_BYTES = 1 << 16       # a SASL challenge from Spark is a few bytes
_frame_len = struct.Struct("!I")


class _ReplyTooLarge(Exception):
    """The reply was read past and dropped; the connection is still in step."""

    def __init__(self, size: int):
        super().__init__(size)
        self.size = size


class UpstreamAuthError(UpstreamError):
    """The server refused the SASL login (doctor tells this apart from a wrong transport)."""


class UpstreamConnection:
    # Who is at the other end, for messages (the `sync` command talks to the proxy itself).
    peer = "Spark Thrift Server"
    nosasl_hint = "--upstream-auth nosasl"

    def __init__(self, settings: UpstreamSettings, max_reply_bytes: int | None = None):
        self.settings = settings
        self.max_bytes = settings.max_reply_bytes if max_reply_bytes is None else max_reply_bytes
        self.addr = f"{settings.host}:{settings.port}"
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._lock = asyncio.Lock()
        self._sasl = settings.auth == "plain"
        self._buf = bytearray()
        self.broken: str | None = None
        # (method, request) of the call in flight, for whoever reports a broken connection.
        self.current: tuple[str, Any] | None = None
        self.on_break: Callable[[str], None] | None = None
        # proxy.hs2.recovery.UpstreamHealth shared by the serve path's connections, or None
        self.health: Any = None
        self.connected_at: float | None = None     # time.time() of the TCP connect

    async def connect(self, user: str, password: str) -> None:
        s = self.settings
        try:
            self._reader, self._writer = await asyncio.wait_for(
                asyncio.open_connection(s.host, s.port, limit=_READ_CHUNK), s.connect_timeout)
        except (OSError, asyncio.TimeoutError) as e:
            reason = "timed out" if isinstance(e, asyncio.TimeoutError) else (e.strerror or str(e))
            raise self._connect_failed(
                f"Cannot connect to {self.peer} at {self.addr}: {reason}") from None
        self.connected_at = time.time()
        if not self._sasl:
            return
        client = sasl.PlainClient(s.user or user, s.password if s.user else password)
        try:
            self._writer.write(client.initial())
            await asyncio.wait_for(self._writer.drain(), s.connect_timeout)
            buf = bytearray()
            while not client.complete:
                got = sasl.decode_negotiation(buf, _NEGOTIATION_BYTES)
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
            if isinstance(e, sasl.SaslRejected):   # this login, not the server, is at fault
                raise UpstreamAuthError(f"SASL with {self.peer} at {self.addr} failed: {e}") from None
            raise self._connect_failed(f"SASL with {self.peer} at {self.addr} failed: {e}") from None
        except (OSError, asyncio.TimeoutError) as e:
            self.close()
            raise self._connect_failed(
                f"SASL with {self.peer} at {self.addr} failed: "
                f"{'timed out' if isinstance(e, asyncio.TimeoutError) else e}") from None
        except UpstreamError as e:
            self.close()
            raise self._connect_failed(str(e)) from None

    def _connect_failed(self, message: str) -> UpstreamError:
        if self.health is not None:
            self.health.failure(message)
        return UpstreamError(message)

    def probe(self) -> bool:
        """Usable? An idle connection whose server went away (Spark restarted) is found out
        before a request is written to it: a new session can take over, no call is lost."""
        if self.broken:
            return False
        if self._writer is None or self._reader is None:
            return True       # not connected yet: connect() reports its own failure
        if self._reader.at_eof() or self._writer.is_closing():    # news told by the health line
            self._break(f"{self.peer} closed the connection", logging.INFO)
            return False
        return True

    async def call_raw(self, data: bytes, timeout: float | None = None,
                       request: tuple[str, Any] | None = None) -> bytes:
        if not self.probe():
            raise UpstreamError(f"Connection to {self.peer} at {self.addr} is lost: {self.broken}")
        timeout = self.settings.call_timeout if timeout is None else timeout
        async with self._lock:
            self.current = request
            try:
                async with asyncio.timeout(timeout):      # no extra task per call
                    reply = await self._roundtrip(data)
                if self.health is not None:
                    self.health.success()
                return reply
            except _ReplyTooLarge as e:
                raise self._too_large(data, e.size) from None
            except TimeoutError:
                self._break(f"no reply within {timeout:g}s")
            except asyncio.IncompleteReadError:
                self._break(f"{self.peer} closed the connection")
            except (OSError, EOFError) as e:
                self._break(str(e) or type(e).__name__)
            except (codec.ProtocolError, sasl.SaslError) as e:
                self._break(f"bad reply: {e}")
            finally:
                self.current = None
        raise UpstreamError(f"Connection to {self.peer} at {self.addr} is lost: {self.broken}")

    def _too_large(self, data: bytes, size: int) -> UpstreamError:
        try:
            name = codec.decode_header(data)[0]
        except codec.ProtocolError:
            name = "a call"
        log.warning("upstream %s reply to %s of %d bytes exceeds [upstream] max_reply_bytes "
                    "(%d); dropped, the session goes on", self.addr, name, size, self.max_bytes)
        # HY000, not 08S01: the link is fine, and pools evict connections on SQLSTATE 08xxx.
        return UpstreamError(
            f"The {self.peer} reply to {name} of {size} bytes exceeds the proxy's limit of "
            f"{self.max_bytes} bytes ([upstream] max_reply_bytes); it was dropped. Fetch fewer "
            f"rows at a time or raise the limit; the session is still usable.", sqlstate="HY000")

    def _break(self, reason: str, level: int = logging.WARNING) -> None:
        self.broken = reason
        log.log(level, "upstream %s connection broken: %s", self.addr, reason)
        self.close()
        if self.health is not None:
            self.health.failure(f"{self.peer} at {self.addr}: {reason}", self.connected_at)
        if self.on_break is not None:
            try:
                self.on_break(reason)
            except Exception:  # noqa: BLE001 - reporting must not hide the failure itself
                log.exception("reporting the broken upstream connection failed")

    async def _roundtrip(self, data: bytes) -> bytes:
        w, r = self._writer, self._reader
        if w is None or r is None:
            raise EOFError("not connected")
        w.write(sasl.encode_frame(data) if self._sasl else data)
        await w.drain()
        if self._sasl:
            return await self._read_sasl_reply(r)
        return await self._read_raw_reply(r)

    async def _read_sasl_reply(self, r: asyncio.StreamReader) -> bytes:
        # Strict request/reply: buf holds only (part of) this reply, as whole frames; a
        # frame of _TRUST_FRAME_BYTES or more is trusted to end the message (Thrift servers
        # flush once per message), so big replies are never walked by the skip-parser.
        buf = self._buf
        while True:
            (length,) = _frame_len.unpack(await r.readexactly(4))
            if length > self.max_bytes:
                await _discard(r, length)
                buf.clear()
                raise _ReplyTooLarge(length)
            payload = await r.readexactly(length)
            if not buf:             # the usual case, one frame per reply: no copies
                n = length if length >= _TRUST_FRAME_BYTES else codec.message_length(payload, self.max_bytes)
                if n == length:
                    return payload
            buf += payload
            n = len(buf) if len(buf) >= _TRUST_FRAME_BYTES else codec.message_length(buf, self.max_bytes)
            if n is not None:
                return _take(buf, n)

    async def _read_raw_reply(self, r: asyncio.StreamReader) -> bytes:
        buf = self._buf
        while True:
            if buf:
                try:
                    n = codec.message_length(buf, self.max_bytes)
                except codec.MessageTooLarge:
                    raise _ReplyTooLarge(await self._skip_raw(r)) from None
                if n is not None:
                    return _take(buf, n)
            chunk = await r.read(_READ_CHUNK)
            if not chunk:
                raise EOFError("Spark closed the connection")
            buf += chunk

    async def _skip_raw(self, r: asyncio.StreamReader) -> int:
        """NOSASL: walk the rest of an oversized reply without keeping it; its size."""
        skipper = codec.MessageSkipper()
        with memoryview(self._buf) as view:
            left = skipper.feed(view)
        self._buf[:] = self._buf[len(self._buf) - left:] if left else b""
        while left is None:
            chunk = await r.read(_READ_CHUNK)
            if not chunk:
                raise EOFError("Spark closed the connection")
            left = skipper.feed(chunk)
            if left:
                self._buf[:] = chunk[len(chunk) - left:]
        return skipper.size

    async def call(self, name: str, req: Any, seqid: int = 0, timeout: float | None = None) -> Any:
        reply = await self.call_raw(codec.encode_call(name, seqid, req), timeout, (name, req))
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


def _take(buf: bytearray, n: int) -> bytes:
    """The first n bytes of buf (one reply), cut off it."""
    out = bytes(buf[:n])
    del buf[:n]
    return out


async def _discard(r: asyncio.StreamReader, n: int) -> None:
    """Read and drop n bytes, holding at most one chunk."""
    while n > 0:
        chunk = await r.read(min(n, _READ_CHUNK))
        if not chunk:
            raise EOFError("Spark closed the connection")
        n -= len(chunk)


def check(status: T.TStatus | None, what: str) -> None:
    """Raise UpstreamError (status passed through) unless status is SUCCESS/SUCCESS_WITH_INFO."""
    if status is None:
        raise UpstreamError(f"Spark Thrift Server sent {what} without a status")
    if not succeeded(status):
        raise UpstreamError(status.errorMessage or f"{what} failed", status)


class UpstreamSession:
    """The upstream HS2 session backing one client session."""

    def __init__(self, settings: UpstreamSettings, max_reply_bytes: int | None = None):
        self.settings = settings
        self.conn = UpstreamConnection(settings, max_reply_bytes)
        self.handle: T.TSessionHandle | None = None
        self.protocol: int | None = None

    async def open(self, user: str, password: str, client_protocol: int,
                   configuration: dict[str, str] | None,
                   real_user: str | None = None) -> T.TOpenSessionResp:
        """Connect and OpenSession; returns upstream's response (status checked by caller).
        `real_user` (with `password`) impersonates `user` (proxy/hs2/identity.py allowed it)."""
        await self.conn.connect(real_user or user, password)
        proto = min(client_protocol, self.settings.max_protocol)
        if real_user is not None:
            configuration = {**(configuration or {}), "hive.server2.proxy.user": user}
        elif self.settings.user and self.settings.user != user:
            # A service account connects; the end user is impersonated (HS2 doAs).
            configuration = dict(configuration or {})
            configuration.setdefault("hive.server2.proxy.user", user)
        req = T.TOpenSessionReq(client_protocol=proto, username=self.settings.user or real_user or user,
                                password=(self.settings.password if self.settings.user else password) or None,
                                configuration=configuration)
        try:
            resp = await self.conn.call("OpenSession", req, timeout=self.settings.connect_timeout)
        except UpstreamError:
            self.conn.close()
            raise
        if succeeded(resp.status) and resp.sessionHandle:
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

    async def fetch_rows(self, op: T.TOperationHandle, ncols: int, batch: int = 10000) -> list[tuple]:
        """FetchResults(NEXT) until an empty batch: every row left, as tuples."""
        rows: list[tuple] = []
        while True:
            fr = await self.conn.call("FetchResults", T.TFetchResultsReq(
                operationHandle=op, orientation=T.TFetchOrientation.FETCH_NEXT, maxRows=batch))
            check(fr.status, "FetchResults")
            got = decode_rowset(fr.results, ncols)
            if not got:
                return rows
            rows.extend(got)

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
            return LocalResult(columns=columns, rows=await self.fetch_rows(op, len(columns)))
        finally:
            try:
                await self.conn.call("CloseOperation", T.TCloseOperationReq(operationHandle=op))
            except UpstreamError:
                pass


def run_blocking(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run a coroutine of this client for a blocking caller, on a loop of its own: in this
    thread, or (when this thread already runs a loop) in a worker thread owned and joined here."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="upstream-blocking") as pool:
        return pool.submit(asyncio.run, coro).result()


async def show_settings(host: str, port: int, keys: Iterable[str], *, auth: str = "plain",
                        user: str, password: str, timeout: float) -> tuple[int | None, dict[str, str]]:
    """On a session of its own: `SET key` for each key, as the server reports it; with the
    protocol version the server chose. The key "" runs `SET` alone: every setting the server
    lists (those made explicitly, its spark-defaults among them), each under its own key.
    A key the server refuses is left out, and so are the
    rest once a call times out (a Thrift server's first statement can be slow). Raises
    UpstreamError when no session opens (UpstreamAuthError: the login was refused)."""
    settings = UpstreamSettings(host=host, port=port, auth=auth, user=user, password=password,
                                connect_timeout=timeout, call_timeout=timeout)
    session = UpstreamSession(settings)
    resp = await session.open(user, password, T.TProtocolVersion.HIVE_CLI_SERVICE_PROTOCOL_V10, None)
    if session.handle is None:
        check(resp.status, "OpenSession")
        raise UpstreamError("Spark Thrift Server sent OpenSession without a session handle")
    found: dict[str, str] = {}
    try:
        for key in keys:
            try:
                result = await session.run_sql(f"SET {key}".strip())
            except UpstreamError:
                if session.conn.broken:
                    break
                continue
            if not key:
                found.update((str(r[0]), str(r[1])) for r in result.rows
                             if len(r) >= 2 and r[1] is not None)
            elif result.rows and len(result.rows[0]) >= 2 and result.rows[0][1] is not None:
                found[key] = str(result.rows[0][1])
    finally:
        await session.close()
    return session.protocol, found
