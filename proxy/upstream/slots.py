"""Admission of upstream sessions: a global and a per-user cap, with a bounded FIFO queue.

Every client session holds one upstream session: a TCP connection and one worker thread of
the Spark Thrift Server (hive.server2.thrift.max.worker.threads, 500 by default). Uncapped,
a burst of clients exhausts that pool and real clients' OpenSession fail inside Spark with
no useful message. Capped, a burst waits here, bounded in number ([upstream]
session_queue_size) and in time (session_queue_timeout), and whoever cannot wait gets
SQLSTATE 53300 naming the cap. A slot is taken before the upstream connection is made, so
sessions still being opened count too. No I/O.
"""
from __future__ import annotations

import asyncio
from collections import Counter

from proxy.errors import ClientError
from proxy.logsafe import safe


class TooManySessions(ClientError):
    def __init__(self, message: str):
        super().__init__(message, "53300")


class SessionSlots:
    def __init__(self, total: int, per_user: int, queue_size: int, queue_timeout: float):
        self.total = total
        self.per_user = per_user
        self.queue_size = max(0, queue_size)
        self.queue_timeout = queue_timeout
        self.active = 0
        self.by_user: Counter[str] = Counter()    # only users holding a slot: bounded
        self._waiting: list[tuple[str, asyncio.Future]] = []

    def update(self, total: int, per_user: int, queue_size: int, queue_timeout: float) -> None:
        """New caps (SIGHUP): sessions already open stay; a higher cap lets waiters in."""
        self.total, self.per_user = total, per_user
        self.queue_size, self.queue_timeout = max(0, queue_size), queue_timeout
        self._grant()

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def _fits(self, user: str) -> bool:
        return ((self.total <= 0 or self.active < self.total)
                and (self.per_user <= 0 or self.by_user[user] < self.per_user))

    def _take(self, user: str) -> None:
        self.active += 1
        self.by_user[user] += 1

    async def acquire(self, user: str) -> None:
        """Take a slot for `user`, waiting in line if need be; TooManySessions if the line
        is full or no slot frees up in time."""
        if self._fits(user):
            self._take(user)
            return
        if len(self._waiting) >= self.queue_size or self.queue_timeout <= 0:
            raise TooManySessions(f"{self._cap(user)}, and {len(self._waiting)} OpenSession "
                                  f"requests already wait for a slot ([upstream] "
                                  f"session_queue_size = {self.queue_size})")
        entry = (user, asyncio.get_running_loop().create_future())
        self._waiting.append(entry)
        try:
            async with asyncio.timeout(self.queue_timeout):
                await entry[1]
        except TimeoutError:
            if entry[1].done() and not entry[1].cancelled():   # granted as time ran out
                return
            self._waiting.remove(entry)
            raise TooManySessions(f"{self._cap(user)}, and none was freed within "
                                  f"{self.queue_timeout:g}s ([upstream] session_queue_timeout)") from None
        except BaseException:
            if entry[1].done() and not entry[1].cancelled():
                self.release(user)            # granted, but the caller is gone
            elif entry in self._waiting:
                self._waiting.remove(entry)
            raise

    def release(self, user: str) -> None:
        if self.by_user[user] <= 0:
            del self.by_user[user]
            return
        self.active -= 1
        self.by_user[user] -= 1
        if not self.by_user[user]:
            del self.by_user[user]
        self._grant()

    def _grant(self) -> None:
        """Hand free slots to waiters in arrival order, skipping those held back by their
        own per-user cap (they do not block other users)."""
        for entry in list(self._waiting):
            if self.total > 0 and self.active >= self.total:
                return
            user, fut = entry
            if self._fits(user):
                self._waiting.remove(entry)
                self._take(user)
                fut.set_result(None)

    def _cap(self, user: str) -> str:
        if self.per_user > 0 and self.by_user[user] >= self.per_user:
            return (f"Too many sessions: user '{safe(user, 64)}' already has "
                    f"{self.by_user[user]} open, the cap is {self.per_user} "
                    f"([upstream] max_sessions_per_user)")
        return (f"Too many sessions: {self.active} upstream sessions are open or opening, "
                f"the cap is {self.total} ([upstream] max_sessions)")
