"""The rewriter's view of the datamaps: which are offered (candidates), which are not and
why (EXPLAIN), and the DatamapIndex built from them, cached on the catalog version and the
schema cache's generation so the SELECT path touches neither SQLite nor Spark.

A catalog change does not rebuild the index: a read of the change marks written since the
last one (entries.Marks: the catalog version of each datamap's last change and of each
base table's, never definitions or segments; its cost is that of what changed) tells which
datamaps changed (their row, their visible segments, their base tables' live segments,
whether rewrite is off, and the same of every datamap below a stacked one), and only those
entries are made again and swapped into a new index (DatamapIndex.updated); the others
are shared as they are. The new index replaces the old one in one assignment, so a
statement gets either the old index or the new one, and the new one never holds a changed
datamap's old segments.

Nor does a change of the schemas: the index takes the schemas the schema cache holds
(SchemaCache.held: never Spark), and only the datamaps over a table whose schema changed
are taken out (their queries go to Spark) until they are compiled under the new one; the
tables whose schemas the cache lacks (every one after a restart, one after ALTER TABLE)
are read by the warm-up thread, out of the lock.

No statement waits on a build, a compile or Spark. A statement makes at most
INLINE_ENTRIES entries and INLINE_COMPILES compiles itself (a publish or a DDL: a few);
every other changed datamap is left out of the new index (its queries go to Spark, EXPLAIN
says "rewrite index warming: N of M datamaps compiled") and the warm-up thread reads the
schemas, makes its entry and compiles it, publishing what is ready every COMPILE_TURN_S.
After a restart that is every datamap: the first statement finds an empty index."""
from __future__ import annotations

import dataclasses
import itertools
import logging
import threading
import time
from typing import Iterable

from proxy.datamaps.catalog.store import Catalog
from proxy.datamaps.freshness.guard import Covered
from proxy.datamaps.rewrite.entries import Entry, Marks, make_entry, read_records
from proxy.datamaps.schemas import SchemaCache
from proxy.datamaps.zones.policy import ZoneReader
from rewriter import DatamapIndex
from rewriter.api import Candidate, DatamapDefinitionError

log = logging.getLogger("proxy.datamaps")
Unavailable = dict[str, tuple[tuple[str, ...], str]]   # "db.name" -> (base tables, reason)
# indexes whose coverage is kept for statements still being decided with them
_KEPT_INDEXES = 8
WARMING = "rewrite index warming: {done} of {total} datamaps compiled"
INLINE_ENTRIES = 64      # entries a statement's update makes itself; the rest in the background
INLINE_COMPILES = 8      # definitions it compiles itself (a few CREATEs' worth; ~20 ms each)
WORKER_ENTRIES = 64      # entries the warm-up thread makes per hold of the lock
COMPILE_TURN_S = 0.5     # it compiles this long between two publishes of what is ready
WORKER_PUTS = 512        # and at most this many: what it puts in holds the lock
FIRST_TURN_S = 0.05      # its first turn; each next one twice as long, up to the above
RETRY_S = 60.0           # a table whose schema it read and did not get: read again after


def _columns(schemas, table: str):
    db, _, name = table.partition(".")
    return schemas.get(db, {}).get(name)


def _has_tables(schemas, cand: Candidate) -> bool:
    return all(_columns(schemas, t) is not None for t in cand.definition.base_tables)


