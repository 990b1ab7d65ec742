"""The advisor's answers as result sets (SHOW DATAMAP SUGGESTIONS, EXPLAIN WHATIF), and
`RecentStatements`, the in-memory workload the advisor reads when no query log is wired.

Columns and plan lines are docs/advisor.md's."""
from __future__ import annotations

import collections
import threading
from dataclasses import dataclass

from proxy.datamaps import ddl
from proxy.datamaps.records import display_name
from proxy.logsafe import redact, safe
from proxy.observe import Observer, StatementEvent
from proxy.router import LocalResult

SUGGESTION_COLUMNS = (("Kind", "string"), ("DataMap", "string"), ("Statement", "string"),
                      ("Queries", "bigint"), ("Base Seconds", "double"),
                      ("Estimated Saving Seconds", "double"), ("Estimated Rows", "bigint"),
                      ("Reason", "string"))
PLAN_COLUMNS = (("plan", "string"),)


def suggestions_result(advisor, _stmt: ddl.ShowSuggestions, current_db: str) -> LocalResult:
    rows = [(s.kind, display_name(s.datamap, current_db), s.sql, s.queries,
             round(s.base_seconds, 3), s.est_saving_s, s.est_rows, s.reason)
            for s in advisor.suggest()]
    return LocalResult(SUGGESTION_COLUMNS, rows)


def whatif_result(advisor, stmt: ddl.ExplainWhatIf, current_db: str) -> LocalResult:
    w = advisor.what_if_statement(stmt.create, current_db)
    window = advisor.settings.window
    lines = [f"WhatIf DataMap: {display_name(w.datamap, current_db)}",
             f"Queries examined: {w.queries} (query log, last {window})",
             f"Hits: {w.hits} (hit rate {100 * w.hit_rate:.1f}%)",
             f"Gained: {w.gained} (read the base tables when logged)",
             f"Estimated saving: {w.est_saving_s:.3f} s",
             "Estimated rows: " + ("unknown" if w.est_rows is None else str(w.est_rows)),
             "Estimated maintenance: " + (
                 "unknown (no build or refresh history in the catalog)"
                 if w.est_maintenance_s is None else f"{w.est_maintenance_s:.3f} s per build")]
    lines += [f"Example: {n} x {safe(shape, 300)}" for shape, n in w.examples]
    return LocalResult(PLAN_COLUMNS, [("\n".join(lines),)])


@dataclass(frozen=True)
class Recorded:
    """One statement as the advisor reads it (the fields of querylog's LoggedQuery it uses)."""
    at: float
    statement: str
    current_db: str
    decision: str
    datamaps: tuple[str, ...]
    why_not: tuple[tuple[str, str], ...]
    duration_s: float
    shape_hash: str | None = None
    reason_class: str | None = None
    saved_s: float | None = None


class RecentStatements(Observer):
    """The last `max_entries` statements, in memory: on the event loop only an append to a
    bounded deque; redaction and shapes happen when the advisor reads (its thread)."""

    def __init__(self, max_entries: int = 100_000, statement_bytes: int = 4096):
        self._events: collections.deque[StatementEvent] = collections.deque(maxlen=max_entries)
        self._statement_bytes = statement_bytes
        self._lock = threading.Lock()

    def statement(self, ev: StatementEvent) -> None:
        self._events.append(ev)

    def entries(self, since: float, until: float | None = None):
        with self._lock:
            events = list(self._events)
        for ev in events:
            if ev.at < since or (until is not None and ev.at >= until):
                continue
            yield Recorded(ev.at, redact(ev.statement[:self._statement_bytes]), ev.current_db,
                           ev.decision, ev.datamaps, ev.why_not, ev.duration_s)
