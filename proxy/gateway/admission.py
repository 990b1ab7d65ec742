"""Who may hold a connection and who may still try a password (pure logic, no I/O).

ConnectionLimits caps concurrent client connections, in total and per client address, so a
burst of half-open connections cannot exhaust file descriptors, memory or (through the
sessions they would open) the Spark Thrift Server's worker pool.

LoginThrottle counts failed PLAIN logins per user name and per client address in a fixed
window. Once a key reaches its limit, further attempts are refused without hashing until
the window that started with its first failure ends. A success clears the user's count
only: clearing the address too would let a client with one valid account reset its budget
between guesses at other accounts. State is two bounded LRU maps: a flood of distinct user
names evicts old entries instead of growing memory.
"""
from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable


class ConnectionLimits:
    """Counts live connections; `admit` says why one must be refused (None = admitted)."""

    def __init__(self, total: int, per_address: int):
        self.total_limit = total            # <= 0: no limit
        self.per_address_limit = per_address
        self.total = 0
        self._by_address: dict[str, int] = {}   # only addresses with live connections

    def admit(self, address: str) -> str | None:
        if self.total_limit > 0 and self.total >= self.total_limit:
            return f"too many connections ({self.total_limit}, server.max_connections)"
        n = self._by_address.get(address, 0)
        if self.per_address_limit > 0 and n >= self.per_address_limit:
            return (f"too many connections from {address} "
                    f"({self.per_address_limit}, server.max_connections_per_address)")
        self.total += 1
        self._by_address[address] = n + 1
        return None

    def release(self, address: str) -> None:
        n = self._by_address.get(address, 0)
        if n <= 0:
            return
        self.total -= 1
        if n == 1:
            del self._by_address[address]
        else:
            self._by_address[address] = n - 1

    def count(self, address: str) -> int:
        return self._by_address.get(address, 0)


@dataclass(frozen=True)
class Lockout:
    what: str              # "user alice" / "address 10.0.0.7"
    retry_after: float     # seconds

    def message(self) -> str:
        return (f"Too many failed logins for {self.what}; retry in "
                f"{max(1, round(self.retry_after))} s")


class _Window:
    """Failures of one key in fixed windows, as an LRU map bounded by `max_keys`."""

    def __init__(self, limit: int, window: float, max_keys: int):
        self.limit, self.window, self.max_keys = limit, window, max_keys
        self._keys: OrderedDict[str, list] = OrderedDict()    # key -> [window start, failures]

    def _live(self, key: str, now: float) -> list | None:
        entry = self._keys.get(key)
        if entry is not None and now - entry[0] >= self.window:
            del self._keys[key]
            return None
        return entry

    def locked_for(self, key: str, now: float) -> float | None:
        entry = self._live(key, now)
        if self.limit <= 0 or entry is None or entry[1] < self.limit:
            return None
        return entry[0] + self.window - now

    def fail(self, key: str, now: float) -> bool:
        """Count a failure; True when it is the one that reaches the limit."""
        if self.limit <= 0:
            return False
        entry = self._live(key, now)
        if entry is None:
            entry = self._keys[key] = [now, 0]
        self._keys.move_to_end(key)
        entry[1] += 1
        while len(self._keys) > self.max_keys:
            self._keys.popitem(last=False)
        return entry[1] == self.limit

    def clear(self, key: str) -> None:
        self._keys.pop(key, None)

    def __len__(self) -> int:
        return len(self._keys)


class LoginThrottle:
    def __init__(self, per_user: int, per_address: int, window: float,
                 max_keys: int = 10_000, clock: Callable[[], float] = time.monotonic):
        self.users = _Window(per_user, window, max_keys)
        self.addresses = _Window(per_address, window, max_keys)
        self._clock = clock

    def check(self, user: str, address: str) -> Lockout | None:
        """A Lockout when this attempt must be refused before its password is checked."""
        now = self._clock()
        # The address first: a client guessing across many names learns nothing per name.
        for win, key, what in ((self.addresses, address, f"address {address}"),
                               (self.users, user, f"user {user}")):
            left = win.locked_for(key, now)
            if left is not None:
                return Lockout(what, left)
        return None

    def failed(self, user: str, address: str) -> list[Lockout]:
        """Count one failed login; returns the lockouts this failure started (to log)."""
        now = self._clock()
        started = []
        for win, key, what in ((self.users, user, f"user {user}"),
                               (self.addresses, address, f"address {address}")):
            if win.fail(key, now):
                started.append(Lockout(what, win.window))
        return started

    def succeeded(self, user: str) -> None:
        self.users.clear(user)
