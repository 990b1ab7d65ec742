"""Statements the gateway answers itself, as Router StatementHandlers.

`SET datamap.rewrite.enabled=true|false` (per session; default true) and
`SET datamap.rewrite.enabled` (show). Answered like Spark answers SET: columns key, value.
The handler updates `ctx.conf`, which is the session's live settings map.
"""
from __future__ import annotations

import re

from proxy.router import Decision, Local, LocalResult, Reject, Router, StatementContext
from proxy.session import REWRITE_KEY

_SET_REWRITE = re.compile(
    r"^\s*set\s+datamap\.rewrite\.enabled\s*(?:=\s*(?P<value>.*?))?\s*;?\s*$",
    re.IGNORECASE | re.DOTALL)
SET_COLUMNS = (("key", "string"), ("value", "string"))


def set_rewrite_enabled(ctx: StatementContext, statement: str) -> Decision | None:
    m = _SET_REWRITE.match(statement)
    if m is None:
        return None
    raw = m.group("value")
    if raw is None:
        value = ctx.conf.get(REWRITE_KEY, "true")

        async def show(_upstream) -> LocalResult:
            return LocalResult(columns=SET_COLUMNS, rows=[(REWRITE_KEY, value)])
        return Local(show, note="set:show")
    value = raw.strip().strip("'\"`").strip().lower()
    if value not in ("true", "false"):
        return Reject(f"Invalid value '{raw.strip()}' for {REWRITE_KEY}: expected true or false",
                      "42000")
    conf = ctx.conf

    async def apply(_upstream) -> LocalResult:
        conf[REWRITE_KEY] = value
        return LocalResult(columns=SET_COLUMNS, rows=[(REWRITE_KEY, value)])
    return Local(apply, note="set")


def install(router: Router) -> None:
    """Put the gateway's own handlers first (idempotent)."""
    if set_rewrite_enabled not in router.handlers:
        router.handlers.insert(0, set_rewrite_enabled)
