"""Statements the gateway answers itself, as Router StatementHandlers.

`SET datamap.rewrite.enabled=true|false` (per session; default true) and
`SET datamap.rewrite.enabled` (show); the same for `datamap.serving.enabled` (answer hits
in-process, proxy/serving), `datamap.cache.enabled` (their result cache) and
`datamap.prune.enabled` (index datamaps skip files, proxy/datamaps/indexes/pruning.py), and
`SET datamap.max_staleness = 5m` (the freshness contract, proxy/staleness.py: kept and
shown in seconds; the session starts with [datamaps] max_staleness or its JDBC URL's
value), and `SET datamap.rewrite.approximate=true|false` (default false: distinct counts
may be estimated from a datamap's HLL sketches, rewriter/distinct.py). Answered like Spark
answers SET: columns key, value; never forwarded to Spark.
The new value reaches the session as the Local decision's `settings`.

`watch_semantic_settings` passes every SET through unchanged, but remembers when a
session changes a setting that changes query *results* (time zone, ANSI mode, decimal
precision rules, case sensitivity, legacy behaviours): datamaps were built under the
engine's settings, so from then on that session is not answered from datamaps
(`BLOCKED_KEY` in the session's conf holds the reason; the datamap handlers honour it).

Both read the statement through proxy/routing/classify.py, which parses the SET once.
"""
from __future__ import annotations

from proxy.routing.classify import APPROXIMATE_KEY, Kind, classify
from proxy.routing.router import (
    Decision, Local, LocalResult, Reject, Remember, Router, StatementContext,
)
from proxy.routing.session_keys import BLOCKED_KEY, MAX_STALENESS_KEY, REWRITE_KEY, semantic_setting

SET_COLUMNS = (("key", "string"), ("value", "string"))
# Shown when a session has no value (sessions opened by the service always have one).
_UNSET = {MAX_STALENESS_KEY: "0", APPROXIMATE_KEY: "false"}


def set_rewrite_enabled(ctx: StatementContext, statement: str) -> Decision | None:
    stmt = classify(statement)
    if stmt.kind is not Kind.SET_REWRITE:
        return None
    if stmt.error is not None:
        return Reject(stmt.error, "42000")
    key = stmt.key or REWRITE_KEY
    value = stmt.value if stmt.value is not None else ctx.conf.get(key, _UNSET.get(key, "true"))

    async def answer(_upstream) -> LocalResult:
        return LocalResult(columns=SET_COLUMNS, rows=[(key, value)])
    if stmt.value is None:
        return Local(answer, note="set:show")
    return Local(answer, note="set", settings=((key, value),))


def watch_semantic_settings(ctx: StatementContext, statement: str) -> Remember | None:
    """Never decides (the SET goes to Spark as sent); marks the session when it changes a
    setting that datamap answers would not follow."""
    stmt = classify(statement)
    if stmt.kind is not Kind.SET or stmt.key is None or not semantic_setting(stmt.key):
        return None
    if BLOCKED_KEY in ctx.conf:
        return None
    return Remember(((BLOCKED_KEY,
                      f"the session changed {stmt.key}, which datamaps were not built with"),))


# the gateway's own handlers, first in every Router (proxy/app.py builds serve's with them)
HANDLERS = (set_rewrite_enabled, watch_semantic_settings)


def install(router: Router) -> None:
    """Put the gateway's own handlers first (idempotent: a Router built with HANDLERS)."""
    for position, handler in enumerate(HANDLERS):
        if handler not in router.handlers:
            router.handlers.insert(position, handler)
