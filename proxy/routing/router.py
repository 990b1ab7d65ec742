"""ExecuteStatement -> Decision: the one hook where datamap DDL and rewriting plug in.

The protocol layer (service.py) calls `Router.decide(ctx, statement)` for every
ExecuteStatement and acts on the returned Decision; it knows nothing about datamaps or
SQL. The default router forwards everything unchanged. Later components register
`StatementHandler`s (tried in order; the first that returns a Decision wins). What a
statement is comes from one classifier, proxy/routing/classify.py, which every handler asks; a
decision is made within `classify.shared()`, so the statement is classified once.

A handler never changes the session: `ctx.conf` is read-only. A statement that changes
the session's settings says so in the Decision's `settings`, which the session's owner
(service.py) applies; a handler that does not decide returns `Remember(settings)`, and
the handlers after it see those settings in their `ctx.conf` already.

Handlers are plain functions, but a decision can be costly: a rewrite parses the statement
with sqlglot (about 10 µs per byte, so seconds for a megabyte IN list). `decide_async`
keeps that off the event loop: short statements are decided in place (a few ms at most),
longer ones in small owned worker pools by size, so that a few multi-megabyte statements
never hold up the dashboard-sized ones. Code a handler calls can ask
`must_not_block()` to learn that it must not wait for slow resources (such as a Spark
session still starting), whether it runs on the loop or in a worker deciding for it.
"""
from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import gc
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Mapping, Protocol, Sequence

from proxy.routing import classify

# Decided on the loop up to this size: a cold rewrite takes 1-3 ms at 100-700 bytes, but
# 25 ms at 7 KB and up to ~70 ms for 1 KB of nested parentheses (measured).
INLINE_BYTES = 512
# (largest statement, pool name, workers): sqlglot needs ~10 µs per byte, so the small
# pool never waits behind seconds of parsing.
_LANES = ((16 << 10, "small", 2), (256 << 10, "moderate", 1), (None, "large", 1))
_FOR_LOOP = contextvars.ContextVar("deciding_for_the_event_loop", default=False)


def share_the_interpreter() -> None:
    """Call once a server is set up. A worker parsing a large statement holds the GIL in
    5 ms slices (the loop waited that long at each wake-up; now 1 ms), and allocates
    millions of objects, which triggers full collections: stop-the-world pauses of up to
    170 ms (measured with a proxy-sized heap). Freezing what start-up allocated keeps them
    out of every collection (pauses up to ~60 ms). The thresholds stay: collecting less
    often lets dead parse trees, each holding its statement's text, pile up (~1 MB per
    distinct 1 MB statement, measured)."""
    sys.setswitchinterval(0.001)
    gc.collect()
    gc.freeze()


def must_not_block() -> bool:
    """True on the event loop and in a worker deciding a statement for it."""
    if _FOR_LOOP.get():
        return True
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


@dataclass(frozen=True)
class StatementContext:
    """What a handler may know about the statement's session. No I/O handles."""
    session_id: str                 # client-visible session guid (hex)
    user: str                       # authenticated user (from SASL / NOSASL OpenSession)
    current_db: str                 # best knowledge of the session's current database
    conf: Mapping[str, str]         # session-level settings the proxy tracks (SET k=v it saw)
    protocol_version: int
    opened: float = 0.0             # time.monotonic() when the session was opened
    arrived: float | None = None    # time.monotonic() when the statement arrived (None: unknown)


@dataclass(frozen=True)
class LocalResult:
    """A result set built by the proxy. types are Spark type names: string, int, bigint,
    boolean, double, timestamp, ... (mapped to TTypeId by the protocol layer)."""
    columns: Sequence[tuple[str, str]]
    rows: Sequence[tuple[Any, ...]]


# Runs the statement locally. May take long (a datamap build); the protocol layer runs it as
# an owned task and reports RUNNING until it ends. `upstream` lets it run SQL on the
# client's own upstream session: await upstream("SQL") -> LocalResult.
LocalRunner = Callable[["UpstreamSQL"], Awaitable[LocalResult]]
UpstreamSQL = Callable[[str], Awaitable[LocalResult]]
Settings = tuple[tuple[str, str], ...]   # (key, value) pairs the session takes on


@dataclass(frozen=True)
class PassThrough:
    """Forward the statement as the client sent it. `after` (optional) is awaited once the
    upstream operation has FINISHED successfully, before the client sees FINISHED
    (used to cut segments and refresh datamaps after a load)."""
    after: Callable[[UpstreamSQL], Awaitable[None]] | None = None
    settings: Settings = ()
    # statements run first on the client's upstream session, e.g. REFRESH TABLE when the
    # freshness guard saw files that the session's cached file list may not have
    before: tuple[str, ...] = ()
    note: str = ""                   # for the statement log line, e.g. "stale:agg_sales"
    # called once when a statement with `after` ends, however it ends (the write it
    # forwarded finished or failed): e.g. the freshness guard stops holding the table
    ended: Callable[[], None] | None = None
    # for the query log (proxy/observability/observe.py StatementEvent): the datamaps that could not
    # answer this query, (datamap "db.name", one-line reason), and why it was not even
    # considered for a rewrite ("" when it was)
    why_not: tuple[tuple[str, str], ...] = ()
    bypassed: str = ""
    # lines for the client's operation log, as Rewrite.log: e.g. that the base tables
    # answer because a datamap is refreshing
    log: tuple[str, ...] = ()