class RewriteIndexProvider:
    def __init__(self, catalog: Catalog, schemas: SchemaCache, zones: ZoneReader):
        self.catalog = catalog
        self._schemas = schemas
        self._zones = zones
        self._index = None
        self._built_for: tuple[int, int] | None = None   # (catalog version, schema generation)
        self._unavailable: Unavailable = {}
        # "db.name" -> (visible segment ids, when the newest began reading its base data)
        self._freshness: dict[str, tuple[tuple[str, ...], float]] = {}
        self._covered: dict[str, Covered] = {}
        # what each datamap covers, per index (by token): a statement is judged by the
        # index that rewrote it, though a newer one may be built meanwhile
        self._covered_by: dict[int, dict[str, Covered]] = {}
        # indexes whose candidates carry union compensation, by (index token, deltas)
        self._compensated: dict[tuple, object] = {}
        self._guard = threading.RLock()    # a hook run inside may ask for the index
        self._marks = Marks()
        self._entries: dict[str, Entry] = {}
        self._pending: dict[str, None] = {}   # datamaps whose entries are to be made (again)
        self._made_with: object = object()  # what every entry depends on (the zone problem)
        self.updates = 0                   # index updates (the first one included)
        self.builds = 0                    # indexes made from nothing: one per process
        self.last_changed: tuple[str, ...] = ()   # datamaps the last update made again
        # made entries not in the index: not compiled under its schemas yet, or it lacks
        # their tables' schemas (the warm-up thread's to do)
        self._unready: dict[str, Candidate] = {}
        self._compiled_now: list[str] = []   # what the warm-up thread compiled since
        self._missing: set[str] = set()      # tables whose schemas the warm-up thread loads
        self._read_at: dict[str, float] = {}  # when it read them last
        self._warming = (0, 0)               # (datamaps waiting, all) as last published
        self._touched: set[str] = set()      # entries the last _update made or dropped
        self._index_generation = -1          # the schema generation the index holds
        self.reading = False     # the warm-up thread's first read is under way: no name known
        self._read: dict[str, None] = {}     # the datamaps it found, for the next update
        self._worker: threading.Thread | None = None
        self._closed = False

    def candidates(self) -> list[Candidate]:
        """ENABLED, in-sync datamaps with their visible segments and row counts."""
        self.index()
        entries = self._entries
        return [e.candidate for e in entries.values() if e.candidate is not None]

    def _entry(self, rec, mark, tables: dict[str, str], rewrite_off,
               files_of: dict) -> Entry:
        return make_entry(self.catalog, self._zones, rec, mark, tables, rewrite_off, files_of)

    def _update(self, limit: int) -> tuple[int, list[Candidate], list[str]]:
        """Make again the entries of the datamaps that changed since they were made, at most
        `limit` of them (the others wait for the warm-up thread, out of the index); returns
        (the catalog version read, candidates to put into the index, datamaps to drop).
        Only the marks written since the last update are read (Marks.advance)."""
        marks_of = self._marks
        version = marks_of.version
        touched = marks_of.advance(self.catalog)
        if self._read:                       # what the first read (out of the lock) found
            touched, self._read = {**self._read, **touched}, {}
        marks = marks_of.marks
        made_with = self._zones.problem, (self._schemas.generation if self._zones.problem
                                          else None)
        if made_with != self._made_with:    # a time zone problem judges every datamap
            self._made_with = made_with
            self._entries = {n: dataclasses.replace(e, mark=None)
                             for n, e in self._entries.items()}
            touched = dict.fromkeys([*self._entries, *marks])
        if marks_of.version != version:
            DatamapIndex.compiled_forms.fit(len(marks))
        pending, entries, gone = self._pending, self._entries, []
        for n in touched:                # what is to be made again: O(what changed)
            if n not in marks:
                pending.pop(n, None)
                if n in entries:
                    gone.append(n)
            elif n not in entries or entries[n].mark != marks[n]:
                pending[n] = None
        now = list(itertools.islice(pending, limit))
        for n in now:
            del pending[n]
        tables = marks_of.tables
        files_of: dict = {}
        made = {}
        recs = read_records(self.catalog, now)
        for n in now:
            if n in recs:               # else dropped since the marks: gone next time
                made[n] = self._entry(recs[n], marks[n], tables, marks_of.off, files_of)
        if made and self.catalog.version() != marks_of.version:
            # the catalog changed while the entries were read: they may be newer than
            # their marks, so make them again next time rather than trust the marks
            made = {n: dataclasses.replace(e, mark=None) for n, e in made.items()}
            pending.update(dict.fromkeys(made))
        for n in touched:
            if n in pending and n not in made and (n not in entries or not entries[n].waiting):
                made[n] = Entry(None, left_out=(marks_of.bases[n], ""), waiting=True)
        put, drop = [], list(gone)
        entries = dict(entries)           # a new dict: candidates() reads without the lock
        for n in gone:
            entries.pop(n)
            self._unready.pop(n, None)
        for n, e in made.items():
            entries[n] = e
            self._unready.pop(n, None)
            if e.candidate is not None:
                put.append(e.candidate)
            else:
                drop.append(n)
        self._entries = entries
        self._touched = {*made, *gone}
        self.last_changed = tuple(now)
        return marks_of.version, put, drop

    def covered(self, name: str, index=None) -> Covered | None:
        """What datamap "db.name" was built from, as `index` (None: the current index) saw
        it; None when that index did not offer it or is too old to be known."""
        if index is None:
            return self._covered.get(name)
        known = self._covered_by.get(index.token)
        return known.get(name) if known is not None else None

    def compensated(self, index, deltas: dict[str, tuple[tuple[str, str], ...]]):
        """`index` with the candidates in `deltas` ("db.name" -> ((table, relation), ...))
        reading their new base files too (rewriter Candidate.delta). Cached per index and
        deltas: the files stay new until the background refresh publishes them."""
        key = (index.token, tuple(sorted(deltas.items())))
        with self._guard:
            return self._compensated.get(key) or self._compensate(key, index, deltas)

    def _compensate(self, key, index, deltas):
        # only the compensated entries are made again (a full index is O(datamaps))
        found = index.updated(put=[dataclasses.replace(index.candidates[n], delta=d,
                                                       one_row_per_group=False)
                                   for n, d in deltas.items() if n in index.candidates])
        if len(self._compensated) >= 8:
            self._compensated.pop(next(iter(self._compensated)))
        self._compensated[key] = found
        return found

    def freshness(self, name: str) -> tuple[tuple[str, ...], float] | None:
        """(visible segment ids, data as of: epoch seconds) of datamap "db.name" as the
        current index saw it; None when it is not offered."""
        return self._freshness.get(name)

    def unavailable(self, tables: Iterable[str]) -> dict[str, str]:
        """Datamaps over any of `tables` ("db.table") that the current index was not
        offered (DISABLED, not in sync, time zone unknown), "db.name" -> reason: for
        EXPLAIN, and for a miss's why-not as the decision saw it. Read from what the last
        index build saw: nothing is computed here."""
        wanted = set(tables)
        waiting, total = self._warming
        warm = WARMING.format(done=total - waiting, total=total)
        return {name: reason or warm for name, (bases, reason) in self._unavailable.items()
                if wanted.intersection(bases)}

    def left_out_tables(self) -> frozenset[str]:
        """The base tables of the datamaps the current index was not offered: a query
        over none of them has nothing to add to its why-not (no parse needed)."""
        return frozenset(t for bases, _ in self._unavailable.values() for t in bases)

    def known_schemas(self) -> dict | None:
        """The schemas the current index was built with (None before the first): for
        callers on the event loop that must not wait for Spark."""
        return getattr(self._index, "schemas", None)

    def index(self):
        """The rewriter's DatamapIndex for the current catalog version. A catalog change
        updates the entries of the datamaps it changed, a change of the schemas takes
        out the datamaps over the tables it changed (see the module docstring); neither
        reads Spark or builds an index here."""
        version = self.catalog.recent_version()   # every SELECT: no SQLite on the hot path
        key = (version, self._schemas.generation)
        index = self._index
        if index is not None and (self._built_for == key or self.reading):
            return index
        with self._guard:
            if self._index is None and not self._schemas.local:
                # the first: empty until the warm-up thread has read the catalog's marks
                # (all of them: O(datamaps)) and the schemas from Spark
                self._index, self.reading = DatamapIndex((), {}, -1), True
                self.builds += 1
                self._start()
                return self._index
            key = (self.catalog.recent_version(), self._schemas.generation)
            if self._index is None or self._built_for != key:
                self._refresh(INLINE_ENTRIES, INLINE_COMPILES)
            return self._index

    def _refresh(self, limit: int, compiles: int = 0) -> None:
        """Update the index (the guard held): at most `limit` entries made and `compiles`
        definitions compiled here; what is left goes to the warm-up thread. The schemas
        are those the schema cache holds (never read from Spark here)."""
        generation = self._schemas.generation
        unready = set(self._unready)
        version, put, drop = self._update(limit)
        old, first = self._index, self._index is None
        if first:                            # datamaps come in as they are ready
            old = DatamapIndex((), {}, version)
            self.builds += 1
        done, self._compiled_now = self._compiled_now, []
        put += [self._unready.pop(n) for n in dict.fromkeys(done) if n in self._unready]
        schemas = old.schemas
        if self._index_generation != generation or self._missing or \
                not all(_has_tables(schemas, c) for c in put):
            schemas, again, out = self._adopt(old, put, drop)
            put += again
            drop += out
            self._index_generation = generation
        usable = [c for c in put if _has_tables(schemas, c)]
        for c in put:                  # in once compiled under schemas with its tables
            self._unready[c.definition.qualified] = c
        ready = self._ready(usable, schemas, compiles)
        for c in ready:
            self._unready.pop(c.definition.qualified, None)
        offered = {id(c) for c in ready}
        drop += [c.definition.qualified for c in put if id(c) not in offered]
        self._index = old.updated(put=ready, drop=drop, version=version,
                                  schemas=None if schemas is old.schemas else schemas)
        self.updates += 1
        self._publish(None if first else self._touched | (unready ^ set(self._unready)))
        self._built_for = (version, generation)
        if self._backlog():
            self._start()

    def _start(self) -> None:
        if not self._closed and self._worker is None:
            self._worker = threading.Thread(target=self._warm, name="datamap-index-warm",
                                            daemon=True)
            self._worker.start()

    def _adopt(self, old, put: list[Candidate], drop: list[str]):
        """The schemas the index is to hold: those of its datamaps' tables and of the
        tables queries asked for (SchemaCache.extra_tables), as the schema cache holds
        them now; the tables it lacks are the warm-up thread's to load (_missing).
        Returns them, the datamaps of `old` to put again under them and those to take
        out (over a table whose schema changed, not compiled under the new one yet)."""
        tables = set(old.by_table) | self._schemas.extra_tables()
        for c in (*put, *self._unready.values()):
            tables.update(c.definition.base_tables)
        schemas = self._schemas.held(sorted(tables))
        now = time.monotonic()        # a table read and still not had is not read again soon
        self._missing = {t for t in tables if _columns(schemas, t) is None
                         and not self._schemas.failed(t)
                         and now - self._read_at.get(t, -RETRY_S) >= RETRY_S}
        stale = {t for db, ts in old.schemas.items() for t in (f"{db}.{n}" for n in ts)
                 if _columns(schemas, t) is not _columns(old.schemas, t)
                 and _columns(schemas, t) != _columns(old.schemas, t)}
        if not stale and all(_columns(old.schemas, t) is not None for t in tables
                             if _columns(schemas, t) is not None):
            return old.schemas, [], []
        skip = {*drop, *(c.definition.qualified for c in put)}
        names = dict.fromkeys(n for t in sorted(stale) for n in old.by_table.get(t, ()))
        forms = DatamapIndex.compiled_forms
        names.update(dict.fromkeys(sorted(n for n in forms.wide.copy() if n in old.candidates)))
        again, out = [], []
        for n in names:
            cand = old.candidates[n]
            if n in skip:
                continue
            if _has_tables(schemas, cand) and forms.ready(cand.definition, schemas):
                again.append(cand)
            else:
                out.append(n)
                self._unready[n] = cand
        return schemas, again, out

    def _backlog(self) -> bool:
        """Work left for the warm-up thread."""
        if self._pending or self._missing:
            return True
        schemas = self._index.schemas if self._index is not None else {}
        return any(_has_tables(schemas, c) for c in self._unready.values())

    def _ready(self, cands: list[Candidate], schemas, compiles: int) -> list[Candidate]:
        """Those of `cands` whose definitions are compiled under `schemas` (the first
        `compiles` others are compiled now); the rest wait in _unready."""
        forms, out = DatamapIndex.compiled_forms, []
        for c in cands:
            if not forms.ready(c.definition, schemas):
                if compiles <= 0:
                    self._unready[c.definition.qualified] = c
                    continue
                compiles -= 1
            out.append(c)
        return out

    def _publish(self, touched: set[str] | None) -> None:
        """What EXPLAIN, the guard and the freshness reads see, as of the new index: new
        dicts (an older index's are kept as they are), made again for the `touched`
        datamaps only (None: all)."""
        entries = self._entries
        if touched is None:
            unavailable, freshness, covered = {}, {}, {}
            touched = entries.keys()
        else:
            unavailable, freshness, covered = (dict(self._unavailable), dict(self._freshness),
                                               dict(self._covered))
        for n in touched:
            unavailable.pop(n, None)
            freshness.pop(n, None)
            covered.pop(n, None)
            e = entries.get(n)
            if e is None:
                continue
            if e.left_out is not None:      # a reason of "" is filled in by unavailable()
                unavailable[n] = e.left_out
            elif n in self._unready:
                bases = e.candidate.definition.base_tables
                unreadable = [t for t in bases if self._schemas.failed(t)]
                unavailable[n] = (bases, f"the schema of {unreadable[0]} could not be read"
                                  if unreadable else "")
            if e.freshness is not None:
                freshness[n] = e.freshness
            if e.covered is not None:
                covered[n] = e.covered
        self._unavailable, self._freshness, self._covered = unavailable, freshness, covered
        self._warming = len(self._unready) + len(self._pending), len(entries)
        self._covered_by[self._index.token] = covered
        while len(self._covered_by) > _KEPT_INDEXES:
            self._covered_by.pop(next(iter(self._covered_by)))

    # ------------------------------------------------------------------ warm-up thread
    def _warm(self) -> None:
        """Make the entries left waiting and compile the definitions not compiled yet,
        publishing a new index every COMPILE_TURN_S; ends when nothing is left."""
        forms, turns = DatamapIndex.compiled_forms, 0
        try:
            if self.reading:         # the first read of every mark, out of the lock
                marks = Marks()
                read = marks.advance(self.catalog)
                with self._guard:
                    self._marks, self._read = marks, read
            while True:
                with self._guard:
                    self._refresh(WORKER_ENTRIES)
                    self.reading = False     # what it read is published, names and all
                    if self._closed or not self._backlog():
                        self._worker = None
                        return
                    missing = sorted(self._missing)
                    schemas = self._index.schemas
                    todo = [c for c in self._unready.values() if _has_tables(schemas, c)]
                if missing:            # from Spark, out of the lock: the next turn adopts
                    self._schemas.load(missing)
                    self._read_at.update(dict.fromkeys(
                        (t for t in missing if t not in self._schemas), time.monotonic()))
                    continue
                # short turns first: the first datamaps answer soon after a restart
                turn = min(COMPILE_TURN_S, FIRST_TURN_S * 2 ** turns)
                turns += 1
                deadline = time.monotonic() + turn
                for cand in todo[:WORKER_PUTS]:
                    if self._closed or time.monotonic() > deadline:
                        break
                    try:
                        forms.get(cand.definition, schemas)
                    except DatamapDefinitionError:
                        pass                  # kept as such: the index reports it broken
                    self._compiled_now.append(cand.definition.qualified)
        except Exception:  # noqa: BLE001 - the next statement's update starts it again
            log.exception("warming the rewrite index failed")
            with self._guard:
                self._worker, self.reading = None, False
                self._built_for = None

    def warmed(self, timeout: float | None = None) -> bool:
        """Wait until every datamap's entry is made and compiled (tests, bench, start-up
        with a bound); True when so."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            self.index()
            worker = self._worker
            if worker is None:
                return not self._backlog()
            if worker is threading.current_thread():   # a hook the warm-up thread ran
                return False
            worker.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if deadline is not None and time.monotonic() >= deadline:
                return self._worker is None and not self._backlog()

    def close(self) -> None:
        """Stop the warm-up thread (it ends after the definition it is compiling)."""
        self._closed = True
        worker = self._worker
        if worker is not None:
            worker.join(5.0)
