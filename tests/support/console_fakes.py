"""Test data for the console: query-log entries as the real LoggedQuery (proxy/observability/querylog/log.py)
with defaults, and an in-memory advisor (its planning needs sampled statistics; its
answers are proxy/advisor/core.py's Suggestion)."""
from __future__ import annotations

from dataclasses import dataclass, field

from proxy.observability.querylog.log import LoggedQuery


def logged(id: int, at: float, user: str, client: str, statement: str, decision: str,
           datamaps: tuple[str, ...] = (), *, why_not: tuple = (), reason_class: str | None = None,
           duration_s: float = 0.1, rows: int | None = 3, outcome: str = "FINISHED",
           sqlstate: str | None = None, saved_s: float | None = None) -> LoggedQuery:
    return LoggedQuery(id, at, user, client, "s", "0" * 16, "", statement, "default", (),
                       decision, datamaps, why_not, reason_class, duration_s, rows, outcome,
                       sqlstate, saved_s)


@dataclass
class FakeAdvisor:
    items: list = field(default_factory=list)
    fail: Exception | None = None

    def suggest(self):
        if self.fail is not None:
            raise self.fail
        return list(self.items)
