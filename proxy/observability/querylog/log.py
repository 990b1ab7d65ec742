"""The query log: every statement's shape, tables, decision, datamaps, why-not, duration
and rows, kept in the catalog's database (table query_log). What the console, the
metrics and the advisor read (docs/querylog.md).

    qlog = QueryLog(location, settings.querylog)
    Frontend(settings, router, observers=Observers(qlog))     # proxy/app.py
    qlog.recent(100) / qlog.entries(since) / qlog.datamap_usage(since, 3600) / ...
    qlog.close()                        # at shutdown: what was observed is written first

On the event loop, `statement()` only appends the event to a bounded queue; when the
writer falls behind, the oldest waiting events are dropped, counted and logged, and the
client never waits. One named thread ("querylog-writer") takes the events in batches:
it skips SET, USE, SHOW and DESCRIBE, normalises the statement (rewriter/advise/shape.py),
classifies it (querylog_reasons.py), estimates the time a datamap answer saved,
redacts and cuts the statement text ([querylog] statement_bytes), and inserts the batch
in one transaction, within WRITE_EVERY_S of the event. It also enforces [querylog]
retention and max_entries, deleting the oldest in batches.

Time saved by a datamap answer, an estimate (saving.py): the median duration of the same
shape on the base tables (the latest BASE_SAMPLES runs: statements the base tables
answered, and the online audit's runs of datamap answers there, `base_run`), each scaled
by the rows of the base tables it reads now over their rows then (`base_rows`, the
catalog's count), minus this answer's; None while that shape was never seen on the base
tables ("not measured yet").

A reader (`QueryLog.reader(location)`, e.g. a test of the running proxy's log) opens the
same table without a writer (`datamap-proxy advise` asks the proxy over HiveServer2).
"""
from __future__ import annotations

import collections
import json
import logging
import re
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Sequence

from proxy.routing.classify import Kind, classify
from proxy.config import QueryLogSettings
from proxy.logsafe import redact
from proxy.observability.observe import BYPASSED, LOCAL, REFUSED, Observer, StatementEvent
from proxy.observability.querylog.reasons import not_served_class, reason_class
from proxy.observability.querylog.saving import Sample, estimate
from proxy.observability.querylog.store import QueryStore, encode
from rewriter.advise import fold_tokens, shape_hash, shape_of

log = logging.getLogger("proxy.querylog")

QUEUE_SIZE = 50_000         # events waiting for the writer; then the oldest are dropped
BATCH = 1_000               # events per insert transaction
WRITE_EVERY_S = 0.2         # an event is in the table within about this long
RETAIN_EVERY_S = 60.0       # retention runs this often (and at start)
BASE_SAMPLES = 16           # base-table durations kept per shape for saved_s
ROWS_TTL_S = 5.0            # base-table rows read again from the catalog after this long
SHAPES_KEPT = 10_000        # shapes whose base durations are kept in memory
CLIENT_BYTES = 256          # a client tool's name is the client's text, stored per statement
_NOT_LOGGED = (Kind.SET, Kind.SET_REWRITE, Kind.USE)
# statements that only look at metadata, as the metadata calls do (proxy SQL such as
# SHOW DATAMAP is Kind.DATAMAP, and logged)
_METADATA = re.compile(r"\s*(?:show|describe|desc)\b", re.IGNORECASE)
_ANSWERED = ("FINISHED", "CLOSED")


@dataclass(frozen=True, slots=True)
class LoggedQuery:
    id: int
    at: float                              # epoch seconds, when the statement arrived
    user: str
    client: str
    session_id: str
    shape_hash: str                        # 16 hex digits
    shape: str                             # normalised SQL: literals -> ?, case/space folded
    statement: str                         # redacted, cut to [querylog] statement_bytes
    current_db: str
    tables: tuple[str, ...]                # "db.table"
    decision: str                          # proxy.observability.observe.DECISIONS
    datamaps: tuple[str, ...]
    why_not: tuple[tuple[str, str], ...]
    reason_class: str | None               # querylog_reasons.REASON_CLASSES; None: not a miss
    duration_s: float
    rows: int | None
    outcome: str
    sqlstate: str | None
    saved_s: float | None
    # a datamap answer Spark computed though the proxy serves in-process: why (the
    # serving tier's reason) and its class (reasons.NOT_SERVED_CLASSES); None otherwise
    not_served: str | None = None
    not_served_class: str | None = None


