"""A datamap answer, checked by the freshness guard (proxy/datamaps/freshness/guard.py) before it
is used: kept, compensated with the base tables' new files, or given up for the base
tables. Shared by the SELECT path and EXPLAIN (proxy/datamaps/handler.py), so EXPLAIN
says what a query would really get. Also the operation-log lines of a datamap answer, and
REFRESH TABLE before statements on tables whose files changed since the session listed
them (with_refresh).
"""
from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass, field
from typing import Mapping

from pipeline import plan_delta
from pipeline.files import quote_table
from proxy.datamaps.freshness.guard import CHANGED, FRESH, NEW, UNVERIFIED, Verdict
from proxy.routing.router import Decision, PassThrough, Serve
from proxy.routing.session_keys import approximate_on, staleness_budget
from rewriter.api import RewriteResult

log = logging.getLogger("proxy.datamaps")

@dataclass(frozen=True)
class Checked:
    # the rewrite to use (the compensated one after NEW); None: the base tables answer
    result: RewriteResult | None
    log: tuple[str, ...] = ()           # appended to the operation-log line of each datamap
    explain: tuple[str, ...] = ()       # EXPLAIN lines
    note: str = ""                      # statement-log note
    verdicts: Mapping[str, Verdict] = field(default_factory=dict)

    @property
    def compensated(self) -> bool:
        return any(v.kind == NEW for v in self.verdicts.values())


def stale_reasons(checked: Checked) -> tuple[tuple[str, str], ...]:
    """The datamaps the freshness guard gave up for the base tables, with why (for the
    query log; each reason starts with "stale")."""
    out = []
    for name, v in checked.verdicts.items():
        if v.kind == CHANGED:
            out.append((name, f"stale: base table files changed ({v.reason})"))
        elif v.kind == NEW:
            out.append((name, "stale: new base table files could not be compensated"))
    return tuple(out)


def refresh_statements(tables) -> tuple[str, ...]:
    return tuple("REFRESH TABLE " + quote_table(t)
                 for t in dict.fromkeys(tables))


def datamaps_below(provider, covered, index=None) -> dict[str, str]:
    """The datamap tables `covered` reads -> their datamaps ("db.name"), among those
    `index` (None: the current index) offers."""
    lower = {t: t.removesuffix("_table") for t in covered.files if t.endswith("_table")}
    return {t: n for t, n in lower.items() if provider.covered(n, index)}


def stacked_check(guard, provider, name: str, covered, allowed: float, compensable,
                  below: tuple[str, ...] = (), since: float | None = None,
                  index=None) -> Verdict:
    """guard.check, for a datamap stacked on others (proxy/datamaps/upkeep/stacking.py) too: the
    lower datamap's table is not a directory the guard can list, and the stacked datamap
    is fresh only while each datamap below it is fresh for its own base files, so those
    are judged in its place (a lower one that is not makes this one CHANGED: the query
    goes to Spark, and the lower one's sync was requested)."""
    lower = {t: n for t, n in datamaps_below(provider, covered, index).items()
             if n not in below}
    answered = []
    for low in lower.values():
        v = stacked_check(guard, provider, low, provider.covered(low, index), allowed,
                          compensable, below + (name,), since, index)
        if v.kind in (NEW, CHANGED):
            return Verdict(CHANGED, f"datamap {low} below it is not fresh: "
                                    f"{v.reason or v.files_line()}")
        answered.append(v)
    if lower:
        covered = dataclasses.replace(covered, files={
            t: f for t, f in covered.files.items() if t not in lower})
    v = guard.check(name, covered, allowed, compensable, since)
    if v.kind in (NEW, CHANGED):
        return v
    # the least checked verdict of all stands: UNVERIFIED, then FRESH for a reason other
    # than a listing (within max_staleness, a write in progress), then FRESH
    return max([v, *answered], key=lambda a: 2 if a.kind == UNVERIFIED else bool(a.reason))


