"""In-memory stand-ins for the query log and the advisor readers (proxy/querylog.py,
proxy/advisor.py: the shared API), for page tests of pure rendering logic."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Logged:
    id: int
    at: float
    user: str
    client: str
    statement: str
    decision: str
    datamaps: tuple[str, ...] = ()
    why_not: tuple[tuple[str, str], ...] = ()
    reason_class: str | None = None
    duration_s: float = 0.1
    rows: int | None = 3
    outcome: str = "FINISHED"
    sqlstate: str | None = None
    session_id: str = "s"
    shape_hash: str = "0" * 16
    shape: str = ""
    current_db: str = "default"
    tables: tuple[str, ...] = ()
    saved_s: float | None = None


@dataclass
class FakeQueryLog:
    entries: list[Logged] = field(default_factory=list)
    asked: list[dict] = field(default_factory=list)

    def recent(self, limit=100, *, user=None, decision=None, datamap=None):
        self.asked.append({"limit": limit, "user": user, "decision": decision,
                           "datamap": datamap})
        out = [q for q in sorted(self.entries, key=lambda q: -q.at)
               if user in (None, q.user) and decision in (None, q.decision)
               and (datamap is None or datamap in q.datamaps)]
        return out[:limit]

    def datamap_usage(self, since, bucket_s):
        buckets: dict[tuple[float, str], list] = {}
        for q in self.entries:
            if q.at < since:
                continue
            for dm in q.datamaps:
                b = buckets.setdefault((since + (q.at - since) // bucket_s * bucket_s, dm), [0, 0.0])
                b[0] += 1
                b[1] += q.saved_s or 0.0
        return [(b, dm, h, s) for (b, dm), (h, s) in sorted(buckets.items())]

    def datamap_totals(self):
        out: dict[str, tuple[int, float]] = {}
        for q in self.entries:
            for dm in q.datamaps:
                h, s = out.get(dm, (0, 0.0))
                out[dm] = (h + 1, s + (q.saved_s or 0.0))
        return out


@dataclass(frozen=True)
class Suggestion:
    kind: str
    datamap: str
    sql: str
    queries: int
    base_seconds: float
    est_saving_s: float
    est_rows: int | None
    est_maintenance_s: float | None
    reason: str


@dataclass
class FakeAdvisor:
    items: list = field(default_factory=list)
    fail: Exception | None = None

    def suggest(self):
        if self.fail is not None:
            raise self.fail
        return list(self.items)
