"""The datamap advisor: suggestions (create, extend, drop) and what-if replays over the
query log, for SHOW DATAMAP SUGGESTIONS, EXPLAIN WHATIF, `datamap-proxy advise` and the
console (docs/advisor.md).

    advisor = Advisor(service, querylog, settings.advisor)
    advisor.suggest() -> list[Suggestion]
    advisor.what_if("CREATE DATAMAP x AS SELECT ...", current_db) -> WhatIf

Every method blocks (the catalog, Spark for sampled statistics, the rewriter over every
logged shape): callers run it in a worker thread. The planning itself is pure
(rewriter/advise*.py); this module gathers its inputs: the window of the query log
(`[advisor] window`), the base tables' schemas (the datamap service's cache), sampled
statistics (pipeline/stats.py on the pipeline session, `[advisor] sample_rows` rows per
table, kept STATS_TTL_S), the current datamaps, and their maintenance history (the
catalog's events).
"""
from __future__ import annotations

import dataclasses
import logging
import threading
import time
from dataclasses import dataclass
from statistics import median
from typing import Callable

from pipeline.stats import TableSample
from proxy.config import AdvisorSettings
from proxy.datamaps.ddl import parser as ddl
from proxy.datamaps.ddl.commands import referenced_tables
from proxy.errors import ClientError
from proxy.logsafe import safe
from rewriter import compile_datamap
from rewriter.advise import (Proposal, Shape, estimate_rows, extensions, fold, plan, replay,
                             statement_profile)
from rewriter.api import Candidate, DatamapDefinitionError
from rewriter.distinct import SketchDefinitionError, sketch_definition

log = logging.getLogger("proxy.advisor")

STATS_TTL_S = 600.0
MAINTENANCE_KINDS = ("built", "refreshed", "compacted", "built-from")
NO_LOG = "55000"


@dataclass(frozen=True)
class Suggestion:
    kind: str                        # create | extend | drop
    datamap: str                     # the datamap's name ("db.name" for extend / drop)
    sql: str                         # CREATE DATAMAP ... / DROP DATAMAP ...
    queries: int
    base_seconds: float
    est_saving_s: float
    est_rows: int | None
    est_maintenance_s: float | None
    reason: str


@dataclass(frozen=True)
class WhatIf:
    datamap: str
    queries: int
    hits: int
    gained: int
    hit_rate: float
    est_saving_s: float
    est_maintenance_s: float | None
    est_rows: int | None
    examples: list[tuple[str, int]]


class SparkSizes:
    """rewriter.advise.candidates.Sizes over sampled statistics, cached per (table, expressions)."""

    def __init__(self, spark: Callable, sample_rows: int, clock=time.monotonic):
        self._spark, self.sample_rows, self._clock = spark, sample_rows, clock
        self._values: dict[tuple, tuple[float, int]] = {}
        self._samples: dict[str, object] = {}
        self._lock = threading.Lock()

    def _cached(self, key, compute):
        now = self._clock()
        with self._lock:
            hit = self._values.get(key)
        if hit is not None and now - hit[0] < STATS_TTL_S:
            return hit[1]
        try:
            value = compute()
        except Exception as e:  # noqa: BLE001 - no statistics: the planner assumes a share
            log.warning("advisor: no statistics for %s: %s", key[0], safe(e, 200))
            return None
        with self._lock:
            self._values[key] = (now, value)
        return value

    def _sample(self, table: str, alias: str):
        s = self._samples.get(table)
        if s is None:
            s = self._samples[table] = TableSample(self._spark(), table, alias, self.sample_rows)
        return s

    def rows(self, table: str) -> int | None:
        return self._cached((table,), lambda: self._sample(table, table.split(".", 1)[1]).rows)

    def distinct(self, table: str, alias: str, exprs: frozenset[str]) -> int | None:
        return self._cached((table, exprs), lambda: self._sample(table, alias).distinct(exprs))

    def release(self) -> None:
        """Unpersist the samples of this run (the numbers stay cached)."""
        samples, self._samples = self._samples, {}
        for s in samples.values():
            try:
                s.close()
            except Exception:  # noqa: BLE001 - the session may be stopping
                log.debug("unpersisting a sample failed", exc_info=True)


