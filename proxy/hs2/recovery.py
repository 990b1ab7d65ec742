"""Upstream recovery: a client session outlives its upstream session.

An HS2 session dies with its TCP connection, so when the Spark Thrift Server restarts (or
the link to it breaks) every upstream session is gone while the clients still hold theirs.
Here the client session stays: its operations from the old upstream session are marked
lost at once (their status and fetches answer 08S01 naming the failure, never a stale
handle sent to the new session), and its next call that needs Spark opens a new upstream
session as the same user with the same OpenSession configuration, replays the SETs Spark
accepted and the current database, then runs. Reopening is serialised per session and
reuses the session's slot (proxy/upstream/slots.py): the new upstream session replaces the old one.
If Spark is still down the call fails fast (refused connect, or [upstream]
connect_timeout) and the next call tries again.

UpstreamHealth is the process-wide view of the upstream for the logs (one line per state
change) and `datamap-proxy doctor` (a small JSON file in the state directory). While the
upstream is not seen up, `watch_upstream` asks it every PROBE_EVERY_S whether it answers
(a session of the proxy's own, opened and closed), so its recovery is seen by the log,
doctor, the metrics and the console without waiting for a client's statement.
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from proxy.errors import InvalidHandle, UpstreamError, succeeded
from proxy.logsafe import safe
from proxy.hs2.operation import OpKind, OpState
from proxy.thrift.gen.TCLIService import ttypes as T

if TYPE_CHECKING:
    from proxy.hs2.session import Session
    from proxy.upstream.client import UpstreamSession

log = logging.getLogger("proxy.upstream")
LOST_SQLSTATE = "08S01"
HEALTH_FILE = "upstream-health.json"
# How often a healthy upstream's "last success" reaches the file (it changes on every call).
_PERSIST_EVERY_S = 5.0
# How often an upstream not seen up (down, or not asked yet) is probed.
PROBE_EVERY_S = 5.0
_PROBE_USER = "datamap-proxy"


class UpstreamHealth:
    """Last success, last failure and its reason, consecutive failures, reconnects."""

    def __init__(self, addr: str, path: Path | None = None, clock=time.time,
                 listen: str | None = None):
        self.addr = addr
        self.path = path
        self.listen = listen            # the proxy's own HOST:PORT, for doctor beside it
        self._clock = clock
        self.state = "unknown"          # unknown | up | down
        self.last_success: float | None = None
        self.last_failure: float | None = None
        self.last_failure_reason: str | None = None
        self.consecutive_failures = 0
        self.reconnects = 0
        self.down_since: float | None = None
        self.back_since: float | None = None
        self._persisted = 0.0

    def success(self) -> None:
        now = self._clock()
        self.last_success = now
        self.consecutive_failures = 0
        if self.state != "up":
            if self.state == "down":
                log.warning("upstream back after %.0fs: %s answers again",
                            now - (self.down_since or now), self.addr)
                self.back_since = now
            self.state, self.down_since = "up", None
            self._persist(now)
        elif now - self._persisted >= _PERSIST_EVERY_S:
            self._persist(now)

    def failure(self, reason: str, connected_at: float | None = None) -> None:
        """`connected_at`: when the failed connection was made. One made before the upstream
        came back is a casualty of the outage already reported (an idle session finding out
        late), not news about the upstream now."""
        if connected_at is not None and self.back_since is not None and connected_at < self.back_since:
            return
        now = self._clock()
        self.last_failure, self.last_failure_reason = now, reason
        self.consecutive_failures += 1
        if self.state != "down":
            log.warning("upstream lost: %s", safe(reason, 300))
            self.state, self.down_since = "down", now
        self._persist(now)

    def reconnected(self) -> None:
        self.reconnects += 1
        self._persist(self._clock())

    def snapshot(self) -> dict[str, Any]:
        return {"upstream": self.addr, "state": self.state, "pid": os.getpid(),
                "listen": self.listen,
                "last_success": self.last_success, "last_failure": self.last_failure,
                "last_failure_reason": self.last_failure_reason,
                "consecutive_failures": self.consecutive_failures,
                "reconnects": self.reconnects, "down_since": self.down_since,
                "written": self._clock()}

    def _persist(self, now: float) -> None:
        self._persisted = now
        if self.path is None:
            return
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        try:
            tmp.write_text(json.dumps(self.snapshot()))
            os.replace(tmp, self.path)
        except OSError as e:       # health reporting must never fail a call
            log.debug("cannot write %s: %s", self.path, e)


async def watch_upstream(health: UpstreamHealth, factory: Callable[[], "UpstreamSession"],
                         every: float = PROBE_EVERY_S) -> None:
    """While `health` is not UP, open and close a session on the upstream every `every`
    seconds (the first at once). A reply, even a refused login, is the upstream answering.
    Once it is DOWN, a failed probe is recorded as a failure too; before the upstream was
    ever seen (at start) a failed probe is no news: the first client call reports it."""
    from proxy.upstream.client import UpstreamAuthError
    while True:
        if health.state != "up":
            up = factory()
            if health.state == "down":
                up.conn.health = health
            try:
                await up.open(_PROBE_USER, "", T.TProtocolVersion.HIVE_CLI_SERVICE_PROTOCOL_V10,
                              None)
                health.success()
            except UpstreamAuthError:
                health.success()       # it answered: the login is the probe's own business
            except UpstreamError as e:
                log.debug("upstream probe failed: %s", e)
            finally:
                await asyncio.shield(up.close())
        await asyncio.sleep(every)


def read_health(state_dir: Path) -> dict[str, Any] | None:
    """What a serving proxy last wrote about its upstream, or None."""
    try:
        return json.loads((state_dir / HEALTH_FILE).read_text())
    except (OSError, ValueError):
        return None


@dataclass(eq=False)
class Reopen:
    """What reopening a session upstream needs beyond the Session itself."""
    password: str = field(repr=False)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)


def _lost_status(message: str) -> T.TStatus:
    return T.TStatus(statusCode=T.TStatusCode.ERROR_STATUS, sqlState=LOST_SQLSTATE, errorCode=0,
                     errorMessage=message)


def lose_operations(session: Session, reason: str) -> None:
    """The session's upstream session is gone: so are the operations it ran. Each keeps an
    08S01 status naming the failure for its status and fetch calls."""
    for op in list(session.operations.values()):
        if op.kind is OpKind.LOCAL or op.upstream_handle is None:
            continue
        sql = safe(op.statement or op.decision, 200)
        if op.state.running:
            message = (f"upstream Spark Thrift Server connection lost while running: {sql} "
                       f"({reason}); the statement did not complete, the session is still usable")
        else:
            message = (f"upstream Spark Thrift Server connection lost: the result of {sql} is "
                       f"gone ({reason}); run it again, the session is still usable")
        op.lost = _lost_status(message)
        if op.kind is OpKind.UPSTREAM:
            # mirrored state: a dead statement must not keep the session from idling out
            # or hold up shutdown's drain; it ended now (its duration is not the time until
            # its client closes it)
            if op.state.running:
                op.mirror(OpState.ERROR)
            op.error = op.lost


async def execute_statement(up: UpstreamSession, req: T.TExecuteStatementReq, statement: str,
                            seqid: int = 0) -> T.TExecuteStatementResp:
    """ExecuteStatement on `up`; if the connection breaks meanwhile (a synchronous statement
    waits in this call), the error names the statement and the upstream failure."""
    try:
        return await up.conn.call("ExecuteStatement", req, seqid)
    except UpstreamError:
        if not up.conn.broken:
            raise
        raise UpstreamError(f"upstream Spark Thrift Server connection lost while running: "
                            f"{safe(statement, 200)} ({up.conn.broken}); the statement did not "
                            f"complete, the session is still usable") from None


async def upstream_for(service: Any, session: Session) -> UpstreamSession:
    """The session's upstream session, opened anew (serialised per session) if the old one
    is gone. Raises UpstreamError (08S01) naming why when it cannot be."""
    up = session.upstream
    if up.conn.probe() or session.reopen is None:
        return up
    async with session.reopen.lock:
        if session.upstream is not up and session.upstream.conn.probe():
            return session.upstream             # a concurrent call reopened it
        return await _reopen(service, session)


async def _reopen(service: Any, session: Session) -> UpstreamSession:
    t0 = time.monotonic()
    new = service._factory()
    new.conn.health = service.health
    try:
        resp = await new.open(session.user, session.reopen.password, session.client_protocol,
                              session.configuration, real_user=session.real_user)
    except UpstreamError as e:
        log.debug("reopen of session %s failed: %s", session.id, e)
        raise UpstreamError(f"upstream Spark Thrift Server unavailable, the session's upstream "
                            f"session cannot be reopened: {e}. The session is kept; retry once "
                            f"Spark is back") from None
    if not succeeded(resp.status) or new.handle is None:
        new.conn.close()
        why = resp.status.errorMessage if resp.status is not None else "no status"
        raise UpstreamError(f"upstream Spark Thrift Server refused to reopen the session's "
                            f"upstream session: {why}")
    try:
        replayed = await _replay(session, new)
        if service.sessions.find(session.handle) is not session:
            raise InvalidHandle("SessionHandle", f"{session.id} was closed while reopening")
    except BaseException:
        await new.close()
        raise
    old, session.upstream = session.upstream, new
    old.conn.on_break = None
    old.conn.close()
    new.conn.on_break = lambda reason: service._upstream_lost(session, reason)
    service.health.reconnected()
    log.info("session reopened upstream id=%s user=%s replayed=%d db=%s %.0fms", session.id,
             safe(session.user, 64), replayed, safe(session.current_db, 100),
             (time.monotonic() - t0) * 1000)
    return new


async def _replay(session: Session, new: UpstreamSession) -> int:
    # (what to name in messages, the statement): a SET's value may be a secret
    statements = [(f"SET {key}", sql) for key, sql in session.spark_sets.items()]
    opened_in = (session.configuration.get("use:database") or "default").strip("`").lower()
    if session.current_db and session.current_db != opened_in:
        use = "USE `" + session.current_db.replace("`", "``") + "`"
        statements.append((use, use))
    for label, sql in statements:
        try:
            await new.run_sql(sql)
        except UpstreamError as e:
            log.warning("session %s user=%s cannot be restored upstream: replaying %s failed: %s",
                        session.id, safe(session.user, 64), safe(label, 200), safe(str(e), 300))
            raise UpstreamError(
                f"upstream Spark Thrift Server restarted and the session's state cannot be "
                f"restored: replaying `{safe(label, 200)}` failed: {e}. Reconnect to start a "
                f"fresh session") from None
    return len(statements)
