"""The console's safe actions: REBUILD, COMPACT 'MINOR' | 'MAJOR' and the query rewrite
switch of one datamap. Each is the SQL statement a client would send, parsed by the same
parser (proxy/datamaps/ddl/parser.py) and run by the same DatamapService method, so the console
can do nothing SQL cannot. Each is written to the audit log ([server] audit_log) with the
console user, when it starts and when it ends.

REBUILD and COMPACT take minutes on Spark: they run in a thread of their own and the page
answers "started" at once; the datamap page shows the action's state from this module's
ring of recent actions, and the datamap's status and history as the job moves on.
"""
from __future__ import annotations

import collections
import functools
import itertools
import logging
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from proxy.datamaps.ddl import parser as ddl
from proxy.errors import to_status
from proxy.logsafe import safe

log = logging.getLogger("proxy.console")

# action -> (statement template, runs long: in a thread of its own)
ACTIONS: dict[str, tuple[str, bool]] = {
    "rebuild": ("REBUILD DATAMAP {}", True),
    "compact_minor": ("ALTER DATAMAP {} COMPACT 'MINOR'", True),
    "compact_major": ("ALTER DATAMAP {} COMPACT 'MAJOR'", True),
    "disable_rewrite": ("ALTER DATAMAP {} DISABLE QUERY REWRITE", False),
    "enable_rewrite": ("ALTER DATAMAP {} ENABLE QUERY REWRITE", False),
}
_PART = re.compile(r"[a-z0-9_]+\Z")
KEEP = 100                     # recent actions shown on the pages
JOIN_GRACE_S = 5.0             # at shutdown; a Spark job still running is left to the engine's stop


def statement(action: str, qualified: str) -> str | None:
    """The SQL of `action` on datamap "db.name"; None when either is not one the console
    offers (names outside [a-z0-9_] never reach SQL text)."""
    db, dot, name = qualified.partition(".")
    if action not in ACTIONS or not dot or not _PART.match(db) or not _PART.match(name):
        return None
    return ACTIONS[action][0].format(qualified)


@dataclass
class ActionRecord:
    id: int
    at: float
    user: str
    datamap: str
    action: str
    sql: str
    state: str = "running"          # running | done | failed
    sqlstate: str | None = None
    message: str = ""
    ended: float | None = None


@dataclass
class Actions:
    """Runs actions on `service` (a DatamapService), recording them in `audit` (the
    proxy's AuditLog), and keeps the last KEEP of them for the pages."""
    service: object
    audit: object
    _ids: itertools.count = field(default_factory=lambda: itertools.count(1))
    _recent: collections.deque = field(default_factory=lambda: collections.deque(maxlen=KEEP))
    _threads: set = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def recent(self, datamap: str | None = None) -> list[ActionRecord]:
        with self._lock:
            return [r for r in reversed(self._recent) if datamap in (None, r.datamap)]

    def get(self, action_id: int) -> ActionRecord | None:
        with self._lock:
            return next((r for r in self._recent if r.id == action_id), None)

    def begin(self, user: str, client: str, datamap: str, action: str) -> ActionRecord:
        sql = statement(action, datamap)
        if sql is None:
            raise ValueError(f"no action {action!r} on {datamap!r}")
        rec = ActionRecord(next(self._ids), time.time(), user, datamap, action, sql)
        with self._lock:
            self._recent.append(rec)
        self.audit.write("console_action", user=user, client=client, action=action,
                         datamap=datamap, statement=sql, outcome="started")
        return rec

    def long(self, rec: ActionRecord) -> bool:
        return ACTIONS[rec.action][1]

    def start(self, rec: ActionRecord, client: str) -> None:
        """Run a long action in a thread of its own (owned: joined by close())."""
        t = threading.Thread(target=self.run, args=(rec, client), daemon=True,
                             name=f"console-{rec.action}-{rec.id}")
        with self._lock:
            self._threads.add(t)
        t.start()

    def run(self, rec: ActionRecord, client: str) -> ActionRecord:
        """Blocking: the statement through the datamap service, as the SQL path runs it."""
        try:
            stmt = ddl.parse(rec.sql)
            db = rec.datamap.partition(".")[0]
            self._method(stmt, rec.user)(stmt, db)
            rec.state = "done"
        except Exception as e:  # noqa: BLE001 - every failure is shown with its SQLSTATE
            status = to_status(e)
            rec.state, rec.sqlstate, rec.message = "failed", status.sqlState, status.errorMessage
            log.warning("console action %s by %s failed: %s %s", rec.sql, safe(rec.user),
                        rec.sqlstate, safe(rec.message, 500))
        finally:
            rec.ended = time.time()
            with self._lock:
                self._threads.discard(threading.current_thread())
        self.audit.write("console_action", user=rec.user, client=client, action=rec.action,
                         datamap=rec.datamap, statement=rec.sql,
                         duration_ms=round((rec.ended - rec.at) * 1000, 1),
                         outcome="ok" if rec.state == "done" else "error",
                         sqlstate=rec.sqlstate, reason=rec.message or None)
        return rec

    def _method(self, stmt, user: str) -> Callable:
        svc = self.service
        return {ddl.RebuildDatamap: svc.rebuild, ddl.CompactDatamap: svc.compact,
                ddl.AlterRewrite: functools.partial(svc.set_rewrite, by=user)}[type(stmt)]

    def close(self) -> list[str]:
        """Join the running actions for a short while; the names of those still running."""
        deadline = time.monotonic() + JOIN_GRACE_S
        with self._lock:
            threads = list(self._threads)
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        left = [t.name for t in threads if t.is_alive()]
        if left:
            log.warning("console actions still running at shutdown: %s", ", ".join(left))
        return left
