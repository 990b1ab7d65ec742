"""The logged workload as the advisor reads it: one `Shape` per distinct query shape.

Query-log entries (proxy/observability/querylog/log.py's LoggedQuery, or any object with its
fields) are folded per shape hash, so 100,000 statements cost what their few hundred shapes
cost: the count, the seconds they took, how many were answered from a datamap, and one
representative statement (with its literals) that the rewriter is asked about.
An entry without a shape hash is shaped here as the query log shapes statements
(rewriter/advise/shape.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from rewriter.advise.shape import shape_of

# answered from a datamap (the query log's decisions, proxy/observability/observe.py)
ANSWERED = frozenset({"rewritten", "served"})
# a datamap answer counts as a hit when it came back, as the query log's datamap_usage and
# datamap_totals (the console's and the metrics' hits and time saved) count them
HIT_OUTCOMES = frozenset({"FINISHED", "CLOSED"})
# reason classes (the query log's) a new or extended datamap may fix; the others
# (disabled, stale, unsupported, bypassed, other) are not the definition's fault
FIXABLE = frozenset({"no_datamap", "columns", "filters", "grouping", "aggregates", "joins"})
NEAR_MISS = frozenset({"columns", "grouping", "aggregates", "filters"})


@dataclass
class Shape:
    shape_hash: str
    statement: str               # one representative, literals kept
    current_db: str
    count: int = 0
    seconds: float = 0.0         # logged time of every statement of the shape
    answered: int = 0            # of them answered from a datamap
    answered_seconds: float = 0.0
    base_count: int = 0          # of them forwarded to the base tables (not bypassed)
    base_seconds: float = 0.0
    fixable: bool = False        # some base-table run had a reason a datamap may fix
    datamaps: dict[str, int] = field(default_factory=dict)     # datamap -> hits
    saved: dict[str, float] = field(default_factory=dict)      # datamap -> logged saved_s
    measured: dict[str, int] = field(default_factory=dict)     # datamap -> hits with saved_s
    missed_by: dict[str, str] = field(default_factory=dict)    # datamap -> why not (last)
    text: str = ""               # the shape (literals -> ?): what is shown to users

    @property
    def base_mean_s(self) -> float:
        return self.base_seconds / self.base_count if self.base_count else 0.0

    @property
    def answer_mean_s(self) -> float | None:
        return self.answered_seconds / self.answered if self.answered else None

    def saved_by(self, datamap: str) -> float | None:
        """Seconds the datamap's hits of this shape saved, an estimate: the query log's
        saved_s (the shape's base-table time scaled by rows, minus each answer's), hits
        not measured yet taken at the measured ones' mean; without any, the shape's mean
        time on the base tables in the window minus its mean answer time; None when
        neither is known (never a 0 that would make a datamap look worthless)."""
        hits = self.datamaps.get(datamap, 0)
        if not hits:
            return 0.0
        measured = self.measured.get(datamap, 0)
        if measured:
            return self.saved[datamap] * hits / measured
        if self.base_count and self.answer_mean_s is not None:
            return hits * max(0.0, self.base_mean_s - self.answer_mean_s)
        return None


def fold(entries: Iterable) -> list[Shape]:
    """Entries -> shapes (queries only: decisions forwarded, rewritten, served, bypassed)."""
    shapes: dict[tuple[str, str], Shape] = {}
    for e in entries:
        decision = e.decision
        if decision not in ("forwarded", "rewritten", "served", "bypassed"):
            continue
        h = getattr(e, "shape_hash", None)
        shaped = None if h else shape_of(e.statement, e.current_db)
        key = (h or shaped.hash, e.current_db)
        sh = shapes.get(key)
        if sh is None:
            text = getattr(e, "shape", None) or (
                shaped or shape_of(e.statement, e.current_db)).text
            sh = shapes[key] = Shape(key[0], e.statement, e.current_db, text=text)
        d = float(e.duration_s or 0.0)
        sh.count += 1
        sh.seconds += d
        # "rewritten" with no datamap (timeseries() translated, index-pruned files) read the
        # base tables all the same
        if decision in ANSWERED and e.datamaps:
            if getattr(e, "outcome", "FINISHED") not in HIT_OUTCOMES:
                continue
            sh.answered += 1
            sh.answered_seconds += d
            for dm in e.datamaps:
                sh.datamaps[dm] = sh.datamaps.get(dm, 0) + 1
                if getattr(e, "saved_s", None) is not None:
                    sh.saved[dm] = sh.saved.get(dm, 0.0) + e.saved_s
                    sh.measured[dm] = sh.measured.get(dm, 0) + 1
            continue
        if decision == "bypassed":        # rewriting was off: no datamap would have helped
            continue
        sh.base_count += 1
        sh.base_seconds += d
        reason = getattr(e, "reason_class", None)
        if reason is None or reason in FIXABLE:
            sh.fixable = True
        for dm, why in e.why_not or ():
            sh.missed_by[dm] = why
    return list(shapes.values())
