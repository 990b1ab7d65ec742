"""`ExternalHandler`: the Router StatementHandler of external-format tables
(docs/external.md). Registered before the datamap handlers, it decides:

- CREATE TABLE ... TBLPROPERTIES('format'=...), ADD SEGMENT, DELETE FROM TABLE ... WHERE
  SEGMENT..., COMPACT, SHOW SEGMENTS, DESC, DROP TABLE, and the allowed ALTER TABLEs of an
  external table -> Local (the work runs in a thread, proxy/external/tables.py);
- every write to an external table (INSERT, LOAD DATA, TRUNCATE, UPDATE, DELETE, MERGE,
  CTAS or CREATE OR REPLACE over it, partitions, ADD COLUMNS, non-csv properties)
  -> Reject 0A000 naming the table and the statement;
- `SET carbon.input.segments.<db>.<t> = ids | *` -> a session setting; a query naming a
  table with a selection reads only those segments' files (rewriter/prune/scope.py), and is not
  answered from datamaps (their rows cover every segment).
Anything else -> None (the next handler decides). Only statements that are not queries
look at the catalog, and queries only when the session has a selection.
"""
from __future__ import annotations

import logging
from typing import Callable

import sqlglot

from pipeline.files import quote_table
from proxy.routing.classify import Kind, classify
from proxy.datamaps.ddl import parser as ddl
from proxy.datamaps.ddl.commands import EMPTY
from proxy.datamaps.explain import explain_header
from proxy.datamaps.indexes.pruning import temp_views
from proxy.datamaps.loads import run_job
from proxy.external import alter, grammar
from proxy.external.show import DESC_COLUMNS, describe_rows, show_segments
from proxy.external.tables import ExternalTables, client_error
from proxy.routing.router import Decision, Local, LocalResult, Reject, Rewrite, StatementContext
from proxy.routing.sqlscan import Cursor, StatementError
from rewriter.api import RewriteResult
from rewriter.prune import Unsupported, restrict

log = logging.getLogger("proxy.external")

_BLOCKED_WORDS = {"insert": "INSERT", "load": "LOAD DATA", "truncate": "TRUNCATE",
                  "update": "UPDATE", "delete": "DELETE", "merge": "MERGE", "msck": "MSCK REPAIR",
                  "create": "CREATE TABLE", "replace": "REPLACE TABLE"}
SEGMENT_COLUMNS = (("SegmentSequenceId", "string"),)
# statements that change a table's files or definition: refused on a hidden source table
# (an INSERT OVERWRITE would unlink the segments' links behind the catalog's back)
_CHANGING = (Kind.WRITE, Kind.FILES, Kind.CREATE_TABLE, Kind.DROP_TABLE, Kind.ALTER_TABLE)


def _first_word(statement: str) -> str:
    try:
        return Cursor(statement).peek().value
    except StatementError:
        return ""


def blocked(table: str, what: str) -> Reject:
    return Reject(f"{what} is not supported on external-format table {table}: its data is "
                  "mapped with ALTER TABLE ... ADD SEGMENT (docs/external.md)", "0A000")


def selections(conf, current_db: str = "default") -> dict[str, tuple[int, ...]]:
    """The session's segment selections: {"db.t": ids} (a `*` value is no selection)."""
    out = {}
    for key, value in conf.items():
        if key.startswith(grammar.SEGMENTS_KEY):
            try:
                table, ids = grammar.segment_selection(key, value, current_db)
            except StatementError:
                continue
            if ids is not None:
                out[table] = ids
    return out


