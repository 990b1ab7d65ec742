"""Router StatementHandlers for datamaps (proxy/routing/router.py).

`DatamapDdlHandler`: datamap DDL and EXPLAIN -> Local decisions whose runners call the
DatamapService in a thread (builds take long; the protocol layer reports RUNNING). EXPLAIN
names a datamap bare when it is in the session's current database, else "db.name"; on a
miss it also lists the datamaps over the query's tables that were no candidates (DISABLED,
not in sync) with the catalog's reason. EXPLAIN's lines are made in proxy/datamaps/explain.py.
Syntax errors are rejected at once (42000).

`DatamapSelectHandler`: a query -> Rewrite(sql) when the rewriter answers it from ENABLED,
in-sync datamaps (or translates timeseries()); otherwise None, so the next handler or the
default PassThrough forwards it unchanged. Runs where the Router decides (the event loop
for short statements, a worker for long ones): it only reads the catalog version and,
when that changed, rebuilds the index (a few small SQLite reads). A statement over
`[datamaps] rewrite_max_sql_bytes` is not parsed at all: it is forwarded unchanged, or
rejected (54001) when it calls timeseries(), which only a parse could translate.

Statements nested too deeply for Python's recursion limit (thousands of parentheses) are
the client's input, not a proxy bug: datamap DDL over one fails with 54001 "statement too
complex"; a query over one is forwarded unchanged (the rewriter logs one WARNING line).

`DatamapLoadHandler` (proxy/datamaps/loads.py): writes and file-changing DDL on base
tables re-sync their datamaps after Spark ran them.

With a `pruner` (proxy/datamaps/indexes/pruning.py), the SQL the SELECT handler is about to send
(rewritten or not) skips the files index datamaps rule out, and EXPLAIN shows that SQL
and one `Pruned by index datamap` line per index (docs/indexes.md).

Register them in this order: DatamapDdlHandler, DatamapLoadHandler, DatamapSelectHandler.
"""
from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import re
from typing import Callable

from proxy.routing.classify import Kind, classify, over_limit
from proxy.config import DatamapsSettings
from proxy.datamaps.catalog.records import display_name
from proxy.datamaps.ddl import parser as ddl
from proxy.datamaps.explain import (add_unavailable, approximate_lines, compensated_line,
                                    explain_header, served_lines)
from proxy.datamaps.freshness import answer as fresh_answer
from proxy.datamaps.loads import DatamapLoadHandler, run_job as _job
from proxy.datamaps.rewrite.isolated import IsolatedRewriter
from proxy.datamaps.rewrite.spark_sql import translate_only
from proxy.datamaps.service import DatamapService, referenced_tables
from proxy.datamaps.verify.auditor import Auditor
from proxy.errors import ClientError
from proxy.logsafe import safe
from proxy.routing.router import (
    Decision, Local, LocalResult, PassThrough, Reject, Rewrite, Serve, StatementContext,
)
from proxy.datamaps.indexes.pruning import names_temp_view, temp_views
from proxy.serving import Served
from proxy.routing.session_keys import BLOCKED_KEY, approximate_on, prune_on, rewrite_on
from rewriter.api import RewriteResult

log = logging.getLogger("proxy.datamaps")

__all__ = ["DatamapDdlHandler", "DatamapLoadHandler", "DatamapSelectHandler", "over_limit",
           "rewrite_enabled"]

PLAN_COLUMNS = (("plan", "string"),)
MAX_SQL_BYTES = DatamapsSettings.rewrite_max_sql_bytes
TOO_COMPLEX = "54001"


def too_complex(what: str) -> str:
    return (f"Statement too complex: {what} is nested too deeply to analyse "
            "(e.g. thousands of parentheses)")


def rewrite_enabled(ctx: StatementContext) -> bool:
    """Datamaps answer this session: not switched off by `SET datamap.rewrite.enabled=false`,
    and no result-affecting setting (time zone, ANSI, ...) changed (proxy/routing/statements.py)."""
    return BLOCKED_KEY not in ctx.conf and rewrite_on(ctx.conf)


