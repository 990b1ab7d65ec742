"""`DatamapLoadHandler`: statements that change a base table's rows or files, seen through
the proxy, re-sync the table's datamaps right after Spark ran them.

Which statement is which, and the tables it names, comes from proxy/routing/classify.py alone:
- WRITE (INSERT in every form, LOAD DATA, TRUNCATE), FILES (partition DDL, SET LOCATION,
  MSCK / REFRESH TABLE, DELETE / UPDATE / MERGE) and CREATE_TABLE (a base table created
  again after an outside DROP, CREATE OR REPLACE) -> PassThrough(after=...) that cuts the
  new base segment (or, when files vanished or contents were replaced, rebuilds) and
  refreshes the datamaps;
- MAYBE_WRITE (may write, but the text is over [datamaps] rewrite_max_sql_bytes or does
  not parse, so the targets are unknown) -> the same for every base table of a datamap
  that the text mentions: a false positive costs a file listing, a miss a stale answer;
- DROP TABLE of a base table -> its datamaps are dropped after it;
- ALTER TABLE of a base table -> its cached schema is forgotten; a RENAME of one is
  refused (its datamaps would keep answering for a name that no longer exists), and a
  table renamed TO a base table's name is re-synced;
- writes to, DROP TABLE or RENAME of a datamap's own table are refused: its rows belong
  to the proxy.
"""
from __future__ import annotations

import asyncio
import logging
import re
import time

from proxy.routing.classify import Kind, Statement, classify
from proxy.routing.classify_parse import mentioned
from proxy.config import DatamapsSettings
from proxy.datamaps.catalog.records import display_name
from proxy.datamaps.failures import STATEMENT
from proxy.datamaps.service import DatamapService
from proxy.routing.router import Decision, PassThrough, Reject, StatementContext

log = logging.getLogger("proxy.datamaps")

_RESYNCED = (Kind.WRITE, Kind.FILES, Kind.CREATE_TABLE)
_IF_NOT_EXISTS = re.compile(r"^\s*create\b[^(]*?\bif\s+not\s+exists\b", re.IGNORECASE)


async def run_job(statement: str, fn, *args, **kwargs):
    """Run a blocking datamap job in a worker thread, with the client's statement in its
    context: a failure deep inside the job is logged next to it."""
    token = STATEMENT.set(statement)
    try:
        return await asyncio.to_thread(fn, *args, **kwargs)
    finally:
        STATEMENT.reset(token)


