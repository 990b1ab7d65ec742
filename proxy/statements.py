"""Statements the gateway answers itself, as Router StatementHandlers.

`SET datamap.rewrite.enabled=true|false` (per session; default true) and
`SET datamap.rewrite.enabled` (show). Answered like Spark answers SET: columns key, value.
The handler updates `ctx.conf`, which is the session's live settings map.

`watch_semantic_settings` passes every SET through unchanged, but remembers when a
session changes a setting that changes query *results* (time zone, ANSI mode, decimal
precision rules, case sensitivity, legacy behaviours): datamaps were built under the
engine's settings, so from then on that session is not answered from datamaps
(`BLOCKED_KEY` in ctx.conf holds the reason; the datamap handlers honour it).
"""
from __future__ import annotations

import re

from proxy.router import Decision, Local, LocalResult, Reject, Router, StatementContext
from proxy.session import BLOCKED_KEY, REWRITE_KEY, semantic_setting

# Matched in full against bare(statement): see bare().
_SET_REWRITE = re.compile(r"\s*set\s+datamap\.rewrite\.enabled\s*(?:=\s*(?P<value>.*))?",
                          re.IGNORECASE | re.DOTALL)
SET_COLUMNS = (("key", "string"), ("value", "string"))


def bare(statement: str) -> str:
    r"""The statement without trailing blanks and one trailing ';'. Patterns match this in
    full instead of ending in `\s*;?\s*$`, which backtracks quadratically (or worse, next
    to another `\s*`) over a long run of blanks: seconds of event loop for a few KB."""
    s = statement.rstrip()
    return s[:-1].rstrip() if s.endswith(";") else s


def set_rewrite_enabled(ctx: StatementContext, statement: str) -> Decision | None:
    m = _SET_REWRITE.fullmatch(bare(statement))
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


_SET_ANY = re.compile(r"^\s*set\s+(?P<key>[\w.]+)\s*=", re.IGNORECASE)
_SET_TIME_ZONE = re.compile(r"^\s*set\s+time\s+zone\b", re.IGNORECASE)


def watch_semantic_settings(ctx: StatementContext, statement: str) -> Decision | None:
    """Never decides (the SET goes to Spark as sent); marks the session when it changes a
    setting that datamap answers would not follow."""
    if _SET_TIME_ZONE.match(statement):
        key = "spark.sql.session.timeZone"
    else:
        m = _SET_ANY.match(statement)
        key = m.group("key") if m and semantic_setting(m.group("key")) else None
    if key and BLOCKED_KEY not in ctx.conf:
        ctx.conf[BLOCKED_KEY] = f"the session changed {key}, which datamaps were not built with"
    return None


def install(router: Router) -> None:
    """Put the gateway's own handlers first (idempotent)."""
    for position, handler in enumerate((set_rewrite_enabled, watch_semantic_settings)):
        if handler not in router.handlers:
            router.handlers.insert(position, handler)