class DatamapDdlHandler:
    def __init__(self, service: DatamapService, max_sql_bytes: int | None = MAX_SQL_BYTES,
                 serving=None, audit: Auditor | None = None, max_staleness_s: float = 0.0,
                 pruner=None,
                 advise: Callable[[ddl.ShowSuggestions | ddl.ExplainWhatIf, str],
                                  LocalResult] | None = None):
        self.service = service
        self.max_sql_bytes = max_sql_bytes
        # SHOW DATAMAP SUGGESTIONS, EXPLAIN WHATIF (statement, current database) -> result,
        # blocking; the advisor's (proxy/advisor/results.py `answers`), None: not running
        self.advise = advise
        self.serving = serving        # proxy.serving.ServingTier: EXPLAIN says who answers
        self.pruner = pruner          # indexes.pruning.Pruner: index datamaps skip files
        self.audit = audit or Auditor(service, serving=serving)   # AUDIT DATAMAP
        self.max_staleness_s = max_staleness_s

    def __call__(self, ctx: StatementContext, statement: str) -> Decision | None:
        try:
            stmt = ddl.parse(statement)
        except ddl.DdlError as e:
            return Reject(e.message, e.sqlstate)
        except RecursionError:           # a legacy provider's query is analysed here
            return Reject(too_complex("the datamap query"), TOO_COMPLEX)
        if stmt is None:
            return None
        if isinstance(stmt, ddl.Explain):
            return Local(self._explain_runner(ctx, stmt), note="datamap:explain")
        if isinstance(stmt, (ddl.ShowSuggestions, ddl.ExplainWhatIf)):
            return self._advise(ctx, statement, stmt)
        method = {
            ddl.CreateDatamap: self.service.create, ddl.DropDatamap: self.service.drop,
            ddl.CreateIndexDatamap: self.service.create,
            ddl.ShowDatamaps: self.service.show, ddl.RebuildDatamap: self.service.rebuild,
            ddl.CompactDatamap: self.service.compact,
            ddl.ShowSegments: self.service.show_segments,
            ddl.SyncDatamaps: self.service.sync, ddl.AuditDatamap: self.audit.audit_datamap,
            ddl.AlterRewrite: functools.partial(self.service.set_rewrite, by=ctx.user),
        }[type(stmt)]
        current_db = ctx.current_db

        async def run(_upstream) -> LocalResult:
            try:
                return await _job(statement, method, stmt, current_db)
            except RecursionError:
                raise ClientError(too_complex("the statement"), TOO_COMPLEX) from None
        return Local(run, note=f"datamap:{type(stmt).__name__}")

    def _advise(self, ctx: StatementContext, statement: str, stmt) -> Decision:
        if self.advise is None:
            return Reject("The datamap advisor is not running in this proxy", "0A000")
        advise, current_db = self.advise, ctx.current_db

        async def run(_upstream) -> LocalResult:
            return await _job(statement, advise, stmt, current_db)
        return Local(run, note=f"datamap:{type(stmt).__name__}")

    def _explain_runner(self, ctx: StatementContext, stmt: ddl.Explain):
        too_long = over_limit(stmt.query, self.max_sql_bytes)   # forwarded as written
        engine = self.service.engine_settings_problem    # no datamap answers: the reason
        enabled = rewrite_enabled(ctx) and not too_long and not engine
        current_db = ctx.current_db
        service = self.service
        serving, conf = self.serving, ctx.conf
        max_staleness_s = self.max_staleness_s
        approximate = approximate_on(conf)
        pruner = self.pruner if enabled and prune_on(conf) else None

        async def run(upstream) -> LocalResult:
            result = RewriteResult(stmt.query, False)
            index = None
            if not enabled and not too_long and _TIMESERIES.search(stmt.query):
                sql = await asyncio.to_thread(translate_only, service, stmt.query, current_db)
                result = RewriteResult(sql, sql != stmt.query)
            if enabled:
                try:
                    index = await asyncio.to_thread(service.index)
                    result = await asyncio.to_thread(index.rewrite, stmt.query, current_db,
                                                     approximate)
                    if result.missing_schemas:   # explain what the query will get once loaded
                        await asyncio.to_thread(service.load_schemas, result.missing_schemas)
                        index = await asyncio.to_thread(service.index)
                        result = await asyncio.to_thread(index.rewrite, stmt.query, current_db,
                                                         approximate)
                except Exception:  # noqa: BLE001 - explain what would really be sent
                    log.warning("rewrite failed during EXPLAIN; showing the original",
                                exc_info=True)
                if not result.used:
                    await asyncio.to_thread(add_unavailable, service, result, stmt.query,
                                            current_db)
            fresh: tuple[str, ...] = ()
            checked = None
            if result.used:
                checked = await asyncio.to_thread(
                    fresh_answer.check, service, result, stmt.query, current_db, conf,
                    max_staleness_s, lambda n: display_name(n, current_db), index)
                fresh = checked.explain
                if checked.result is None:
                    result = RewriteResult(stmt.query, False)
                else:
                    result = checked.result
            where = await asyncio.to_thread(served_lines, serving, result, conf, current_db)
            if checked is not None and checked.compensated:
                where[0] = compensated_line(where[0])
            pruned = None
            if pruner is not None and where[0].startswith("Served by: spark"):
                pruned = await asyncio.to_thread(pruner.prune, result.sql, current_db,
                                                 temp_views(conf))
                if pruned is not None:
                    result = dataclasses.replace(result, sql=pruned.sql)
            mode = f"{stmt.mode.upper()} " if stmt.mode else ""
            plan = await upstream(f"EXPLAIN {mode}{result.sql}")
            upstream_text = "\n".join(str(r[0]) for r in plan.rows)
            where = where + list(fresh) + approximate_lines(result) + list(
                pruned.lines if pruned is not None else ()) + (
                [f"Datamaps not used: {engine}"] if engine and rewrite_enabled(ctx) else [])
            return LocalResult(PLAN_COLUMNS, [(explain_header(result, current_db, where)
                                               + "\n" + upstream_text,)])
        return run


