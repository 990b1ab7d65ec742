"""A datamap's entry in the rewrite index, read from the catalog: its change marks (what
the entry is made from, so the provider, proxy/datamaps/rewrite/candidates.py, knows which
entries a catalog change made stale) and the entry itself, offered as a rewriter Candidate
with its freshness and what it covers, or left out with the reason EXPLAIN shows.

Reads are few and small: the marks are one read of the catalog's change marks (never
definitions or segments), records are read one by one for the changed datamaps only, and
each base table's live segments once per update (`files_of`, the update's memo)."""
from __future__ import annotations

import dataclasses
import json

from proxy.datamaps.catalog.segments import unavailable_because
from proxy.datamaps.catalog.store import Catalog
from proxy.datamaps.freshness.guard import Covered
from proxy.datamaps.freshness.listing import local_path
from proxy.datamaps.upkeep.stacking import stale_below
from proxy.datamaps.zones.policy import ZoneReader
from rewriter.api import Candidate


@dataclasses.dataclass(frozen=True)
class Entry:
    """One datamap as the index saw it: offered (`candidate`) or left out (`left_out`)."""
    mark: object                 # its catalog marks when made; None: make it again next time
    candidate: Candidate | None = None
    left_out: tuple[tuple[str, ...], str] | None = None
    freshness: tuple[tuple[str, ...], float] | None = None
    covered: Covered | None = None
    waiting: bool = False        # not made yet: the warm-up thread makes it (left_out: tables)


class Marks:
    """The catalog's change marks as of `version`, kept current by reading only the marks
    written since (Catalog.rewrite_changes): "db.name" -> everything its entry is made
    from (its own change, its base tables' live segments, its rewrite switch, and the same
    of every datamap below a stacked one: a publish below changes whether it is fresh)."""

    def __init__(self):
        self.version = -1
        self.marks: dict[str, tuple] = {}
        self.bases: dict[str, tuple[str, ...]] = {}        # "db.name" -> its base tables
        self.off: set[str] = set()                         # rewrite switched off
        self.tables: dict[str, str] = {}                   # "db.<name>_table" -> "db.name"
        self._own: dict[str, int] = {}                     # the version of its last change
        self._base: dict[str, int] = {}                   # base table -> its last change
        self._over: dict[str, set[str]] = {}               # table -> the datamaps over it

    def advance(self, catalog: Catalog) -> dict[str, None]:
        """Read the marks written since `version`; returns the datamaps whose marks may
        have changed (dropped ones too), in the catalog's order. The cost is that of what
        changed and of the datamaps above it."""
        version, rows, base, dropped = catalog.rewrite_changes(self.version)
        touched = dict.fromkeys(n for n in dropped if n in self._own)
        for n in touched:
            self._forget(n)
        parsed: dict[str, tuple[str, ...]] = {}   # most datamaps share their tables' text
        for n, (changed, text, off) in rows.items():
            if n in self._own:
                self._forget(n)
            self._own[n] = changed
            tables = parsed.get(text)
            if tables is None:
                tables = parsed[text] = tuple(json.loads(text))
            self.bases[n] = tables
            for t in tables:
                self._over.setdefault(t, set()).add(n)
            self.tables[f"{n}_table"] = n
            (self.off.add if off else self.off.discard)(n)
            touched[n] = None
        self._base.update(base)
        for t in base:
            touched.update(dict.fromkeys(sorted(self._over.get(t, ()))))
        todo = list(touched)                    # and every datamap stacked on one of them
        while todo:
            for n in sorted(self._over.get(f"{todo.pop()}_table", ())):
                if n not in touched:
                    touched[n] = None
                    todo.append(n)
        for n in touched:
            self.marks.pop(n, None)
        seen: dict[tuple[str, ...], tuple] = {}   # base tables -> their marks, this read
        for n in touched:
            if n in self._own:
                self._mark(n, seen)
        self.version = version
        return touched

    def _forget(self, name: str) -> None:
        for t in self.bases.pop(name, ()):
            self._over.get(t, set()).discard(name)
        self._own.pop(name, None)
        self.off.discard(name)
        self.tables.pop(f"{name}_table", None)

    def _mark(self, name: str, seen: dict, depth: int = 0) -> tuple:
        known = self.marks.get(name)
        if known is None:
            bases = self.bases[name]
            of_bases = seen.get(bases)
            if of_bases is None:
                lower = [self.tables[t] for t in bases if t in self.tables]
                of_bases = seen[bases] = (tuple(self._base.get(t, 0) for t in bases), lower)
            own = (self._own[name], of_bases[0], name in self.off)
            known = self.marks[name] = (own, tuple(
                self._mark(n, seen, depth + 1) for n in of_bases[1]
                if depth < 64 and n != name)) if of_bases[1] else (own,)
        return known