class DatamapLoadHandler:
    """Loads into base tables of datamaps: forward unchanged, then (after the upstream
    statement FINISHED) cut the table's new segment and refresh / disable its datamaps."""

    def __init__(self, service: DatamapService,
                 max_sql_bytes: int | None = DatamapsSettings.rewrite_max_sql_bytes):
        self.service = service
        self.max_sql_bytes = max_sql_bytes      # INSERTs behind a CTE are parsed up to this

    def __call__(self, ctx: StatementContext, statement: str) -> Decision | None:
        stmt = classify(statement, ctx.current_db, self.max_sql_bytes)
        try:
            if stmt.kind is Kind.DROP_TABLE:
                return self._drop(stmt.tables[0], ctx.current_db)
            if stmt.kind is Kind.DROP_VIEW:
                return self._refuse_datamap_table(stmt.tables[0], ctx.current_db)
            if stmt.kind is Kind.ALTER_TABLE:
                return self._alter(stmt, statement)
            if stmt.kind is Kind.MAYBE_WRITE:
                return self._maybe(statement)
            if stmt.kind in _RESYNCED:
                return self._written(stmt, statement)
        except Exception:  # noqa: BLE001 - the catalog is unavailable: forward the statement
            log.warning("catalog lookup failed for a %s of %s", stmt.kind.value,
                        ", ".join(stmt.tables) or "tables it may name", exc_info=True)
        return None

    def _based(self, table: str) -> bool:
        return bool(self.service.catalog.list_datamaps(base_table=table)
                    or self.service.indexes.has(table))

    def _written(self, stmt: Statement, statement: str) -> Decision | None:
        based = []
        for table in stmt.tables:
            if self.service.catalog.datamap_by_table(table) is not None:
                return Reject(f"Table {table} holds a datamap's rows and cannot be written "
                              "directly; use REBUILD DATAMAP", "0A000")
            if self._based(table):
                based.append(table)
        # CREATE TABLE (no IF NOT EXISTS) of a base table's name: it was dropped outside
        # the proxy and made again, maybe over the same files read another way (columns
        # in another order), which a listing diff cannot see
        created = stmt.kind is Kind.CREATE_TABLE and _IF_NOT_EXISTS.search(statement) is None
        return self._resync(statement, based, stmt.overwrite or created)

    def _maybe(self, statement: str) -> Decision | None:
        """Targets unknown: re-sync every base table the text names (classify_parse)."""
        tables = {t for rec in self.service.catalog.list_datamaps() for t in rec.base_tables}
        tables |= self.service.indexes.store.tables()
        based = mentioned(statement, tables)
        if based:
            log.info("a statement of %d characters may write %s (too long or not parsed to "
                     "tell); re-syncing after it", len(statement), ", ".join(based))
        # a listing tells appended from replaced files: no forced rebuild of every table named
        return self._resync(statement, list(based), overwrite=False)

    def _resync(self, statement: str, based: list[str], overwrite: bool) -> Decision | None:
        if not based:
            return None
        service = self.service
        # until the write and its refresh are done, statements that arrived before it began
        # do not see the files that appear meanwhile (the guard lists the tables now)
        token = service.guard.begin_write(based)
        started = time.time()       # the load's time in SHOW SEGMENTS runs from here

        async def after(_upstream) -> None:
            for table in based:
                await run_job(statement, service.after_load, table, overwrite=overwrite,
                              started=started)
        return PassThrough(after=after, ended=lambda: service.guard.end_write(token))

    def _alter(self, stmt: Statement, statement: str) -> Decision | None:
        """ALTER TABLE of a base table: forward it, then forget the cached schema so the
        rewriter and later refreshes see the new columns/types. RENAME: see the module."""
        table = stmt.tables[0]
        if len(stmt.tables) == 2:
            return self._rename(table, stmt.tables[1], statement)
        if not self._based(table):
            return None
        service = self.service

        async def after(_upstream) -> None:
            service.invalidate_schemas(table)
        return PassThrough(after=after)

    def _rename(self, old: str, new: str, statement: str) -> Decision | None:
        catalog = self.service.catalog
        if catalog.datamap_by_table(old) is not None:
            return Reject(f"Table {old} holds a datamap's rows and cannot be renamed", "0A000")
        names = [rec.qualified for rec in catalog.list_datamaps(base_table=old)]
        # index datamaps too: their entries name the table's files, which a rename moves
        names += self.service.indexes.store.names_on(old)
        if names:
            return Reject(f"Table {old} cannot be renamed: datamaps {', '.join(names)} are "
                          "defined over it; DROP DATAMAP them first", "0A000")
        # a base table dropped outside the proxy, its name now taken by another table
        return self._resync(statement, [new] if self._based(new) else [], overwrite=True)

    def _refuse_datamap_table(self, table: str, current_db: str) -> Reject | None:
        rec = self.service.catalog.datamap_by_table(table)
        if rec is None:
            return None
        return Reject(f"Table {table} holds the rows of datamap {rec.qualified}; use "
                      f"DROP DATAMAP {display_name(rec.qualified, current_db)}", "0A000")

    def _drop(self, table: str, current_db: str = "default") -> Decision | None:
        """DROP TABLE of a base table drops its datamaps afterwards (CarbonData's rule);
        DROP TABLE of a datamap table is refused (DROP DATAMAP owns it)."""
        refused = self._refuse_datamap_table(table, current_db)
        if refused is not None:
            return refused
        if not self._based(table):
            return None
        service = self.service

        async def after(_upstream) -> None:
            await asyncio.to_thread(service.after_drop_table, table)
        return PassThrough(after=after)