class Advisor:
    def __init__(self, service, querylog, settings: AdvisorSettings, sizes=None,
                 clock: Callable[[], float] = time.time):
        self.service = service
        self.querylog = querylog          # proxy/querylog.QueryLog (reader API), or None
        self.settings = settings
        self.sizes = sizes or SparkSizes(service.spark_provider, settings.sample_rows)
        self._clock = clock
        self._lock = threading.Lock()     # one advisor run at a time: they share the samples

    # -- inputs -----------------------------------------------------------------------
    def _shapes(self) -> list[Shape]:
        if self.querylog is None:
            raise ClientError("The datamap advisor reads the query log, which is off "
                              "([querylog] enabled = false)", NO_LOG)
        since = self._clock() - self.settings.window_s
        return fold(self.querylog.entries(since))

    def _schemas(self, shapes: list[Shape], extra: tuple[str, ...] = ()) -> dict:
        tables: dict[str, None] = dict.fromkeys(extra)
        for sh in shapes:
            try:
                tables.update(dict.fromkeys(referenced_tables(sh.statement, sh.current_db)))
            except ClientError:
                continue
        out: dict = {}
        for t in tables:                  # one unreadable table must not hide the others
            try:
                got = self.service.schemas([t])
            except ClientError:
                continue
            for db, ts in got.items():
                out.setdefault(db, {}).update(ts)
        return out

    def _history(self, since: float) -> tuple[dict[str, float], float | None]:
        """Maintenance seconds per datamap since `since`; seconds per stored row overall."""
        catalog = self.service.catalog
        spent: dict[str, float] = {}
        secs = rows = 0.0
        for rec in catalog.list_datamaps():
            for ev in catalog.events(rec.db, rec.name):
                if ev.kind not in MAINTENANCE_KINDS or ev.seconds is None:
                    continue
                if ev.at >= since:
                    spent[rec.qualified] = spent.get(rec.qualified, 0.0) + ev.seconds
                if ev.rows:
                    secs, rows = secs + ev.seconds, rows + ev.rows
        return spent, (secs / rows if rows else None)

    # -- suggestions --------------------------------------------------------------------
    def suggest(self) -> list[Suggestion]:
        with self._lock:
            try:
                return self._suggest()
            finally:
                release = getattr(self.sizes, "release", None)
                if release:
                    release()

    def _suggest(self) -> list[Suggestion]:
        now = self._clock()
        shapes = self._shapes()
        schemas = self._schemas(shapes)
        existing = self.service.candidates()
        taken = {r.qualified for r in self.service.catalog.list_datamaps()}
        spent, per_row = self._history(now - self.settings.window_s)
        proposals = plan(shapes, schemas, self.sizes, self.settings.max_suggestions, taken,
                         existing)
        proposals += extensions(shapes, existing, schemas, self.sizes)
        out = [self._suggestion(p, per_row) for p in proposals]
        out += self._drops(shapes, spent, now)
        out.sort(key=lambda s: (-s.est_saving_s, s.kind, s.datamap))
        return out[:self.settings.max_suggestions]

    def _suggestion(self, p: Proposal, per_row: float | None) -> Suggestion:
        maint = p.est_rows * per_row if p.est_rows is not None and per_row is not None else None
        n, secs = p.queries, p.base_seconds
        if p.kind == "extend":
            reason = (f"adding {', '.join(p.added)} to datamap {p.replaces} would have answered "
                      f"{n} queries ({secs:.1f} s) this window; replaces it (DROP DATAMAP "
                      f"{p.replaces} first)")
            name = p.replaces or p.name
        else:
            reason = (f"answers {n} queries of {len(p.shapes)} shapes that read the base "
                      f"tables for {secs:.1f} s this window")
            name = f"{p.database}.{p.name}"
        return Suggestion(p.kind, name, f"CREATE DATAMAP {p.name} AS {p.select_sql}", n, secs,
                          round(p.est_saving_s, 3), p.est_rows, maint, reason)

    def _drops(self, shapes: list[Shape], spent: dict[str, float], now: float) -> list[Suggestion]:
        """Datamaps older than half the window whose maintenance cost more than they saved."""
        out = []
        for rec in self.service.catalog.list_datamaps():
            cost = spent.get(rec.qualified, 0.0)
            if cost <= 0 or rec.created_at > now - self.settings.window_s / 2:
                continue
            hits, saved, known = 0, 0.0, True
            for sh in shapes:
                hits += sh.datamaps.get(rec.qualified, 0)
                by = sh.saved_by(rec.qualified)
                if by is None:
                    known = False         # no base-table time to compare with
                else:
                    saved += by
            if (hits and not known) or saved >= cost:
                continue
            out.append(Suggestion(
                "drop", rec.qualified, f"DROP DATAMAP {rec.qualified}", hits, 0.0,
                round(cost - saved, 3), None, cost,
                f"maintenance took {cost:.1f} s this window (builds, refreshes, compactions) "
                f"but its {hits} hits saved an estimated {saved:.1f} s (an estimate: the "
                "base-table time of their shapes, scaled by the base tables' rows, minus "
                "their own)"))
        return out

    # -- what-if ------------------------------------------------------------------------
    def what_if(self, create_sql: str, current_db: str) -> WhatIf:
        try:
            stmt = ddl.parse(create_sql)
        except ddl.DdlError as e:
            raise ClientError(e.message, e.sqlstate) from None
        if not isinstance(stmt, ddl.CreateDatamap):
            raise ClientError("what-if takes a CREATE DATAMAP or CREATE MATERIALIZED VIEW "
                              f"statement with a SELECT, not: {safe(create_sql, 80)}", "42000")
        return self.what_if_statement(stmt, current_db)

    def what_if_statement(self, stmt: ddl.CreateDatamap, current_db: str) -> WhatIf:
        with self._lock:
            try:
                return self._what_if(stmt, current_db)
            finally:
                release = getattr(self.sizes, "release", None)
                if release:
                    release()

    def _what_if(self, stmt: ddl.CreateDatamap, current_db: str) -> WhatIf:
        shapes = self._shapes()
        tables = tuple(referenced_tables(stmt.select_sql, current_db, f"datamap {stmt.name}"))
        schemas = self._schemas(shapes, tables)
        try:      # as CREATE DATAMAP compiles it (proxy/datamaps/ddl/commands.py)
            d = compile_datamap(stmt.name.name, sketch_definition(stmt.select_sql, stmt.props),
                                schemas, current_db)
        except SketchDefinitionError as e:
            raise ClientError(f"Datamap {stmt.name.qualified(current_db)}: {e}", "42000") from None
        except DatamapDefinitionError as e:
            message = str(e) if str(stmt.name) in str(e) else f"{e} (datamap {stmt.name})"
            raise ClientError(message, e.sqlstate) from None
        db = stmt.name.db or d.database
        d = dataclasses.replace(d, database=db, table=f"{db}.{stmt.name.name}_table")
        prof = statement_profile(d.qualified_sql or d.select_sql, d.database, schemas)
        rows = base_rows = None
        if not isinstance(prof, str):
            rows, base_rows = estimate_rows(prof.graph, prof.dims, prof.dim_columns, self.sizes)
        existing = [c for c in self.service.candidates()
                    if c.definition.qualified != d.qualified]
        r = replay(shapes, existing, Candidate(d, rows=rows), schemas)
        answers = [sh.answer_mean_s for sh in shapes if sh.answer_mean_s is not None]
        saving = 0.0
        for sh, _n in r.examples:
            if not sh.base_count:
                continue
            if rows is not None and base_rows:
                answer = sh.base_mean_s * min(1.0, rows / base_rows)
            else:
                answer = median(answers) if answers else 0.0
            saving += sh.base_count * max(0.0, sh.base_mean_s - answer)
        _, per_row = self._history(self._clock() - self.settings.window_s)
        maint = rows * per_row if rows is not None and per_row is not None else None
        return WhatIf(d.qualified, r.examined, r.hits, r.gained,
                      r.hits / r.examined if r.examined else 0.0, round(saving, 3), maint, rows,
                      [(sh.text, n) for sh, n in r.examples[:5]])
