"""The rewriter's view of the datamaps: which are offered (candidates), which are not and
why (EXPLAIN), and the DatamapIndex built from them, cached on the catalog version and the
schema cache's generation so the SELECT path touches neither SQLite nor Spark.

A catalog change does not rebuild the index: one read of the catalog (rewrite_marks) tells
which datamaps changed (their row, their visible segments, their base tables' live
segments, whether rewrite is off, and the same of every datamap below a stacked one), and
only those entries are made again and swapped into a new index (DatamapIndex.updated);
the others are shared as they are. The new index replaces the old one in one assignment,
so a statement gets either the old index or the new one, and the new one never holds a
changed datamap's old segments."""
from __future__ import annotations

import dataclasses
import json
import threading
from typing import Iterable

from proxy.datamaps.catalog.records import record_from_row
from proxy.datamaps.catalog.store import Catalog
from proxy.datamaps.freshness.guard import Covered
from proxy.datamaps.freshness.listing import local_path
from proxy.datamaps.schemas import SchemaCache
from proxy.datamaps.upkeep.stacking import stale_below
from proxy.datamaps.zones.policy import ZoneReader
from rewriter import DatamapIndex
from rewriter.api import Candidate

Unavailable = dict[str, tuple[tuple[str, ...], str]]   # "db.name" -> (base tables, reason)
# indexes whose coverage is kept for statements still being decided with them
_KEPT_INDEXES = 8