@dataclass(frozen=True)
class Rewrite:
    """Forward `sql` instead of the client's text. Result metadata comes from upstream."""
    sql: str
    note: str = ""                   # for the statement log line, e.g. "mv:agg_sales"
    after: Callable[[UpstreamSQL], Awaitable[None]] | None = None
    settings: Settings = ()
    # lines for the client's operation log (FetchResults with the log fetch type), e.g.
    # which datamap answered and how fresh its data is
    log: tuple[str, ...] = ()
    before: tuple[str, ...] = ()     # as PassThrough.before
    datamaps: tuple[str, ...] = ()   # the datamaps that answer ("db.name"), for the query log
    why_not: tuple[tuple[str, str], ...] = ()    # as PassThrough's (a timeseries-only rewrite)
    bypassed: str = ""
    # a datamap answer Spark computes though the proxy serves answers in-process: why
    # (the serving tier's reason, e.g. "not served locally: window function"), for the
    # query log and the metrics
    not_served: str = ""


@dataclass(frozen=True)
class Local:
    """Answer locally: run `runner` and serve its LocalResult."""
    runner: LocalRunner
    note: str = ""
    settings: Settings = ()


@dataclass(frozen=True)
class Serve:
    """A rewritten query the proxy may answer in-process (proxy/serving): `attempt()`
    returns (LocalResult, how) or (None, why) — then `fallback` is forwarded to Spark.
    Either way the client sees one statement; `how` goes to the statement log."""
    attempt: Callable[[], Awaitable[tuple["LocalResult | None", str]]]
    fallback: Rewrite
    settings: Settings = ()


# a Serve's `how` (the serving tier's answer()) of an answer computed in-process -> its
# line in the operation log
_LOG_LINES = {"local cache=hit": "answer computed in-process by the proxy, from its result cache",
              "local cache=miss": "answer computed in-process by the proxy",
              "local cache=bypassed": "answer computed in-process by the proxy (result cache "
                                      "bypassed)"}


def log_line(how: str) -> str:
    """The operation log's line for a served answer, from answer()'s `how`."""
    return _LOG_LINES.get(how, "answer computed in-process by the proxy")


@dataclass(frozen=True)
class Reject:
    """Fail the statement with this message and SQLSTATE, without contacting upstream."""
    message: str
    sqlstate: str = "42000"


Decision = PassThrough | Rewrite | Local | Reject | Serve


@dataclass(frozen=True)
class Remember:
    """Not a decision: settings the session takes on with this statement, whatever is
    decided (a Reject drops them: the statement never ran)."""
    settings: Settings


class StatementHandler(Protocol):
    def __call__(self, ctx: StatementContext, statement: str) -> Decision | Remember | None: ...


@dataclass
class Router:
    handlers: list[StatementHandler] = field(default_factory=list)
    _pools: dict[str, ThreadPoolExecutor] = field(default_factory=dict, repr=False)

    def decide(self, ctx: StatementContext, statement: str) -> Decision:
        with classify.shared():
            return self._decide(ctx, statement)

    def _decide(self, ctx: StatementContext, statement: str) -> Decision:
        remembered: Settings = ()
        for handler in self.handlers:
            decision = handler(ctx, statement)
            if isinstance(decision, Remember):
                remembered += decision.settings
                ctx = dataclasses.replace(ctx, conf={**ctx.conf, **dict(decision.settings)})
            elif decision is not None:
                if not remembered or isinstance(decision, Reject):
                    return decision
                return dataclasses.replace(decision, settings=remembered + decision.settings)
        return PassThrough(settings=remembered)

    async def decide_async(self, ctx: StatementContext, statement: str) -> Decision:
        """decide(), off the event loop when the statement is long enough to be costly."""
        if len(statement) <= INLINE_BYTES:
            return self.decide(ctx, statement)
        _, lane, workers = next(x for x in _LANES if x[0] is None or len(statement) <= x[0])
        pool = self._pools.get(lane)
        if pool is None:
            pool = self._pools[lane] = ThreadPoolExecutor(
                max_workers=workers, thread_name_prefix=f"decide-{lane}")
        return await asyncio.get_running_loop().run_in_executor(
            pool, self._decide_for_loop, ctx, statement)

    def _decide_for_loop(self, ctx: StatementContext, statement: str) -> Decision:
        token = _FOR_LOOP.set(True)
        try:
            return self.decide(ctx, statement)
        finally:
            _FOR_LOOP.reset(token)

    def close(self) -> None:
        """Stop the workers (a decision still running finishes in its thread; nobody waits
        for it)."""
        for pool in self._pools.values():
            pool.shutdown(wait=False, cancel_futures=True)
        self._pools.clear()
