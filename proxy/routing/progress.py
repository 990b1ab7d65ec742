"""Progress of a statement the proxy runs itself (CREATE DATAMAP, REBUILD, COMPACT, ADD
SEGMENT: minutes of Spark work), as lines of the client's operation log: what beeline
prints while it waits and PyHive's fetch_logs / BI tools' SQL runners poll (GetLog and
FetchResults with the log fetch type), as Spark's own Thrift Server does for queries.

The statement runner (proxy/hs2/statements.py) sets the sink around a local statement;
code deep inside the job calls `report(line)` without knowing who listens. The sink is a
context variable, so the worker thread a job runs in (asyncio.to_thread copies the
context) reports to its own statement's log, and work with no client statement behind it
(a background refresh) reports to no one. A thread a job starts itself takes the sink
with `current()` and calls it directly.
"""
from __future__ import annotations

import contextvars
from contextlib import contextmanager
from typing import Callable, Iterator

Sink = Callable[[str], None]
_SINK: contextvars.ContextVar[Sink | None] = contextvars.ContextVar("statement_progress",
                                                                    default=None)


def report(line: str) -> None:
    """One line of the running statement's operation log (nothing when none listens)."""
    sink = _SINK.get()
    if sink is not None:
        sink(line)


def current() -> Sink | None:
    return _SINK.get()


@contextmanager
def reporting(sink: Sink) -> Iterator[None]:
    token = _SINK.set(sink)
    try:
        yield
    finally:
        _SINK.reset(token)