def check(service, result: RewriteResult, statement: str, current_db: str,
          conf: Mapping[str, str], default_budget_s: float = 0.0,
          display=lambda name: name, index=None, since: float | None = None) -> Checked:
    """Run the guard over the datamaps `result` uses. `index`: the DatamapIndex that
    rewrote it (None: the current one). What each datamap covers is taken from that same
    index: a datamap refreshed in between would otherwise be judged by its new segments
    while `result` reads its old ones. `since`: when the statement arrived
    (time.monotonic()), for FreshnessGuard.check."""
    guard, provider = service.guard, service.rewrite_index
    index = index if index is not None else service.index()
    allowed = staleness_budget(conf, default_budget_s)
    verdicts: dict[str, Verdict] = {}
    for name in result.used:
        covered = provider.covered(name, index)
        if covered is None:          # that index is gone: cannot tell, the base tables answer
            verdicts[name] = Verdict(CHANGED, "the datamap changed while the statement was "
                                              "rewritten")
            continue

        def compensable(table, definition=covered.definition):
            plan = plan_delta(definition, [table])
            if len(plan.terms) > 1:     # one union is one term (rewriter/compensation.py)
                return f"{table} appears more than once in the datamap (self join)"
            return plan.reason if plan.full_rebuild else None
        try:
            # refreshed in full: no max_staleness credit (its answers are never stale)
            budget = 0.0 if covered.definition.refresh == "full" else allowed
            verdicts[name] = stacked_check(guard, provider, name, covered, budget,
                                           compensable, since=since, index=index)
        except Exception as e:  # noqa: BLE001 - cannot tell: the base tables answer
            log.warning("freshness check of %s failed; the base tables answer", name,
                        exc_info=True)
            verdicts[name] = Verdict(CHANGED, f"the base table files could not be listed: {e}")
    changed = {n: v for n, v in verdicts.items() if v.kind == CHANGED}
    if changed:
        return Checked(None, note="stale:" + ",".join(
            display(n) for n in changed), verdicts=verdicts, explain=tuple(
            f"Skipped {display(n)}: base table files changed ({v.reason}); the base tables "
            "answer, and a refresh was started" for n, v in changed.items()))
    explain = [f"Freshness: {display(n)}: " + {
        FRESH: "base table files unchanged" if not v.reason else f"not checked ({v.reason})",
        UNVERIFIED: f"not checked ({v.reason})",
        NEW: f"{v.files_line()} (a refresh was started)"}[v.kind] + _held(v)
        + _through(provider, n, display, index) for n, v in verdicts.items()]
    new = {n: v for n, v in verdicts.items() if v.kind == NEW}
    if not new:
        return Checked(result, explain=tuple(explain), verdicts=verdicts)
    deltas = {n: tuple((t, guard.relation(t, files)) for t, files in v.new.items())
              for n, v in new.items()}
    index = provider.compensated(index, deltas)
    try:
        again = index.rewrite(statement, current_db, approximate_on(conf))
    except Exception:  # noqa: BLE001 - the base tables answer instead
        log.warning("compensated rewrite failed; the base tables answer", exc_info=True)
        again = None
    if again is None or sorted(again.used) != sorted(result.used):
        return Checked(None, verdicts=verdicts,
                       note="stale:" + ",".join(display(n) for n in new), explain=tuple(
                           f"Skipped {display(n)}: {v.files_line()} could not be compensated; "
                           "the base tables answer" for n, v in new.items()))
    return Checked(again, verdicts=verdicts,
                   log=tuple(v.files_line() for v in new.values()), explain=tuple(explain),
                   note="compensated:" + ",".join(display(n) for n in new))


def _held(v: Verdict) -> str:
    """EXPLAIN's note of files held back (FreshnessGuard._held_back)."""
    if not v.held:
        return ""
    return (f"; {v.held} new file{'s' if v.held != 1 else ''} of writes still in progress "
            "not read")


def _through(provider, name: str, display, index=None) -> str:
    """EXPLAIN's note that a stacked datamap was judged by the datamaps below it."""
    covered = provider.covered(name, index)
    below = sorted(datamaps_below(provider, covered, index).values()) if covered else []
    return f" (judged by datamap {', '.join(map(display, below))} below it)" if below else ""


def log_lines(service, used, display, checked: Checked | None = None) -> tuple[str, ...]:
    """The operation-log lines of an answer from datamaps (what beeline prints and BI tools
    poll): which datamap, which segments, as of when its data was read, and the base files
    compensated at query time, e.g. `answered from datamap agg_sales (segments 0-3), data
    as of 2026-11-23 16:05:12 UTC; 2 new files compensated from default.sales`."""
    out = []
    for name in used:
        seen = service.freshness(name)
        if seen is None:
            continue
        ids, as_of = seen
        when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(as_of)) if as_of else "unknown"
        verdict = checked.verdicts.get(name) if checked is not None else None
        extra = f"; {verdict.files_line()}" if verdict is not None and verdict.new else ""
        out.append(f"answered from datamap {display(name)} "
                   f"(segments {segment_ranges(ids)}), data as of {when}{extra}")
    return tuple(out)


def segment_ranges(ids) -> str:
    """("0","1","2","3","5") -> "0-3, 5"."""
    nums = sorted(int(i) for i in ids)
    parts, start = [], None
    for i, n in enumerate(nums):
        if start is None:
            start = n
        if i + 1 == len(nums) or nums[i + 1] != n + 1:
            parts.append(str(start) if start == n else f"{start}-{n}")
            start = None
    return ", ".join(parts) or "none"


def with_refresh(decision: Decision | None, refresh: tuple[str, ...], remember) -> Decision:
    """`decision`, preceded on the client's Spark session by `refresh` (REFRESH TABLE of
    tables whose files changed since the session last listed them: Spark keeps a session's
    file list, so it would answer from the old files); the session remembers it. A
    datamap answer the proxy computes itself needs no refresh: only its fallback does."""
    if decision is None:
        return PassThrough(before=refresh, settings=remember)
    if isinstance(decision, Serve):
        fallback = decision.fallback
        return dataclasses.replace(decision, fallback=dataclasses.replace(
            fallback, before=tuple(dict.fromkeys(refresh + fallback.before))))
    return dataclasses.replace(decision, before=tuple(dict.fromkeys(refresh + decision.before)),
                               settings=decision.settings + remember)