@dataclasses.dataclass(frozen=True)
class _Entry:
    """One datamap as the index saw it: offered (`candidate`) or left out (`left_out`)."""
    mark: object                 # its catalog marks when made; None: make it again next time
    candidate: Candidate | None = None
    left_out: tuple[tuple[str, ...], str] | None = None
    freshness: tuple[tuple[str, ...], float] | None = None
    covered: Covered | None = None


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
        # Reentrant: the first index() in remote mode opens the pipeline session, whose
        # on_open hook (proxy/app.py) warms the index again in the same thread.
        self._guard = threading.RLock()
        self._entries: dict[str, _Entry] = {}
        self._made_with: object = None     # what every entry depends on (the zone problem)
        self.updates = 0                   # index updates and full builds: tests, bench
        self.builds = 0
        self.last_changed: tuple[str, ...] = ()   # datamaps the last update made again

    def candidates(self) -> list[Candidate]:
        """ENABLED, in-sync datamaps with their visible segments and row counts."""
        self.index()
        entries = self._entries
        return [e.candidate for e in entries.values() if e.candidate is not None]

    def _marks(self) -> tuple[int, dict[str, tuple], dict, frozenset[str]]:
        """(catalog version, "db.name" -> everything its entry is made from, as of that
        version, "db.name" -> its catalog row, the datamaps whose rewrite is off; read
        before the rest, so no newer). A stacked datamap's marks hold those of
        the datamaps below it: a publish below changes whether it is fresh."""
        rewrite_off = self.catalog.rewrite_off()
        version, rows, base = self.catalog.rewrite_marks()
        bases: dict[str, tuple[str, ...]] = {}
        own: dict[str, tuple] = {}
        for name, (row, segs) in rows.items():
            bases[name] = tables = tuple(json.loads(row["base_tables"]))
            own[name] = (tuple(row), segs, tuple(base.get(t, ()) for t in tables),
                         name in rewrite_off)
        by_table = {f"{n}_table": n for n in rows}
        marks: dict[str, tuple] = {}

        def mark(name: str, depth: int = 0) -> tuple:
            if name not in marks:
                lower = [by_table[t] for t in bases[name] if t in by_table]
                marks[name] = (own[name], tuple(mark(n, depth + 1) for n in lower
                                                if depth < 64 and n != name))
            return marks[name]

        for name in rows:
            mark(name)
        return version, marks, {n: row for n, (row, _) in rows.items()}, rewrite_off

    def _entry(self, rec, mark, tables: dict[str, str], rewrite_off: frozenset[str],
               files_of: dict) -> _Entry:
        """Whether datamap `rec` is offered, read from the catalog now."""
        if rec.definition is None:
            return _Entry(mark, left_out=(rec.base_tables, "datamap has no compiled definition"))
        if rec.qualified in rewrite_off:    # still maintained: turned on again, it is fresh
            return _Entry(mark, left_out=(rec.base_tables, "query rewrite disabled (ALTER "
                                          f"DATAMAP {rec.qualified} ENABLE QUERY REWRITE)"))
        reason = (self.catalog.unavailable_reason(rec.db, rec.name)
                  or stale_below(self.catalog, rec, tables))
        if reason is None and self._zones.problem:
            why = self._zones.time_dependent(rec)
            if why:
                reason = f"not used: {why}, and {self._zones.problem}"
        if reason is not None:
            return _Entry(mark, left_out=(rec.base_tables, reason))
        definition = rec.definition
        if definition.qualified != rec.qualified:   # the catalog's name is its identity
            definition = dataclasses.replace(definition, database=rec.db, name=rec.name,
                                             table=rec.table)
        visible = self.catalog.visible_segments(rec.db, rec.name)
        freshness = (tuple(s.id for s in visible),
                     max((s.load_start for s in visible), default=0.0))
        # from the same read of the visible segments as the candidate: a publish in
        # between must not make the guard judge segments the rewrite does not read
        built_from: dict[str, set[str]] = {}
        for seg in visible:
            for t, ids in seg.extra_info.items():
                built_from.setdefault(t, set()).update(ids)
        covered = Covered({t: self._files_of(t, frozenset(ids), files_of)
                           for t, ids in built_from.items()}, freshness[1], definition)
        return _Entry(mark, Candidate(definition, rows=sum(s.rows or 0 for s in visible),
                                      one_row_per_group=len(visible) <= 1,
                                      segments=tuple(s.id for s in visible),
                                      storage=definition.storage),
                      freshness=freshness, covered=covered)

    def _update(self) -> tuple[list[Candidate], list[str]]:
        """Make again the entries of the datamaps that changed since they were made; returns
        (candidates to put into the index, datamaps to drop from it)."""
        made_with = self._zones.problem, (self._schemas.generation if self._zones.problem
                                          else None)
        if made_with != self._made_with:    # a time zone problem judges every datamap
            self._entries, self._made_with = {}, made_with
        version, marks, rows, rewrite_off = self._marks()
        changed = [n for n, m in marks.items()
                   if n not in self._entries or self._entries[n].mark != m]
        gone = [n for n in self._entries if n not in marks]
        tables = {f"{n}_table": n for n in marks}
        files_of: dict = {}
        made = {}
        for n in changed:
            made[n] = self._entry(record_from_row(rows[n]), marks[n], tables, rewrite_off,
                                  files_of)
        if changed and self.catalog.version() != version:
            # the catalog changed while the entries were read: they may be newer than
            # their marks, so make them again next time rather than trust the marks
            made = {n: dataclasses.replace(e, mark=None) for n, e in made.items()}
        put, drop = [], list(gone)
        entries = dict(self._entries)     # a new dict: candidates() reads without the lock
        for n in gone:
            entries.pop(n)
        for n, e in made.items():
            entries[n] = e
            if e.candidate is not None:
                put.append(e.candidate)
            else:
                drop.append(n)
        self._entries = entries
        self.last_changed = tuple(changed)
        return put, drop

    def _files_of(self, table: str, ids: frozenset[str], memo: dict) -> frozenset[str] | None:
        """Local paths of the files of base segments `ids` of `table` (None when any is not
        on the local file system); equal sets are one object, so the guard's memo holds.
        `memo` is this index build's: it also keeps each table's base segments."""
        key = (table, ids)
        if key not in memo:
            if table not in memo or not ids <= {s.id for s in memo[table]}:
                # one catalog read per table, however many datamaps; again when a segment
                # published since that read was built from a base segment newer than it
                memo[table] = self.catalog.base_segments(table)
            paths = [local_path(f) for s in memo[table] if s.id in ids for f in s.files]
            memo[key] = None if any(p is None for p in paths) else frozenset(paths)
        return memo[key]

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
        cands = [dataclasses.replace(c, delta=deltas[n], one_row_per_group=False)
                 if n in deltas else c for n, c in index.candidates.items()]
        found = DatamapIndex(cands, index.schemas, index.version)
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
        return {name: reason for name, (bases, reason) in self._unavailable.items()
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
        updates the entries of the datamaps it changed (see the module docstring); a
        change of the schemas builds the index again over the same entries (their compiled
        forms are kept)."""
        version = self.catalog.recent_version()   # every SELECT: no SQLite on the hot path
        key = (version, self._schemas.generation)
        if self._index is not None and self._built_for == key:
            return self._index
        with self._guard:
            key = (version, self._schemas.generation)
            if self._index is None or self._built_for != key:
                generation = self._schemas.generation
                put, drop = self._update()
                self._unavailable = {n: e.left_out for n, e in self._entries.items()
                                     if e.left_out is not None}
                self._freshness = {n: e.freshness for n, e in self._entries.items()
                                   if e.freshness is not None}
                self._covered = {n: e.covered for n, e in self._entries.items()
                                 if e.covered is not None}
                old = self._index
                tables = {t for c in put for t in c.definition.base_tables}
                if (old is not None and self._built_for[1] == generation
                        and all(t.partition(".")[2] in old.schemas.get(t.partition(".")[0], {})
                                for t in tables)):
                    self._index = old.updated(put=put, drop=drop, version=version)
                    self.updates += 1
                else:
                    cands = [e.candidate for e in self._entries.values()
                             if e.candidate is not None]
                    tables = {t for c in cands for t in c.definition.base_tables}
                    tables |= self._schemas.extra_tables()  # only what is loaded: never Spark
                    self._index = DatamapIndex(cands, self._schemas.schemas(sorted(tables)),
                                               version)
                    self.builds += 1
                self._covered_by[self._index.token] = self._covered
                while len(self._covered_by) > _KEPT_INDEXES:
                    self._covered_by.pop(next(iter(self._covered_by)))
                self._built_for = (version, generation)
            return self._index
