"""Online correctness audit of datamap answers (docs/audit.md).

    auditor = Auditor(service, rate, serving)   # proxy/app.py; rate: [datamaps] audit_sample_rate
    auditor.start(background)                   # the worker thread that runs sampled audits
    auditor.set_rate(rate)                      # SIGHUP: the share sampled from now on
    auditor.offer(statement, ctx, result)       # DatamapSelectHandler, for every datamap answer
    auditor.audit_datamap(stmt, current_db)     # AUDIT DATAMAP [db.]name (a DDL worker thread)

offer() runs on the decision path (the event loop): it only remembers the query in a small
ring per datamap (ring.py) and, for a sampled share, puts it on a
bounded queue that one owned thread consumes; a full queue drops it. Nothing of an audit
runs on the client's path.

An audit rewrites the query again (the datamap's segments may have changed since the client
got its answer), then runs, in its own session of the pipeline SparkSession
(pipeline/audit.py), the original query (without its outermost LIMIT) on the base tables
and the rewritten SQL; when the serving tier would answer it in-process, that answer too
(when its engine cannot start, the detail says that answer was not checked: the tier's
problem, shown by serve's log, EXPLAIN and doctor, not the datamap's).
The answers must be the same (compare.py). Around the runs, the state they depend on
is read twice: the datamaps' visible segments, the base tables' live segments in the
catalog and the files the base tables hold. A change, or files the catalog has not seen
(a write outside the proxy not synced yet), makes the audit INCONCLUSIVE, never a mismatch.
A mismatch is confirmed by a second run before anything is done; then, under the datamap's
lock and with the state checked once more, its segments are hidden and it is DISABLED with
`audit mismatch on <digest> at <time> UTC` (REBUILD DATAMAP builds it anew and enables it),
the history gets an `audit_mismatch` event, and one WARNING line is logged.

At most one audit runs per datamap, and MAX_RUNNING in all; a sample taken while one runs
is skipped; AUDIT DATAMAP waits for it (up to ON_DEMAND_WAIT_S), then runs.
"""
from __future__ import annotations

import dataclasses
import logging
import queue
import random
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Callable, Sequence

from pipeline.audit import (audit_session, cancel_audits, definition_answers, refresh_tables,
                            run_query)
from proxy.datamaps.catalog.records import CatalogError
from proxy.datamaps.failures import describe
from proxy.datamaps.freshness.answer import segment_ranges
from proxy.datamaps.rewrite.spark_sql import translate_only
from proxy.datamaps.verify.compare import NotAuditable, audited_form, compare, digest
from proxy.datamaps.verify.ring import RecentQueries
from proxy.datamaps.verify.state import State, changed, read_state
from proxy.routing.router import LocalResult
from proxy.serving import Served

if TYPE_CHECKING:
    from proxy.datamaps.ddl import parser as ddl
    from proxy.datamaps.service import DatamapService

log = logging.getLogger("proxy.datamaps.audit")

AUDIT_COLUMNS = (("DataMapName", "string"), ("Audited", "string"), ("Compared", "string"),
                 ("Outcome", "string"), ("Rows", "bigint"), ("Detail", "string"))
MAX_RUNNING = 2              # audits at once, sampled and on demand together
MAX_ROWS = 100_000           # a larger answer is not compared (SKIPPED)
ON_DEMAND_WAIT_S = 120.0     # AUDIT DATAMAP waits this long for a running audit to end
QUEUE_SIZE = 16              # sampled queries waiting for the worker


class Outcome(StrEnum):
    PASSED = "PASSED"
    MISMATCH = "MISMATCH"            # confirmed: the datamap was DISABLED
    INCONCLUSIVE = "INCONCLUSIVE"    # the data changed around the runs
    SKIPPED = "SKIPPED"              # not audited (why in the detail)
    FAILED = "FAILED"                # a run failed (why in the detail)


@dataclass(frozen=True)
class Report:
    datamaps: tuple[str, ...]
    audited: str                     # the query's digest, or "definition <digest>"
    compared: str
    outcome: Outcome
    detail: str
    rows: int | None = None
    state: "State | None" = field(default=None, compare=False, repr=False)