def make_entry(catalog: Catalog, zones: ZoneReader, rec, mark, tables: dict[str, str],
               rewrite_off: frozenset[str], files_of: dict) -> Entry:
    """Whether datamap `rec` is offered, read from `catalog` now."""
    if rec.definition is None:
        return Entry(mark, left_out=(rec.base_tables, "datamap has no compiled definition"))
    if rec.qualified in rewrite_off:    # still maintained: turned on again, it is fresh
        return Entry(mark, left_out=(rec.base_tables, "query rewrite disabled (ALTER "
                                     f"DATAMAP {rec.qualified} ENABLE QUERY REWRITE)"))
    visible = catalog.visible_segments(rec.db, rec.name)
    reason = (unavailable_because(rec, visible,
                                  lambda t, ids: _base_of(catalog, t, ids, files_of))
              or stale_below(catalog, rec, tables))
    if reason is None and zones.problem:
        why = zones.time_dependent(rec)
        if why:
            reason = f"not used: {why}, and {zones.problem}"
    if reason is not None:
        return Entry(mark, left_out=(rec.base_tables, reason))
    definition = rec.definition
    if definition.qualified != rec.qualified:   # the catalog's name is its identity
        definition = dataclasses.replace(definition, database=rec.db, name=rec.name,
                                         table=rec.table)
    freshness = (tuple(s.id for s in visible),
                 max((s.load_start for s in visible), default=0.0))
    # from the same read of the visible segments as the candidate: a publish in
    # between must not make the guard judge segments the rewrite does not read
    built_from: dict[str, set[str]] = {}
    for seg in visible:
        for t, ids in seg.extra_info.items():
            built_from.setdefault(t, set()).update(ids)
    covered = Covered({t: _files_of(catalog, t, frozenset(ids), files_of)
                       for t, ids in built_from.items()}, freshness[1], definition)
    return Entry(mark, Candidate(definition, rows=sum(s.rows or 0 for s in visible),
                                 one_row_per_group=len(visible) <= 1,
                                 segments=tuple(s.id for s in visible),
                                 storage=definition.storage),
                 freshness=freshness, covered=covered)


def read_records(catalog: Catalog, names: list[str]) -> dict:
    """The catalog records of datamaps `names` ("db.name"), read one by one: never all
    rows (definitions are most of the catalog's bytes)."""
    out = {}
    for n in names:
        db, _, name = n.partition(".")
        rec = catalog.get_datamap(db, name)
        if rec is not None:
            out[n] = rec
    return out


def _files_of(catalog: Catalog, table: str, ids: frozenset[str],
              memo: dict) -> frozenset[str] | None:
    """Local paths of the files of base segments `ids` of `table` (None when any is not
    on the local file system); equal sets are one object, so the guard's memo holds.
    `memo` is this index build's: it also keeps each table's base segments."""
    key = (table, ids)
    if key not in memo:
        paths = [local_path(f) for s in _base_of(catalog, table, ids, memo) if s.id in ids
                 for f in s.files]
        memo[key] = None if any(p is None for p in paths) else frozenset(paths)
    return memo[key]


def _base_of(catalog: Catalog, table: str, ids, memo: dict) -> list:
    """The live base segments of `table`: one catalog read per table in an update,
    however many datamaps; read again when a datamap covers a segment newer than that
    read (it was published since)."""
    if table not in memo or not ids <= {s.id for s in memo[table]}:
        memo[table] = catalog.base_segments(table)
    return memo[table]
