"""The audit trail: one JSON line per session open, session close and statement.

`AuditLog` is an Observer (proxy/observability/observe.py) of the protocol layer's session
and statement events; proxy/app.py registers it. The web console writes its actions with
`write` (proxy/console/actions.py).

Fields (absent when they do not apply):
  time         UTC, ISO 8601 with milliseconds
  event        session_open | session_refused | session_close | statement
  user         whom the session runs as; real_user: the authenticated user when it
               impersonates `user` (hive.server2.proxy.user, proxy/hs2/identity.py)
  client       the client's address (host:port)
  configuration  session_open: the OpenSession configuration, secret values masked
  session      the proxy's session id; operation: the statement's operation id
  decision     forwarded | rewritten (datamaps: the datamaps used) | served in-process |
               local | refused
  duration_ms  from the call (session: from open) to the end
  outcome      ok | error (with sqlstate) | canceled | closed (closed by the client before
               it saw an end); reason: why a session was refused or closed
  statement    the SQL as the client sent it, secrets masked (logsafe.redact), cut to
               STATEMENT_CHARS

`[server] audit_log` = a file: appended, one line per event, flushed per line (a crash
loses nothing already written); created 0600, since statements name the data people
looked at; opened again on SIGHUP (log rotation). Unset: the lines go to the `proxy.audit`
logger at INFO, so they follow the server log's handlers (and can be routed apart by
logging configuration).
"""
from __future__ import annotations

import json
import logging
import os
import threading
from datetime import datetime, timezone

from proxy.logsafe import redact, redact_conf
from proxy.observability.observe import Observer, SessionDetail, StatementEvent

log = logging.getLogger("proxy.audit")
STATEMENT_CHARS = 4000
# The statement event's outcome (its operation's last state as the proxy knows it) ->
# outcome. A pass-through statement's state is the one its client last polled, so one
# closed unpolled is "closed".
_OUTCOMES = {"FINISHED": "ok", "ERROR": "error", "TIMEDOUT": "error", "CANCELED": "canceled",
             "REFUSED": "error"}    # refused before it ran (a full queue, gated.py)


def decision_of(label: str) -> tuple[str, list[str]]:
    """The statement log's decision label -> (audit decision, datamaps used)."""
    head, _, note = label.partition(":")
    if head == "reject":
        return "refused", []
    if head == "local":
        return "local", []
    datamaps = [w[3:] for part in note.split() for w in part.split(",") if w.startswith("mv:")]
    if head == "rewrite":
        return ("served in-process" if "served=local" in note else "rewritten"), datamaps
    return "forwarded", []


class AuditLogError(OSError):
    pass


class AuditLog(Observer):
    def __init__(self, path: str | None = None):
        self.path = path
        self._lock = threading.Lock()
        self._file = self._open() if path else None

    def _open(self):
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        except OSError as e:
            raise AuditLogError(f"cannot open [server] audit_log {self.path}: "
                                f"{e.strerror}") from None
        return os.fdopen(fd, "a", buffering=1, encoding="utf-8")

    def reopen(self) -> None:
        """Open the path again (SIGHUP, after logrotate moved the file away): otherwise the
        lines would go on into the moved file, and be lost with it. A path that cannot be
        opened keeps the old file."""
        if not self.path:
            return
        try:
            new = self._open()
        except AuditLogError as e:
            log.error("%s; still writing to the file opened before", e)
            return
        with self._lock:
            old, self._file = self._file, new
        if old is not None:
            old.close()

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def write(self, event: str, **fields) -> None:
        record = {"time": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
                  "event": event}
        record.update((k, v) for k, v in fields.items() if v is not None and v != [])
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
        if self._file is None:
            log.info("%s", line)
            return
        try:
            with self._lock:
                if self._file is not None:
                    self._file.write(line + "\n")
        except OSError as e:      # a full disk must not fail the client's statement
            log.error("cannot write the audit log %s: %s; line: %s", self.path, e, line)

    # ---------------------------------------------------------------- the events (Observer)

    def session(self, event: str, user: str, client: str = "",
                detail: SessionDetail | None = None) -> None:
        d = detail or SessionDetail()
        if event == "refused":
            self.write("session_refused", user=user, real_user=d.real_user, client=d.peer,
                       outcome="error", sqlstate=d.sqlstate, reason=redact(d.reason or ""))
            return
        conf = redact_conf(d.configuration) if event == "open" else None
        self.write(f"session_{event}", user=user, real_user=d.real_user, client=d.peer,
                   session=d.session_id, reason=d.reason, configuration=conf or None,
                   duration_ms=None if d.duration_s is None else round(d.duration_s * 1000, 1),
                   outcome="ok")

    def statement(self, ev: StatementEvent) -> None:
        decision, datamaps = decision_of(ev.note)
        outcome = _OUTCOMES.get(ev.outcome, "closed")
        text = ev.statement
        cut = len(text) - STATEMENT_CHARS
        self.write("statement", user=ev.user, real_user=ev.real_user, client=ev.peer,
                   session=ev.session_id, operation=ev.operation,
                   decision=decision, datamaps=datamaps,
                   duration_ms=round(ev.duration_s * 1000, 1), outcome=outcome,
                   sqlstate=(ev.sqlstate or "HY000") if outcome == "error" else None,
                   statement=redact(text[:STATEMENT_CHARS]) + (f"…(+{cut} chars)" if cut > 0 else ""))