class Auditor:
    def __init__(self, service: "DatamapService", rate: float = 0.0, serving=None,
                 rng: Callable[[], float] = random.random,
                 on_base_run: Callable[[str, str, float], None] | None = None):
        self.service = service
        # (statement, database, seconds) of each audited query's run on the base tables:
        # the query log's measure of the time a datamap answer saves (QueryLog.base_run)
        self.on_base_run = on_base_run
        self.rate = rate
        self.serving = serving             # proxy.serving.ServingTier or None
        self._rng = rng
        self._lock = threading.Lock()
        self.queries = RecentQueries()     # what AUDIT DATAMAP audits
        self._queue: queue.Queue = queue.Queue(QUEUE_SIZE)
        self._running: set[str] = set()             # datamaps being audited
        self._running_sets: list[tuple[str, ...]] = []   # one per audit running
        self._free = threading.Condition(self._lock)
        self._closed = threading.Event()
        self._background = None            # proxy/background.py, once start() was called
        self._working = False              # the worker thread was started
        self.dropped = 0                   # sampled queries dropped: queue full or busy
        # tests: called between the two runs of an audit (a write "during" it)
        self.between_runs: Callable[[], None] | None = None

    # ------------------------------------------------------------------ decision path
    def offer(self, statement: str, ctx, result) -> None:
        """A query answered from datamaps (`result.used`): remember it, and sample it.
        O(1), never blocks (the event loop calls it)."""
        if not result.used:
            return
        self.queries.add(result.used, (ctx.current_db, statement))
        if self.rate <= 0 or self._rng() >= self.rate or self._closed.is_set():
            return
        try:
            self._queue.put_nowait((tuple(result.used), ctx.current_db, statement))
        except queue.Full:
            self.dropped += 1

    def recent(self, name: str) -> list[tuple[str, str]]:
        """(database, statement) of the queries kept for datamap "db.name", newest first."""
        return self.queries.recent(name)

    # ------------------------------------------------------------------ the worker
    def start(self, background) -> None:
        """Run sampled audits in a thread of `background` (proxy/background.py)."""
        self._background = background
        self._start_worker()

    def set_rate(self, rate: float) -> None:
        """`[datamaps] audit_sample_rate` reloaded (SIGHUP): answers from now on are sampled
        at `rate`; the worker starts if it was off. Queued samples are still audited."""
        self.rate = rate
        self._start_worker()

    def _start_worker(self) -> None:
        with self._lock:
            if (self.rate <= 0 or self._working or self._background is None
                    or self._closed.is_set()):
                return
            self._working = True
        self._background.thread("datamap-audit", self._work)

    def close(self) -> None:
        """Stop the worker and cancel the Spark jobs of running audits."""
        self._closed.set()
        provider = self.service.spark_provider
        if self._running and getattr(provider, "ready", True):
            try:
                cancel_audits(provider())
            except Exception:  # noqa: BLE001 - shutting down regardless
                log.debug("cancelling audit jobs failed", exc_info=True)

    def _work(self) -> None:
        while not self._closed.is_set():
            try:
                names, db, statement = self._queue.get(timeout=0.5)
            except queue.Empty:
                continue
            if not getattr(self.service.spark_provider, "ready", True):
                self.dropped += 1          # never open the pipeline session for an audit
                continue
            t0 = time.monotonic()
            try:
                report = self.audit_query(names, db, statement)
            except Exception:  # noqa: BLE001 - an audit must never take the worker down
                log.warning("datamap audit failed", exc_info=True)
                continue
            if report is None:
                self.dropped += 1
            elif report.outcome is not Outcome.MISMATCH:     # that one logs a WARNING
                log.info("sampled audit of %s: %s %s in %.1fs: %s", ", ".join(names),
                         report.audited, report.outcome.value, time.monotonic() - t0,
                         report.detail[:300])

    def _claim(self, names: Sequence[str], wait: float = 0.0) -> bool:
        """Mark `names` as being audited; False when one is (or MAX_RUNNING audits run)
        still after `wait` seconds."""
        deadline = time.monotonic() + wait
        with self._free:
            while self._running.intersection(names) or len(self._running_sets) >= MAX_RUNNING:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._free.wait(left)
            self._running.update(names)
            self._running_sets.append(tuple(names))
            return True

    def _release(self, names: Sequence[str]) -> None:
        with self._free:
            self._running.difference_update(names)
            self._running_sets.remove(tuple(names))
            self._free.notify_all()

    # ------------------------------------------------------------------ audits
    def audit_query(self, names: Sequence[str], db: str, statement: str) -> Report | None:
        """Audit one query answered from datamaps `names`; None when one of them is being
        audited already (or MAX_RUNNING audits run)."""
        if not self._claim(names):
            return None
        try:
            return self._confirmed(lambda: self._query_once(db, statement))
        finally:
            self._release(names)

    def audit_datamap(self, stmt: "ddl.AuditDatamap", current_db: str) -> LocalResult:
        """AUDIT DATAMAP: the queries kept for it, newest first, until one is compared
        (or a mismatch is confirmed); the datamap's definition when none is."""
        rec = self.service.commands.require(stmt.name, None, current_db)
        if not self._claim([rec.qualified], ON_DEMAND_WAIT_S):
            return _result(rec.name, [Report((rec.qualified,), "-", "-", Outcome.SKIPPED,
                                             f"an audit of datamap {rec.qualified} is running")])
        try:
            reports = []
            for db, statement in self.recent(rec.qualified):
                report = self._confirmed(
                    lambda: self._query_once(db, statement, rec.qualified))
                reports.append(report)
                if report.outcome in (Outcome.PASSED, Outcome.MISMATCH):
                    break
            if not any(r.outcome in (Outcome.PASSED, Outcome.MISMATCH) for r in reports):
                reports.append(self._confirmed(lambda: self._definition_once(rec)))
        finally:
            self._release([rec.qualified])
        return _result(rec.name, reports)

    def _confirmed(self, once: Callable[[], Report]) -> Report:
        """Run an audit; a mismatch is run again, and acted upon only when it repeats."""
        try:
            first = once()
            if first.outcome is not Outcome.MISMATCH:
                return first
            second = once()
        except Exception as e:  # noqa: BLE001 - reported; nothing is concluded
            log.info("datamap audit failed: %s", describe(e)[0])
            log.debug("datamap audit failure", exc_info=True)
            return Report((), "-", "-", Outcome.FAILED, describe(e)[0] or type(e).__name__)
        if second.outcome is not Outcome.MISMATCH:
            if second.outcome is Outcome.PASSED:
                return Report(second.datamaps, second.audited, second.compared,
                              Outcome.INCONCLUSIVE, "a first run differed, a second agreed: "
                              + first.detail, second.rows)
            return second
        return self._disable(second)

    def _query_once(self, db: str, statement: str, want: str | None = None) -> Report:
        dig = digest(statement)
        try:
            sql = audited_form(statement)
        except NotAuditable as e:
            return Report((), dig, "-", Outcome.SKIPPED, f"not audited: {e}")
        result = self.service.index().rewrite(sql, db)
        if not result.used:
            why = "; ".join(f"{n}: {r}" for n, r in result.skipped.items())
            return Report((), dig, "-", Outcome.SKIPPED,
                          "no longer answered from a datamap" + (f" ({why})" if why else ""))
        names = tuple(result.used)
        if want is not None and want not in names:
            return Report((), dig, "-", Outcome.SKIPPED, f"now answered from {', '.join(names)}")
        served, unchecked = self._served_plan(result)
        compared = "original query on the base tables vs rewritten SQL on Spark" + (
            " vs in-process answer" if served is not None else "")

        base_sql = sql
        if "timeseries" in sql.lower():      # proxy SQL: Spark reads its translation
            base_sql = translate_only(self.service, sql, db)

        def run(session):
            t0 = time.monotonic()
            base = run_query(session, base_sql, db, MAX_ROWS)
            if self.on_base_run is not None:
                self.on_base_run(statement, db, time.monotonic() - t0)
            answers = [("datamap answer", run_query(session, result.sql, db, MAX_ROWS))]
            if served is not None:
                rows = self.serving.engine().run_blocking(served.plan)
                answers.append(("in-process answer", _Answer(tuple(served.plan.columns), rows)))
            return base, answers

        def unchanged() -> bool:     # the rewrite names the segments it reads
            return self.service.index().rewrite(sql, db).sql == result.sql
        report = self._compared(names, dig, compared, run, unchanged)
        if unchecked:
            report = dataclasses.replace(
                report, detail=f"{report.detail}; in-process answer not checked: {unchecked}")
        return report

    def _definition_once(self, rec) -> Report:
        dig = f"definition {digest(rec.select_sql)}"
        why = self.service.catalog.unavailable_reason(rec.db, rec.name)
        if why is not None:
            return Report((rec.qualified,), dig, "-", Outcome.SKIPPED, why)
        ids = [s.id for s in self.service.catalog.visible_segments(rec.db, rec.name)]
        compared = (f"definition on the base tables vs segments {segment_ranges(ids)} "
                    "re-aggregated")

        def run(session):
            base, stored = definition_answers(session, rec.definition, ids, MAX_ROWS)
            return base, [("segments", stored)]
        return self._compared((rec.qualified,), dig, compared, run,
                              lambda: True, {rec.qualified: tuple(ids)})

    def _compared(self, names: tuple[str, ...], dig: str, compared: str, run,
                  unchanged: Callable[[], bool], expect_segments: dict | None = None) -> Report:
        """Run `run(session)` -> (base answer, [(what, answer)]) between two readings of
        the state, and compare. `unchanged()`: what the runs read was decided (a rewrite,
        a list of segments) before the first reading, and is still what it would be."""
        with audit_session(self.service.spark_provider()) as session:
            state, outcome, detail, rows = self._compare_in(session, names, run, unchanged,
                                                            expect_segments or {})
        return Report(names, dig, compared, outcome, detail, rows, state)

    def _compare_in(self, session, names, run, unchanged, expect_segments) -> tuple:
        before = read_state(self.service.catalog, names, session)
        if before.problem:
            return before, Outcome.INCONCLUSIVE, before.problem, None
        if any(dict(before.segments).get(n) != ids for n, ids in expect_segments.items()):
            return before, Outcome.INCONCLUSIVE, "the datamap's segments changed", None
        refresh_tables(session, [t for t, _ in before.files] + [self._table(n) for n in names])
        base, answers = run(session)
        if self.between_runs is not None:
            self.between_runs()
        after = read_state(self.service.catalog, names, session)
        if after != before:
            return before, Outcome.INCONCLUSIVE, changed(before, after), None
        if after.problem:
            return before, Outcome.INCONCLUSIVE, after.problem, None
        if not unchanged():
            return (before, Outcome.INCONCLUSIVE, "the datamap's segments changed during the "
                                                  "audit", None)
        if base.rows is None or any(a.rows is None for _, a in answers):
            return before, Outcome.SKIPPED, f"an answer has more than {MAX_ROWS} rows", None
        for what, answer in answers:
            diff = compare(base.columns, base.rows, answer.columns, answer.rows,
                           "base tables", what)
            if diff is not None:
                return before, Outcome.MISMATCH, diff.text, len(base.rows)
        return before, Outcome.PASSED, f"{len(base.rows)} rows equal", len(base.rows)

    def _served_plan(self, result):
        """(the tier's plan of the query or None, why the tier's answer is not checked
        when that is not the query's own doing: the tier's engine cannot start)."""
        if self.serving is None or self.serving.enabled({}) is not None:
            return None, None
        # the engine is started here if it never was (a worker thread may wait for it): an
        # engine that cannot start is the tier's problem, not the datamap's
        down = self.serving.engine_problem(start=True)
        if down is not None:
            return None, f"the local engine is unavailable ({down})"
        try:
            served = self.serving.plan(result, {})
        except Exception:  # noqa: BLE001 - the tier's own problem; Spark's answer is audited
            log.debug("serving plan failed during an audit", exc_info=True)
            return None, None
        return (served if isinstance(served, Served) else None), None

    def _table(self, name: str) -> str:
        db, _, dm = name.partition(".")
        return f"{db}.{dm}_table"

    def _disable(self, report: Report) -> Report:
        """A confirmed mismatch: hide the datamaps' segments and disable them, under their
        locks (no refresh publishes meanwhile), unless the state read around the audit's
        runs changed since (then the rows compared are not the datamap's any more)."""
        catalog = self.service.catalog
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
        reason = f"audit mismatch on {report.audited.split()[-1]} at {when} UTC"
        names = sorted(report.datamaps)
        with ExitStack() as held:
            for name in names:
                held.enter_context(self.service.locks(name))
            with audit_session(self.service.spark_provider()) as session:
                now = read_state(self.service.catalog, names, session)
            if now != report.state or now.problem:
                return Report(report.datamaps, report.audited, report.compared,
                              Outcome.INCONCLUSIVE, now.problem or changed(report.state, now),
                              report.rows)
            for name in names:
                db, _, dm = name.partition(".")
                try:
                    catalog.record_event(db, dm, "audit_mismatch", report.rows,
                                         detail=f"{report.audited}: {report.compared}: "
                                                f"{report.detail}"[:2000])
                    catalog.invalidate_datamap(db, dm, reason)
                except CatalogError:
                    pass        # dropped meanwhile
        log.warning("datamap audit: %s DISABLED (%s): %s: %s", ", ".join(names), reason,
                    report.compared, report.detail)
        return Report(report.datamaps, report.audited, report.compared, Outcome.MISMATCH,
                      f"{report.detail}; DISABLED: {reason}", report.rows)


@dataclass(frozen=True)
class _Answer:
    columns: tuple
    rows: list


def _result(name: str, reports: list[Report]) -> LocalResult:
    return LocalResult(AUDIT_COLUMNS, [(name, r.audited, r.compared, r.outcome.value, r.rows,
                                        r.detail) for r in reports])