class QueryLog(Observer):
    def __init__(self, location: str, settings: QueryLogSettings | None = None, *,
                 writer: bool = True, queue_size: int = QUEUE_SIZE,
                 base_rows: Callable[[Sequence[str]], int | None] | None = None):
        self.settings = settings or QueryLogSettings()
        self.enabled = self.settings.enabled and writer
        self._store = QueryStore(location, create=writer)
        self._queue: collections.deque = collections.deque()
        # (statement, database, seconds) of audited runs on the base tables (base_run)
        self._audited: collections.deque = collections.deque(maxlen=QUEUE_SIZE)
        self._queue_size = queue_size
        # each counter has one writer thread: the loop counts what it took and dropped,
        # the writer what it handled
        self._observed = 0
        self.dropped = 0
        self._handled = 0
        self._reported = 0          # drops already logged
        self._cond = threading.Condition()
        self._stop = False
        # datamap -> [hits, saved seconds, hits whose saving was measured]
        self._totals: dict[str, list] = {}
        # shape -> its latest runs on the base tables, (seconds, base rows then)
        self._base: collections.OrderedDict[str, list[Sample]] = collections.OrderedDict()
        # the rows of the base tables (Catalog.base_rows) that scale the estimates
        self._base_rows = base_rows
        self._rows: dict[tuple[str, ...], tuple[float, int | None]] = {}
        self._retained_at = 0.0
        self._thread = None
        if self.enabled:
            self._thread = threading.Thread(target=self._run, name="querylog-writer",
                                            daemon=True)
            self._thread.start()

    @classmethod
    def reader(cls, location: str) -> "QueryLog":
        """The log at `location` (a catalog path or URL), read-only: no writer thread."""
        return cls(location, writer=False)

    # -- the event loop's side: count and enqueue only ----------------------------------
    def statement(self, ev: StatementEvent) -> None:
        if not self.enabled:
            return
        if len(self._queue) >= self._queue_size:
            try:
                self._queue.popleft()
                self.dropped += 1
            except IndexError:      # the writer took it meanwhile
                pass
        self._queue.append(ev)
        self._observed += 1

    def base_run(self, statement: str, current_db: str, seconds: float) -> None:
        """A datamap answer's query ran on the base tables for the online audit (any
        thread): its duration measures what the datamap answers of its shape save."""
        if self.enabled:
            self._audited.append((statement, current_db, seconds))

    def flush(self, timeout: float = 5.0) -> None:
        """Return once every event observed so far is written (or `timeout` passed)."""
        target = self._observed
        deadline = time.monotonic() + timeout
        with self._cond:
            self._cond.notify_all()
            while (self._handled + self.dropped < target and self._thread is not None
                   and self._thread.is_alive()):
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self._cond.wait(min(left, WRITE_EVERY_S))

    def close(self) -> None:
        """Write what was observed, stop the writer, close the connections."""
        thread, self._thread = self._thread, None
        if thread is not None:
            with self._cond:
                self._stop = True
                self._cond.notify_all()
            thread.join(30.0)
            if thread.is_alive():
                log.warning("the query log writer did not stop within 30 s")
                return
        self.enabled = False
        self._store.close()

    # -- readers (any thread) -------------------------------------------------------------
    def recent(self, limit: int = 100, *, user: str | None = None, decision: str | None = None,
               datamap: str | None = None) -> list[LoggedQuery]:
        return [LoggedQuery(**d) for d in self._store.recent(limit, user, decision, datamap)]

    def entries(self, since: float, until: float | None = None) -> Iterator[LoggedQuery]:
        for d in self._store.entries(since, until):
            yield LoggedQuery(**d)

    def datamap_usage(self, since: float, bucket_s: float
                      ) -> list[tuple[float, str, int, float | None]]:
        """(bucket start, datamap, hits, estimated saved seconds), oldest bucket first;
        saved is None when none of the bucket's hits could be measured yet."""
        buckets: dict[tuple[float, str], list] = {}
        for at, datamaps, saved in self._store.usage(since):
            start = (at // bucket_s) * bucket_s
            for name in json.loads(datamaps):
                b = buckets.setdefault((start, name), [0, 0.0, 0])
                b[0] += 1
                if saved is not None:
                    b[1] += saved
                    b[2] += 1
        return [(start, name, hits, saved if measured else None)
                for (start, name), (hits, saved, measured) in sorted(buckets.items())]

    def datamap_totals(self) -> dict[str, tuple[int, float | None]]:
        """datamap -> (hits, saved seconds) written since this process started; saved is
        None while no hit's saving could be measured yet (its shape never ran on the base
        tables): "not measured yet", never a made-up 0."""
        with self._cond:
            return {name: (h, s if m else None) for name, (h, s, m) in self._totals.items()}

    def datamap_measured(self) -> dict[str, int]:
        """datamap -> its hits since start whose saving could be estimated (the others'
        shapes had not run on the base tables yet)."""
        with self._cond:
            return {name: m for name, (_h, _s, m) in self._totals.items()}

    def write_many(self, entries: Iterable) -> None:
        """Insert entries as given (LoggedQuery or alike; `id` ignored): synthetic logs
        for tests and benchmarks."""
        rows = [tuple(_column(e, c) for c in _FIELDS) for e in entries]
        for i in range(0, len(rows), BATCH):
            self._store.insert(rows[i:i + BATCH])

    # -- the writer thread ----------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._queue and not self._stop:
                    self._cond.wait(WRITE_EVERY_S)
                stop = self._stop
            batch = []
            try:
                while len(batch) < BATCH:
                    batch.append(self._queue.popleft())
            except IndexError:      # empty (the loop may drop the oldest meanwhile)
                pass
            if self.dropped > self._reported:     # before the batch: flush() sees it said
                log.warning("query log: dropped %d statements the writer could not keep up "
                            "with (%d in all)", self.dropped - self._reported, self.dropped)
                self._reported = self.dropped
            self._take_audited()
            if batch:
                self._write(batch)
            if stop and not self._queue:
                return
            if time.monotonic() - self._retained_at >= RETAIN_EVERY_S:
                self._retain()

    def _write(self, batch: list[StatementEvent]) -> None:
        rows, events, hits = [], [], []
        for ev in batch:
            try:
                row = self._row(ev)
            except Exception:  # noqa: BLE001 - one odd statement must not stop the log
                log.warning("cannot record a statement in the query log", exc_info=True)
                continue
            if row is not None:
                rows.append(row)
                events.append(ev)
        try:
            if rows:
                self._store.insert(rows)
        except Exception as e:  # noqa: BLE001 - the log is lost for this batch, not the proxy
            log.warning("cannot write %d statements to the query log: %s", len(rows),
                        redact(str(e)))
            rows = []
        for ev, row in zip(events, rows):
            if ev.datamaps and ev.outcome in _ANSWERED:
                hits.append((ev.datamaps, row[_SAVED]))
        with self._cond:
            for datamaps, saved in hits:
                for name in datamaps:
                    t = self._totals.setdefault(name, [0, 0.0, 0])
                    t[0] += 1
                    if saved is not None:
                        t[1] += saved
                        t[2] += 1
            self._handled += len(batch)
            self._cond.notify_all()

    def _take_audited(self) -> None:
        while True:
            try:
                statement, db, seconds = self._audited.popleft()
            except IndexError:
                return
            try:
                sh = _shape(statement, db)
                self._base_of(sh.hash).append((seconds, self._rows_of(sh.tables)))
            except Exception:  # noqa: BLE001 - an estimate lost, never the log
                log.debug("cannot record an audited base-table run", exc_info=True)

    def _row(self, ev: StatementEvent) -> tuple | None:
        kind = classify(ev.statement, ev.current_db).kind
        if kind in _NOT_LOGGED or (kind is Kind.OTHER and _METADATA.match(ev.statement)):
            return None
        if kind is Kind.DATAMAP:          # proxy SQL sqlglot does not know
            text = fold_tokens(ev.statement)
            shape_text, tables, digest = text, (), shape_hash(text)
        else:
            sh = _shape(ev.statement, ev.current_db)
            shape_text, tables, digest = sh.text, sh.tables, sh.hash
        # the why-not is the decision's, as it was when the statement was decided (the
        # datamaps it was not offered included): never looked up again here, when a
        # refresh may have changed it
        why_not = ev.why_not
        miss = kind is Kind.QUERY and not ev.datamaps and ev.decision not in (LOCAL, REFUSED)
        cls = reason_class(why_not, ev.decision == BYPASSED) if miss and tables else None
        saved = self._saved(digest, tables, ev, miss)
        statement = _cut(redact(ev.statement), self.settings.statement_bytes)
        # a shape from tokens keeps unquoted values (a URL's password), and any shape is as
        # long as its statement: stored under the same rules (the hash is of the whole)
        shape_text = _cut(redact(shape_text), self.settings.statement_bytes)
        return (ev.at, ev.user, _cut(ev.client, CLIENT_BYTES), ev.session_id, digest, shape_text, statement,
                ev.current_db, encode(tables), ev.decision, encode(ev.datamaps),
                encode(why_not), cls, float(ev.duration_s), ev.rows, ev.outcome, ev.sqlstate,
                saved, ev.not_served or None, not_served_class(ev.not_served))

    def _saved(self, digest: str, tables: tuple[str, ...], ev: StatementEvent,
               miss: bool) -> float | None:
        """A base-table answer's duration is remembered per shape, with the base tables'
        rows; a datamap answer's saving is estimated from them (saving.py)."""
        if ev.outcome != "FINISHED" or not (miss or ev.datamaps):
            return None
        base = self._base_of(digest)
        if miss:
            base.append((ev.duration_s, self._rows_of(tables)))
            del base[:-BASE_SAMPLES]
            return None
        return estimate(base, self._rows_of(tables) if base else None, ev.duration_s)

    def _rows_of(self, tables: Sequence[str]) -> int | None:
        """The base tables' rows now (the catalog's count, read at most every ROWS_TTL_S
        per set of tables; writer thread); None when unknown."""
        if self._base_rows is None or not tables:
            return None
        key = tuple(sorted(tables))
        now = time.monotonic()
        got = self._rows.get(key)
        if got is None or now - got[0] > ROWS_TTL_S:
            try:
                rows = self._base_rows(key)
            except Exception:  # noqa: BLE001 - an estimate unscaled, never the log lost
                log.debug("cannot read the base tables' rows", exc_info=True)
                rows = None
            if len(self._rows) > SHAPES_KEPT:
                self._rows.clear()
            got = self._rows[key] = (now, rows)
        return got[1]

    def _base_of(self, digest: str) -> list[Sample]:
        """The base-table runs kept for a shape (writer thread); those read back from the
        log at first sight have no rows (unscaled)."""
        base = self._base.get(digest)
        if base is None:            # first sight: what the log holds from before
            base = self._base[digest] = [(d, None) for d in reversed(
                self._store.base_durations(digest, BASE_SAMPLES))]
            if len(self._base) > SHAPES_KEPT:
                self._base.popitem(last=False)
        else:
            self._base.move_to_end(digest)
        del base[:-BASE_SAMPLES]
        return base

    def _retain(self) -> None:
        self._retained_at = time.monotonic()
        try:
            old = self._store.delete_before(time.time() - self.settings.retention_s)
            over = self._store.keep_newest(self.settings.max_entries)
        except Exception as e:  # noqa: BLE001 - tried again at the next round
            log.warning("query log retention failed: %s", redact(str(e)))
            return
        if old or over:
            log.info("query log: deleted %d entries older than the retention, %d over "
                     "max_entries", old, over)


_FIELDS = ("at", "user", "client", "session_id", "shape_hash", "shape", "statement",
           "current_db", "tables", "decision", "datamaps", "why_not", "reason_class",
           "duration_s", "rows", "outcome", "sqlstate", "saved_s", "not_served",
           "not_served_class")
_SAVED = _FIELDS.index("saved_s")


def _column(entry, name: str):
    value = getattr(entry, name)
    return encode(value) if name in ("tables", "datamaps", "why_not") else value


_SHAPES: collections.OrderedDict = collections.OrderedDict()
_SHAPES_MAX = 4096
_SHAPE_CACHED_BYTES = 8192


def _shape(statement: str, current_db: str):
    """shape_of, parsed once per statement that differs only in its literals: their
    token-folded text (a regular expression, ~50 times cheaper than a parse) is the key."""
    if len(statement) > _SHAPE_CACHED_BYTES:
        return shape_of(statement, current_db)
    key = (fold_tokens(statement), current_db)
    sh = _SHAPES.get(key)
    if sh is None:
        sh = _SHAPES[key] = shape_of(statement, current_db)
        if len(_SHAPES) > _SHAPES_MAX:
            _SHAPES.popitem(last=False)
    else:
        _SHAPES.move_to_end(key)
    return sh


def _cut(text: str, max_bytes: int) -> str:
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text
    return data[:max_bytes].decode("utf-8", errors="ignore") + f"…(+{len(data) - max_bytes} bytes)"
