"""ExecuteStatement -> Decision: the one hook where datamap DDL and rewriting plug in.

The protocol layer (service.py) calls `Router.decide(ctx, statement)` for every
ExecuteStatement and acts on the returned Decision; it knows nothing about datamaps or
SQL. The default router forwards everything unchanged. Later components register
`StatementHandler`s (tried in order; the first that returns a Decision wins).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Protocol, Sequence


@dataclass(frozen=True)
class StatementContext:
    """What a handler may know about the statement's session. No I/O handles."""
    session_id: str                 # client-visible session guid (hex)
    user: str                       # authenticated user (from SASL / NOSASL OpenSession)
    current_db: str                 # best knowledge of the session's current database
    conf: dict[str, str]            # session-level settings the proxy tracks (SET k=v it saw)
    protocol_version: int


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


@dataclass(frozen=True)
class PassThrough:
    """Forward the statement as the client sent it. `after` (optional) is awaited once the
    upstream operation has FINISHED successfully, before the client sees FINISHED
    (used to cut segments and refresh datamaps after a load)."""
    after: Callable[[UpstreamSQL], Awaitable[None]] | None = None


@dataclass(frozen=True)
class Rewrite:
    """Forward `sql` instead of the client's text. Result metadata comes from upstream."""
    sql: str
    note: str = ""                   # for the statement log line, e.g. "mv:agg_sales"
    after: Callable[[UpstreamSQL], Awaitable[None]] | None = None


@dataclass(frozen=True)
class Local:
    """Answer locally: run `runner` and serve its LocalResult."""
    runner: LocalRunner
    note: str = ""


@dataclass(frozen=True)
class Reject:
    """Fail the statement with this message and SQLSTATE, without contacting upstream."""
    message: str
    sqlstate: str = "42000"


Decision = PassThrough | Rewrite | Local | Reject


class StatementHandler(Protocol):
    def __call__(self, ctx: StatementContext, statement: str) -> Decision | None: ...


@dataclass
class Router:
    handlers: list[StatementHandler] = field(default_factory=list)

    def decide(self, ctx: StatementContext, statement: str) -> Decision:
        for handler in self.handlers:
            decision = handler(ctx, statement)
            if decision is not None:
                return decision
        return PassThrough()