class DatamapSelectHandler:
    def __init__(self, service: DatamapService, max_sql_bytes: int | None = MAX_SQL_BYTES,
                 isolated: IsolatedRewriter | None = None, serving=None,
                 audit: Auditor | None = None, max_staleness_s: float = 0.0, pruner=None):
        self.service = service
        self.audit = audit or Auditor(service)   # remembers and samples datamap answers
        self.pruner = pruner          # indexes.pruning.Pruner, or None: no file skipping
        self.max_sql_bytes = max_sql_bytes
        self.serving = serving        # proxy.serving.ServingTier, or None: Spark answers
        self.max_staleness_s = max_staleness_s   # [datamaps] max_staleness
        # large statements are parsed in a process of their own (see rewrite/isolated.py)
        self.isolated = isolated or IsolatedRewriter()

    def close(self) -> None:
        self.isolated.close()

    def _rewrite(self, statement: str, current_db: str, approximate: bool = False):
        """(the DatamapIndex used, its RewriteResult)."""
        index = self.service.index()
        if self.isolated.wanted(index, statement):
            return index, self.isolated.rewrite(index, statement, current_db, approximate)
        return index, index.rewrite(statement, current_db, approximate)

    def __call__(self, ctx: StatementContext, statement: str) -> Decision | None:
        if classify(statement).kind is not Kind.QUERY:
            return None
        decision = self._prune(ctx, statement, self._decide(ctx, statement))
        try:
            tables, remember = self.service.guard.stale_listings(statement, ctx.opened, ctx.conf)
        except Exception:  # noqa: BLE001 - never fail a query over it
            log.warning("cannot tell which tables to refresh", exc_info=True)
            return decision
        if not tables or isinstance(decision, Reject):
            return decision
        return fresh_answer.with_refresh(decision, fresh_answer.refresh_statements(tables), remember)

    def _decide(self, ctx: StatementContext, statement: str) -> Decision | None:
        if over_limit(statement, self.max_sql_bytes):
            return self._too_long(statement)
        if not rewrite_enabled(ctx):
            return self._timeseries_only(ctx, statement)
        engine = self.service.engine_settings_problem
        if engine:      # the engine's own settings are not those datamaps are proven for
            return self._timeseries_only(ctx, statement, engine)
        if names_temp_view(statement, temp_views(ctx.conf)):
            # Spark reads the session's temporary view, not a base table
            return PassThrough(bypassed="reads a temporary view")
        try:
            index, result = self._rewrite(statement, ctx.current_db, approximate_on(ctx.conf))
        except Exception as e:  # noqa: BLE001 - style.md: a rewriter failure forwards the original
            if getattr(e, "forward_quietly", False):   # e.g. the pipeline session is starting
                log.info("not rewriting yet (%s); forwarding the original statement", e)
            else:
                log.warning("rewrite failed; forwarding the original statement", exc_info=True)
            return PassThrough(why_not=(("", f"the rewrite failed ({type(e).__name__})"),))
        if result is None:              # the rewrite process failed: logged, forward as is
            return PassThrough(why_not=(("", "the rewrite process failed"),))
        if result.missing_schemas:      # e.g. a dimension table joined onto a datamap's table
            self.service.request_schemas(result.missing_schemas)
        if not result.rewritten or result.sql == statement:
            # for the query log: the rewriter's reason per candidate, and the datamaps it
            # was not offered (DISABLED, not in sync) as this decision saw them
            left = self._left_out(statement, ctx.current_db)
            return miss(why_not=_merged(result.skipped, left),
                        log=base_table_lines(left, ctx.current_db))
        checked = None
        if result.used:
            checked = self._check(result, statement, ctx, index)
            if checked.result is None:          # the base tables answer
                return self._base_tables(statement, ctx, checked)
            result = checked.result
        note = ",".join(f"mv:{display_name(n, ctx.current_db)}" for n in result.used) \
            or "timeseries"
        if checked is not None and checked.note:
            note += f" {checked.note}"
        rewrite = Rewrite(result.sql, note=note,
                          log=fresh_answer.log_lines(
                              self.service, result.used,
                              lambda n: display_name(n, ctx.current_db), checked),
                          datamaps=tuple(result.used),
                          why_not=() if result.used else _merged(
                              result.skipped, self._left_out(statement, ctx.current_db)))
        if not result.approximate:      # an estimate would never equal the base tables'
            self.audit.offer(statement, ctx, result)
        if self.serving is None or not result.used:
            return rewrite
        return self._serve(result, rewrite, ctx)

    def _prune(self, ctx: StatementContext, statement: str,
               decision: Decision | None) -> Decision | None:
        """Index datamaps skip files in the SQL about to be sent to Spark (after the datamap
        rewrite: only the base tables left in it). Not for answers served in-process."""
        if self.pruner is None or not rewrite_enabled(ctx) or not prune_on(ctx.conf) \
                or self.service.engine_settings_problem \
                or over_limit(statement, self.max_sql_bytes):
            return decision
        if isinstance(decision, Rewrite):
            sql = decision.sql
        elif decision is None or (isinstance(decision, PassThrough) and decision.after is None):
            sql = statement
        else:
            return decision
        out = self.pruner.prune(sql, ctx.current_db, temp_views(ctx.conf))
        if out is None:
            return decision
        if isinstance(decision, Rewrite):
            return dataclasses.replace(decision, sql=out.sql, note=f"{decision.note} {out.note}",
                                       log=decision.log + out.lines)
        if decision is None:
            return Rewrite(out.sql, note=out.note, log=out.lines)
        return Rewrite(out.sql, note=f"{decision.note} {out.note}".strip(),
                       log=decision.log + out.lines,
                       settings=decision.settings, before=decision.before,
                       why_not=decision.why_not, bypassed=decision.bypassed)

    def _check(self, result: RewriteResult, statement: str, ctx: StatementContext, index):
        return fresh_answer.check(self.service, result, statement, ctx.current_db, ctx.conf,
                                  self.max_staleness_s,
                                  lambda n: display_name(n, ctx.current_db), index,
                                  ctx.arrived)

    def _base_tables(self, statement: str, ctx: StatementContext, checked) -> Decision:
        """The guard found a datamap stale: the statement goes to the base tables (its
        timeseries() calls translated; REFRESH TABLE first: __call__), and the client's
        operation log says so."""
        sql = translate_only(self.service, statement, ctx.current_db) \
            if _TIMESERIES.search(statement) else statement
        stale = dict(fresh_answer.stale_reasons(checked))
        why_not = _merged(stale, self._left_out(statement, ctx.current_db))
        lines = base_table_lines(dict(why_not), ctx.current_db)
        if sql != statement:
            return Rewrite(sql, note=f"timeseries {checked.note}", why_not=why_not, log=lines)
        return PassThrough(note=checked.note, why_not=why_not, log=lines)

    def _left_out(self, statement: str, current_db: str) -> dict[str, str]:
        """The datamaps over the statement's tables that the index deciding it was not
        offered (DISABLED, not in sync, ...), "db.name" -> why: the why-not as this
        decision saw it, which the query log records (by the time it writes the row, the
        datamap may be refreshed). Parsed only when such a datamap's table is named."""
        bases = self.service.left_out_tables()
        if bases is None:                # the catalog not read yet: one reason for all
            return self.service.unavailable(())
        text = statement.lower()
        if not any(t.rpartition(".")[2] in text for t in bases):
            return {}
        try:
            tables = referenced_tables(statement, current_db)
        except Exception:  # noqa: BLE001 - Spark reports the syntax error itself
            return {}
        return self.service.unavailable(tables)

    def _serve(self, result: RewriteResult, rewrite: Rewrite, ctx: StatementContext) -> Decision:
        """Answered in-process when the serving tier can (proxy/serving), else by Spark."""
        try:
            served = self.serving.plan(result, ctx.conf, ctx.current_db)
        except Exception:  # noqa: BLE001 - the tier must never fail a query: Spark answers
            log.warning("serving tier failed to plan; Spark answers", exc_info=True)
            return rewrite
        if not isinstance(served, Served):     # the statement log and the query log say why
            return dataclasses.replace(rewrite, note=f"{rewrite.note} served=spark "
                                                     f"({safe(served, 120)})",
                                       not_served=served)
        tier, conf = self.serving, ctx.conf

        async def attempt():
            return await tier.answer(served, conf)
        return Serve(attempt, rewrite)

    def _too_long(self, statement: str) -> Decision | None:
        if _TIMESERIES.search(statement):
            return Reject(f"Statement of {len(statement)} characters is over [datamaps] "
                          f"rewrite_max_sql_bytes ({self.max_sql_bytes} bytes), so its "
                          "timeseries() calls cannot be translated", TOO_COMPLEX)
        log.info("statement of %d characters is over rewrite_max_sql_bytes (%d); forwarding "
                 "it without a rewrite", len(statement), self.max_sql_bytes)
        return PassThrough(bypassed=f"over [datamaps] rewrite_max_sql_bytes "
                                    f"({self.max_sql_bytes} bytes)")

    def _timeseries_only(self, ctx: StatementContext, statement: str,
                         engine: str | None = None) -> Decision | None:
        """Datamap rewriting is off for the session (or for every session: `engine` says
        why, and the query log records it), but timeseries() is proxy SQL that Spark does
        not know: translate it all the same (no datamap is used)."""
        why = engine or ctx.conf.get(BLOCKED_KEY) or "datamap rewriting is off for the session"
        why_not = (("", engine),) if engine else ()
        if not _TIMESERIES.search(statement):
            return PassThrough(bypassed=why, why_not=why_not)
        sql = translate_only(self.service, statement, ctx.current_db)
        return PassThrough(bypassed=why, why_not=why_not) if sql == statement else Rewrite(
            sql, note="timeseries", bypassed=why, why_not=why_not)


