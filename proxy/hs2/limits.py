"""Limits applied after login (pure counters and a FIFO queue; no I/O).

SessionLimits is HiveServer2's `hive.server2.limit.connections.per.{user,ipaddress,
user.ipaddress}`: despite the name, HS2 counts open *sessions* at OpenSession, after
authentication, and so do we. The refusal text is HS2's (clients and log scrapers look for
it) plus the proxy's setting name; SQLSTATE 08004 (the server rejected the connection).

RunGate caps statements running at once ([server] max_running_operations). Whoever finds
no free slot waits in one FIFO line of at most operation_queue_size, for at most
operation_queue_timeout seconds; a full line or a wait that runs out is SQLSTATE 53000
(insufficient resources) naming the setting. A waiter that leaves (cancel, close) leaves the
line; a slot granted to a waiter that is already gone is handed on.

Both take new values with `update(...)` (SIGHUP, proxy/gateway/reload.py): a lower limit never takes
anything back, it only refuses or queues what comes next.
"""
from __future__ import annotations

import asyncio
from collections import Counter, deque

from proxy.errors import ClientError
from proxy.logsafe import safe


class SessionLimitReached(ClientError):
    def __init__(self, message: str):
        super().__init__(message, "08004")


class RunQueueError(ClientError):
    def __init__(self, message: str):
        super().__init__(message, "53000")


def effective_timeout(server: float, client: int | None) -> float | None:
    """HiveServer2's rule for a statement's timeout: the smaller positive one of the
    server's ([server] query_timeout) and the client's (TExecuteStatementReq.queryTimeout)."""
    values = [t for t in (server or 0, client or 0) if t > 0]
    return min(values) if values else None


def client_address(peer: str) -> str:
    """'10.0.0.7:51234' / '[::1]:51234' / '::1:51234' -> the address without the port."""
    host, sep, port = peer.rpartition(":")
    if not sep or not port.isdigit():
        return peer
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


class SessionLimits:
    def __init__(self, per_user: int = 0, per_address: int = 0, per_user_address: int = 0):
        self.update(per_user, per_address, per_user_address)
        # open sessions per key; only keys with open sessions are kept
        self._users: Counter[str] = Counter()
        self._addresses: Counter[str] = Counter()
        self._pairs: Counter[tuple[str, str]] = Counter()

    def update(self, per_user: int, per_address: int, per_user_address: int) -> None:
        self.per_user, self.per_address, self.per_user_address = (
            per_user, per_address, per_user_address)

    def admit(self, user: str, address: str) -> None:
        """Count one more session of `user` from `address`, or raise SessionLimitReached.
        HiveServer2's order of checks: user, address, user and address."""
        u = safe(user, 64)
        if self.per_user > 0 and self._users[user] >= self.per_user:
            raise SessionLimitReached(
                f"Connection limit per user reached (user: {u} limit: {self.per_user}); "
                f"[server] limit_connections_per_user")
        if self.per_address > 0 and self._addresses[address] >= self.per_address:
            raise SessionLimitReached(
                f"Connection limit per ipaddress reached (ipaddress: {address} limit: "
                f"{self.per_address}); [server] limit_connections_per_ipaddress")
        if self.per_user_address > 0 and self._pairs[(user, address)] >= self.per_user_address:
            raise SessionLimitReached(
                f"Connection limit per user:ipaddress reached (user:ipaddress: {u}:{address} "
                f"limit: {self.per_user_address}); [server] limit_connections_per_user_ipaddress")
        for counter, key in ((self._users, user), (self._addresses, address),
                             (self._pairs, (user, address))):
            counter[key] += 1

    def release(self, user: str, address: str) -> None:
        for counter, key in ((self._users, user), (self._addresses, address),
                             (self._pairs, (user, address))):
            if counter[key] <= 1:
                del counter[key]
            else:
                counter[key] -= 1

    def open_sessions(self) -> int:
        return sum(self._pairs.values())


class RunGate:
    def __init__(self, limit: int = 0, queue_size: int = 100, queue_timeout: float = 60.0):
        self.running = 0
        self._line: deque[asyncio.Future] = deque()
        self.update(limit, queue_size, queue_timeout)

    def update(self, limit: int, queue_size: int, queue_timeout: float) -> None:
        self.limit, self.queue_size, self.queue_timeout = limit, max(0, queue_size), queue_timeout
        self._hand_on()       # a higher limit lets waiters in now

    @property
    def enabled(self) -> bool:
        return self.limit > 0

    @property
    def waiting(self) -> int:
        return len(self._line)

    def _free(self) -> bool:
        return self.limit <= 0 or self.running < self.limit

    def enter(self) -> asyncio.Future | None:
        """None: a slot is taken now. A future: the caller is in line and awaits `wait(fut)`.
        RunQueueError when the line is full."""
        if self._free() and not self._line:
            self.running += 1
            return None
        if len(self._line) >= self.queue_size or self.queue_timeout <= 0:
            raise RunQueueError(
                f"Too many running statements: {self.running} run, the cap is {self.limit} "
                f"([server] max_running_operations), and the queue is full ({len(self._line)} "
                f"waiting, [server] operation_queue_size = {self.queue_size})")
        fut = asyncio.get_running_loop().create_future()
        self._line.append(fut)
        return fut

    async def wait(self, fut: asyncio.Future) -> None:
        """Wait for the slot `enter` promised; RunQueueError after operation_queue_timeout.
        Cancelled: leaves the line (or gives back a slot granted meanwhile)."""
        try:
            async with asyncio.timeout(self.queue_timeout):
                await asyncio.shield(fut)
        except TimeoutError:
            if fut.done():          # granted as time ran out: keep it
                return
            self._leave(fut)
            raise RunQueueError(
                f"Statement waited {self.queue_timeout:g}s for a running slot and none freed "
                f"up ([server] max_running_operations = {self.limit}, "
                f"operation_queue_timeout)") from None
        except BaseException:
            if fut.done():
                self.release()
            else:
                self._leave(fut)
            raise

    def _leave(self, fut: asyncio.Future) -> None:
        try:
            self._line.remove(fut)
        except ValueError:
            pass
        fut.cancel()

    def release(self) -> None:
        self.running = max(0, self.running - 1)
        self._hand_on()

    def _hand_on(self) -> None:
        while self._line and self._free():
            fut = self._line.popleft()
            if fut.done():
                continue
            self.running += 1
            fut.set_result(None)
