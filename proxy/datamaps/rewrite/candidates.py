"""The rewriter's view of the datamaps: which are offered (candidates), which are not and
why (EXPLAIN), and the DatamapIndex built from them, cached on the catalog version and the
schema cache's generation so the SELECT path touches neither SQLite nor Spark."""
from __future__ import annotations

import dataclasses
import threading
from typing import Iterable

from proxy.datamaps.catalog.store import Catalog
from proxy.datamaps.freshness.guard import Covered
from proxy.datamaps.freshness.listing import local_path
from proxy.datamaps.schemas import SchemaCache
from proxy.datamaps.upkeep.stacking import stale_below, table_index
from proxy.datamaps.zones.policy import ZoneReader
from rewriter.api import Candidate

Unavailable = dict[str, tuple[tuple[str, ...], str]]   # "db.name" -> (base tables, reason)
# indexes whose coverage is kept for statements still being decided with them
_KEPT_INDEXES = 8


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

    def candidates(self) -> list[Candidate]:
        """ENABLED, in-sync datamaps with their visible segments and row counts."""
        return self._offer()[0]

    def _offer(self) -> tuple[list[Candidate], Unavailable, dict, dict]:
        """The candidates, and the datamaps left out with why. The rewriter keys datamaps by
        "db.name", so same-named datamaps of two databases are both offered."""
        out = []
        left_out: Unavailable = {}
        freshness: dict[str, tuple[tuple[str, ...], float]] = {}
        covered: dict[str, Covered] = {}
        files_of: dict = {}   # (table, ids) -> local paths; table -> its base segments
        recs = self.catalog.list_datamaps()
        tables = table_index(recs)
        rewrite_off = self.catalog.rewrite_off()
        for rec in recs:
            if rec.definition is None:
                left_out[rec.qualified] = (rec.base_tables, "datamap has no compiled definition")
                continue
            if rec.qualified in rewrite_off:    # still maintained: turned on again, it is fresh
                left_out[rec.qualified] = (rec.base_tables, "query rewrite disabled (ALTER "
                                           f"DATAMAP {rec.qualified} ENABLE QUERY REWRITE)")
                continue
            reason = (self.catalog.unavailable_reason(rec.db, rec.name)
                      or stale_below(self.catalog, rec, tables))
            if reason is None and self._zones.problem:
                why = self._zones.time_dependent(rec)
                if why:
                    reason = f"not used: {why}, and {self._zones.problem}"
            if reason is not None:
                left_out[rec.qualified] = (rec.base_tables, reason)
                continue
            definition = rec.definition
            if definition.qualified != rec.qualified:   # the catalog's name is its identity
                definition = dataclasses.replace(definition, database=rec.db, name=rec.name,
                                                 table=rec.table)
            visible = self.catalog.visible_segments(rec.db, rec.name)
            freshness[rec.qualified] = (tuple(s.id for s in visible),
                                        max((s.load_start for s in visible), default=0.0))
            # from the same read of the visible segments as the candidate: a publish in
            # between must not make the guard judge segments the rewrite does not read
            built_from: dict[str, set[str]] = {}
            for seg in visible:
                for t, ids in seg.extra_info.items():
                    built_from.setdefault(t, set()).update(ids)
            covered[rec.qualified] = Covered(
                {t: self._files_of(t, frozenset(ids), files_of) for t, ids in
                 built_from.items()},
                freshness[rec.qualified][1], definition)
            out.append(Candidate(definition,
                                 rows=sum(s.rows or 0 for s in visible),
                                 one_row_per_group=len(visible) <= 1,
                                 segments=tuple(s.id for s in visible),
                                 storage=definition.storage))
        return out, left_out, freshness, covered

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
        from rewriter import DatamapIndex
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
        """EXPLAIN only: datamaps over any of `tables` ("db.table") that the current index
        was not offered (DISABLED, not in sync, time zone unknown), "db.name" -> reason.
        Read from what the last index build saw: nothing is computed on the SELECT path."""
        wanted = set(tables)
        return {name: reason for name, (bases, reason) in self._unavailable.items()
                if wanted.intersection(bases)}

    def known_schemas(self) -> dict | None:
        """The schemas the current index was built with (None before the first): for
        callers on the event loop that must not wait for Spark."""
        return getattr(self._index, "schemas", None)

    def index(self):
        """The rewriter's DatamapIndex for the current catalog version (rebuilt on change)."""
        version = self.catalog.recent_version()   # every SELECT: no SQLite on the hot path
        key = (version, self._schemas.generation)
        if self._index is not None and self._built_for == key:
            return self._index
        with self._guard:
            key = (version, self._schemas.generation)
            if self._index is None or self._built_for != key:
                from rewriter import DatamapIndex
                cands, self._unavailable, self._freshness, self._covered = self._offer()
                tables = {t for c in cands for t in c.definition.base_tables}
                tables |= self._schemas.extra_tables()  # only what is loaded: never Spark
                self._index = DatamapIndex(cands, self._schemas.schemas(sorted(tables)),
                                           version)
                self._covered_by[self._index.token] = self._covered
                while len(self._covered_by) > _KEPT_INDEXES:
                    self._covered_by.pop(next(iter(self._covered_by)))
                self._built_for = key
            return self._index