_TIMESERIES = re.compile(r"\btimeseries\s*\(", re.IGNORECASE)


def miss(why_not: tuple[tuple[str, str], ...] = (),
         log: tuple[str, ...] = ()) -> PassThrough | None:
    """Forward as written; None (the next handler decides) when there is nothing to say."""
    return PassThrough(why_not=why_not, log=log) if why_not or log else None


def _merged(first: dict[str, str], then: dict[str, str]) -> tuple[tuple[str, str], ...]:
    out = dict(first)
    for name, reason in then.items():
        out.setdefault(name, reason)
    return tuple(out.items())


def base_table_lines(why_not: dict[str, str], current_db: str | None) -> tuple[str, ...]:
    """The operation-log line of a query the base tables answer while a datamap over them
    cannot (refreshing, stale, DISABLED): what the client's log says instead of the datamap
    answer EXPLAIN may have promised a moment before, e.g. `answered from the base tables
    (datamap agg_sales refreshing)`. Nothing for a datamap the rewriter refused."""
    states = []
    for name, reason in why_not.items():
        shown = display_name(name, current_db)
        if reason.startswith("stale") or "not in sync" in reason:
            states.append(f"datamap {shown} refreshing")
        elif "DISABLED" in reason:
            states.append(f"datamap {shown} DISABLED")
    if not states:
        return ()
    return (f"answered from the base tables ({'; '.join(states)})",)