class ExternalHandler:
    def __init__(self, tables: ExternalTables, max_sql_bytes: int | None = None):
        self.tables = tables
        self.max_sql_bytes = max_sql_bytes

    def __call__(self, ctx: StatementContext, statement: str) -> Decision | None:
        stmt = classify(statement, ctx.current_db, self.max_sql_bytes)
        if stmt.kind is Kind.QUERY:
            return self._query(ctx, statement) if selections(ctx.conf) else None
        try:
            return self._decide(ctx, statement, stmt)
        except StatementError as e:
            return Reject(e.message, e.sqlstate)

    def _decide(self, ctx: StatementContext, statement: str, stmt) -> Decision | None:
        db = ctx.current_db
        ext = self.tables.get
        if stmt.kind is Kind.SET and stmt.key and stmt.key.lower().startswith(
                grammar.SEGMENTS_KEY):
            return self._select_segments(ctx, stmt.key, stmt.value)
        if stmt.kind in _CHANGING and _first_word(statement) != "refresh":
            for table in stmt.tables:
                owner = self.tables.store.owner_of_source(table)
                if owner is not None:
                    return Reject(f"{table} is the hidden source table of external-format "
                                  f"table {owner}: change it through {owner} (ALTER TABLE "
                                  "... ADD SEGMENT, DROP TABLE ...; docs/external.md)",
                                  "0A000")
        if stmt.kind is Kind.CREATE_TABLE:
            create = grammar.parse_create(statement, db)
            if create is not None:
                return self._local(statement, self.tables.create, create)
            if stmt.tables and ext(stmt.tables[0]):
                return blocked(stmt.tables[0], "CREATE OR REPLACE TABLE / CTAS")
            return None
        if stmt.kind in (Kind.ALTER_TABLE, Kind.FILES) and _first_word(statement) == "alter":
            return self._alter(statement, stmt, db)
        if stmt.kind is Kind.FILES and _first_word(statement) == "delete":
            delete = grammar.parse_delete_segments(statement, db)
            if delete is not None:
                if not ext(delete.table):
                    return Reject(f"DELETE FROM TABLE ... WHERE SEGMENT applies to "
                                  f"external-format tables; {delete.table} is not one", "0A000")
                return self._local(statement, self.tables.delete_segments, delete,
                                   refresh=True)
        if stmt.kind in (Kind.WRITE, Kind.FILES, Kind.CREATE_TABLE):
            for table in stmt.tables:
                if ext(table):
                    if _first_word(statement) == "refresh":
                        return None
                    first = _first_word(statement)
                    return blocked(table, _BLOCKED_WORDS.get(first) or (
                        "INSERT" if stmt.kind is Kind.WRITE else first.upper()))
        if stmt.kind is Kind.DROP_TABLE and ext(stmt.tables[0]):
            return self._local(statement, self.tables.drop, stmt.tables[0])
        if stmt.kind is Kind.DROP_VIEW and ext(stmt.tables[0]):
            return Reject(f"{stmt.tables[0]} is an external-format table: use DROP TABLE",
                          "0A000")
        if stmt.kind is Kind.DATAMAP:
            first = _first_word(statement)
            if first != "show" and not (first == "explain" and selections(ctx.conf)):
                return None       # datamap DDL: the datamap handler parses it (only once)
            show = ddl.parse(statement)
            if isinstance(show, ddl.Explain) and selections(ctx.conf):
                return self._explain(ctx, show)
            if isinstance(show, ddl.ShowSegments):
                table = show.table.qualified(db)
                if ext(table):
                    return self._show(table)
            return None
        if stmt.kind is Kind.OTHER:
            return self._describe(statement, db)
        return None

    # -- decisions -------------------------------------------------------------------------
    def _local(self, statement: str, fn: Callable, arg, refresh: bool = False,
               show: Callable | None = None) -> Local:
        tables = self.tables

        async def run(upstream) -> LocalResult:
            try:
                result = await run_job(statement, fn, arg)
            except StatementError as e:
                raise client_error(e) from None
            if refresh:            # the client's own session lists the table again now
                t = tables.get(getattr(arg, "table", ""))
                if t is not None:
                    await upstream(f"REFRESH TABLE {quote_table(t.source)}")
            return show(result) if show else EMPTY
        return Local(run, note=f"external:{fn.__name__}")

    def _alter(self, statement: str, stmt, db: str) -> Decision | None:
        try:
            add = grammar.parse_alter(statement, db)
        except StatementError as e:     # COMPACT 'CUSTOM' ...: ours only on our tables
            if stmt.tables and self.tables.get(stmt.tables[0]):
                return Reject(e.message, e.sqlstate)
            return None
        if isinstance(add, grammar.AddSegment):
            if not self.tables.get(add.table):
                return Reject(f"ADD SEGMENT applies to external-format tables; {add.table} "
                              "is not one", "0A000")
            return self._local(statement, self.tables.add_segment, add, refresh=True,
                               show=lambda i: LocalResult(SEGMENT_COLUMNS, [(str(i),)]))
        if isinstance(add, grammar.Compact):
            if not self.tables.get(add.table):
                return None          # COMPACT of another table is Spark's (or CarbonData's)
            return self._local(statement, self.tables.compact, add, show=lambda i: EMPTY)
        table = stmt.tables[0]
        if not self.tables.get(table):
            return None
        if len(stmt.tables) == 2:
            return self._local(statement, lambda names: self.tables.rename(*names),
                               stmt.tables)
        clause = alter.parse(statement, table, db)
        if isinstance(clause, alter.Blocked):
            return blocked(table, f"ALTER TABLE ... {clause.what}")
        if isinstance(clause, alter.DropColumns):
            return self._local(statement, lambda c: self.tables.drop_columns(table, list(c)),
                               clause.columns)
        if isinstance(clause, alter.ChangeColumn):
            return self._local(statement, lambda c: self.tables.change_type(
                table, c.column, c.new_name, c.new_type), clause)
        bad = [k for k in clause.properties if k == "format" or not k.startswith("csv.")]
        if bad:
            return blocked(table, f"{'UNSET' if clause.unset else 'SET'} TBLPROPERTIES of "
                                  f"'{bad[0]}' (only csv. properties)")
        return self._local(statement, lambda c: self.tables.set_properties(
            table, c.properties, c.unset), clause)

    def _show(self, table: str) -> Local:
        tables = self.tables

        async def run(_upstream) -> LocalResult:
            return show_segments(await run_job("SHOW SEGMENTS", tables.store.segments, table))
        return Local(run, note="external:show_segments")

    def _describe(self, statement: str, db: str) -> Decision | None:
        cur = Cursor(statement)
        try:
            if not cur.accept("desc", "describe"):
                return None
            cur.accept("table")
            mode = "FORMATTED" if cur.accept("formatted") else "EXTENDED" if cur.accept(
                "extended") else ""
            table = grammar.table_name(cur, db)
            cur.accept_op(";")
            if cur.peek().kind != "end" or not self.tables.get(table):
                return None       # a column's description, or not ours: Spark answers
        except StatementError:
            return None           # Spark reports its own syntax errors
        tables = self.tables

        async def run(upstream) -> LocalResult:
            own = await upstream(f"DESC {mode} {quote_table(table)}")
            t = tables.get(table)
            live = await run_job(statement, tables.store.segments, table, True)
            return LocalResult(DESC_COLUMNS, [tuple(r) for r in own.rows]
                               + describe_rows(t, live))
        return Local(run, note="external:describe")

    def _select_segments(self, ctx: StatementContext, key: str, value: str | None) -> Decision:
        key = key.strip().lower()
        if value is None:
            shown = ctx.conf.get(key, "*")

            async def show(_upstream) -> LocalResult:
                return LocalResult((("key", "string"), ("value", "string")), [(key, shown)])
            return Local(show, note="set:show")
        table, ids = grammar.segment_selection(key, value, ctx.current_db)
        if ids is not None:
            try:
                self.tables.check_selection(table, ids)
            except Exception as e:  # noqa: BLE001 - ClientError: its message and state
                return Reject(getattr(e, "message", str(e)), getattr(e, "sqlstate", "42000"))
        canonical = f"{grammar.SEGMENTS_KEY}{table}"
        shown = "*" if ids is None else ",".join(map(str, ids))

        async def answer(_upstream) -> LocalResult:
            return LocalResult((("key", "string"), ("value", "string")), [(canonical, shown)])
        return Local(answer, note="set:segments", settings=((canonical, shown),))

    def _restricted(self, ctx: StatementContext, statement: str):
        """(SQL reading only the selected segments, their scopes), or None when the
        statement reads no table with a selection."""
        scopes = self.tables.scopes(selections(ctx.conf, ctx.current_db))
        if not scopes:
            return None
        try:
            trees = sqlglot.parse(statement, read="spark")
        except Exception:  # noqa: BLE001 - Spark reports the syntax error
            return None
        if len(trees) != 1 or trees[0] is None:
            return None
        restricted = restrict(trees[0], scopes, ctx.current_db, temp_views(ctx.conf))
        if restricted == trees[0]:
            return None
        return restricted.sql(dialect="spark"), scopes

    def _query(self, ctx: StatementContext, statement: str) -> Decision | None:
        try:
            found = self._restricted(ctx, statement)
        except Unsupported as e:
            return Reject(str(e), "0A000")
        if found is None:
            return None
        sql, scopes = found
        # the session may list the source table from before the latest ADD SEGMENT
        before = tuple(f"REFRESH TABLE {quote_table(s[0])}" for s in scopes.values())
        return Rewrite(sql, note="external:segments", before=before,
                       log=(_selection_line(ctx, scopes),))

    def _explain(self, ctx: StatementContext, stmt: ddl.Explain) -> Decision | None:
        """EXPLAIN under a segment selection: what is really sent (no datamap answers)."""
        try:
            found = self._restricted(ctx, stmt.query)
        except Unsupported as e:
            return Reject(str(e), "0A000")
        if found is None:
            return None
        sql, scopes = found
        mode = f"{stmt.mode.upper()} " if stmt.mode else ""
        header = explain_header(RewriteResult(sql, True), ctx.current_db,
                                [_selection_line(ctx, scopes)])

        async def run(upstream) -> LocalResult:
            plan = await upstream(f"EXPLAIN {mode}{sql}")
            return LocalResult((("plan", "string"),),
                               [(header + "\n" + "\n".join(str(r[0]) for r in plan.rows),)])
        return Local(run, note="external:explain")


def _selection_line(ctx: StatementContext, scopes) -> str:
    chosen = ", ".join(f"{t} segments {ctx.conf.get(grammar.SEGMENTS_KEY + t, '?')}"
                       for t in sorted(scopes))
    return f"Segment selection: {chosen} (datamaps do not answer: their rows cover every segment)"

