"""Datamap DDL: a small hand-written parser for the statement frame (contract.md).

`parse(statement)` returns a typed, frozen statement object, or None when the text is not
datamap DDL (it runs on every ExecuteStatement, so the statement classifier's look at
the first words, proxy/routing/classify.py, decides that first). Only the frame is parsed here,
from the tokens of proxy/routing/sqlscan.py: names, ON TABLE, USING, WITH DEFERRED ...,
properties, IF [NOT] EXISTS, COMPACT, SHOW SEGMENTS, SYNC DATAMAPS, AUDIT DATAMAP, EXPLAIN
(`SET datamap.rewrite.enabled` is the classifier's alone). The SELECT after AS (or after
EXPLAIN) is handed over as text; the rewriter parses it with sqlglot later. The
exceptions: the legacy providers, `USING 'preaggregate'` and `USING 'timeseries'`, are
turned into an equivalent mv SELECT here, which needs a look at the query; the index
providers, `USING 'minmax' | 'bloomfilter'` (no query), are parsed by index_providers.py.

Errors are `DdlError` (= sqlscan.StatementError; SQLSTATE 42000 for syntax, 0A000 for
unsupported) whose message names the offending token, its position and the datamap when
known.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from pipeline import properties
from proxy.routing.classify import Kind, classify
from proxy.datamaps.ddl.index_providers import INDEX_PROVIDERS, CreateIndexDatamap, index_statement
from proxy.datamaps.ddl.legacy import translate_legacy
from proxy.datamaps.ddl.words import GRANULARITIES, DdlError, Name
from proxy.routing.sqlscan import Cursor

__all__ = [
    "parse", "DdlError", "Name", "CreateDatamap", "CreateIndexDatamap", "DropDatamap",
    "ShowDatamaps", "RebuildDatamap", "CompactDatamap", "ShowSegments", "Explain",
    "SyncDatamaps", "AuditDatamap", "AlterRewrite", "DdlStatement", "GRANULARITIES",
    "ShowSuggestions", "ExplainWhatIf",
]

Syntax = Literal["datamap", "mv"]        # CarbonData 1.x DATAMAP words or 2.x MATERIALIZED VIEW
PROVIDERS = ("mv", "preaggregate", "timeseries")


@dataclass(frozen=True)
class CreateDatamap:
    name: Name
    provider: str                                 # mv | preaggregate | timeseries
    select_sql: str                               # mv SELECT (legacy providers translated)
    original_sql: str                             # the query exactly as written after AS
    on_table: Name | None = None
    if_not_exists: bool = False
    lazy: bool = False                            # WITH DEFERRED REBUILD | REFRESH
    properties: tuple[tuple[str, str], ...] = ()  # keys lower-cased, sorted
    syntax: Syntax = "datamap"

    @property
    def props(self) -> dict[str, str]:
        return dict(self.properties)


@dataclass(frozen=True)
class DropDatamap:
    name: Name
    if_exists: bool = False
    on_table: Name | None = None
    syntax: Syntax = "datamap"


@dataclass(frozen=True)
class ShowDatamaps:
    on_table: Name | None = None
    syntax: Syntax = "datamap"


@dataclass(frozen=True)
class RebuildDatamap:
    name: Name
    on_table: Name | None = None
    syntax: Syntax = "datamap"


@dataclass(frozen=True)
class CompactDatamap:
    name: Name
    mode: Literal["minor", "major", "custom"]
    segment_ids: tuple[str, ...] = ()             # CUSTOM only


@dataclass(frozen=True)
class ShowSegments:
    table: Name


@dataclass(frozen=True)
class SyncDatamaps:
    """SYNC DATAMAPS [ON TABLE t]: find files written to base tables outside the proxy."""
    on_table: Name | None = None


@dataclass(frozen=True)
class AuditDatamap:
    """AUDIT DATAMAP [db.]name: compare its answers with the base tables' (verify/auditor.py)."""
    name: Name


@dataclass(frozen=True)
class AlterRewrite:
    """ALTER DATAMAP [db.]name ENABLE | DISABLE QUERY REWRITE (Oracle's words): whether the
    rewriter may answer queries from it; maintenance keeps it fresh either way."""
    name: Name
    enabled: bool


@dataclass(frozen=True)
class Explain:
    mode: Literal["", "extended", "formatted"]
    query: str


@dataclass(frozen=True)
class ShowSuggestions:
    """SHOW DATAMAP SUGGESTIONS: the advisor's proposals (proxy/advisor/core.py)."""


@dataclass(frozen=True)
class ExplainWhatIf:
    """EXPLAIN WHATIF CREATE DATAMAP ...: the logged workload replayed with it (advisor)."""
    create: CreateDatamap
    statement: str                                # the CREATE as written


DdlStatement = (CreateDatamap | CreateIndexDatamap | DropDatamap | ShowDatamaps | RebuildDatamap
                | CompactDatamap | ShowSegments | Explain | SyncDatamaps | AuditDatamap
                | AlterRewrite | ShowSuggestions | ExplainWhatIf)

_RESERVED = frozenset({"on", "using", "as", "with", "if", "table", "dmproperties", "properties",
                       "tblproperties", "where", "compact", "for", "deferred", "select"})
_QUERY_START = frozenset({"select", "with", "from", "values", "table", "("})
_NAME_OK = re.compile(r"[a-z0-9_]+\Z")


def parse(statement: str) -> DdlStatement | None:
    """Parse datamap DDL; None when the statement is something else (forward it)."""
    if classify(statement).kind is not Kind.DATAMAP:
        return None
    cur = Cursor(statement, reserved=_RESERVED)
    verb = cur.next().value
    if verb == "create":
        return _create(cur)
    if verb == "drop":
        return _drop(cur)
    if verb == "show":
        return _show(cur)
    if verb == "rebuild":
        cur.expect("datamap")
        name = _datamap_name(cur)
        on_table = _on_table(cur)
        cur.end()
        return RebuildDatamap(name, on_table, "datamap")
    if verb == "refresh":
        cur.expect("materialized"), cur.expect("view")
        name = _datamap_name(cur, "materialized view")
        cur.end()
        return RebuildDatamap(name, None, "mv")
    if verb == "alter":
        return _alter(cur)
    if verb == "explain":
        return _explain(cur)
    if verb == "audit":
        cur.expect("datamap")
        name = _datamap_name(cur)
        cur.end()
        return AuditDatamap(name)
    if verb == "sync":
        if cur.accept("materialized"):
            cur.expect("views")
        else:
            cur.next()  # DATAMAP | DATAMAPS (pre-checked)
        on_table = _on_table(cur)
        cur.end()
        return SyncDatamaps(on_table)
    return None  # pragma: no cover - the classifier admits only the verbs above


def _name(cur: Cursor, what: str) -> Name:
    first = cur.ident(what)
    if cur.accept_op("."):
        return Name(cur.ident(what), first)
    return Name(first)


def _datamap_name(cur: Cursor, kind: str = "datamap") -> Name:
    tok = cur.peek()
    name = _name(cur, f"{kind} name")
    if not _NAME_OK.match(name.name):
        raise cur.error(f"invalid {kind} name '{name.name}': use letters, digits and '_'", tok)
    cur.subject = f"{kind} {name}"
    return name


def _on_table(cur: Cursor) -> Name | None:
    if not cur.accept("on"):
        return None
    cur.expect("table", "TABLE after ON")
    return _name(cur, "table name after ON TABLE")


def _properties(cur: Cursor) -> tuple[tuple[str, str], ...]:
    cur.expect_op("(", "to open the property list")
    props: dict[str, str] = {}
    while True:
        key_tok = cur.peek()
        key = cur.string("a property name").strip().lower()
        if not key:
            raise cur.error("property name must not be empty", key_tok)
        if key in props:
            raise cur.error(f"property '{key}' is given twice", key_tok)
        cur.expect_op("=", f"after property '{key}'")
        props[key] = cur.string(f"the value of property '{key}'")
        if cur.accept_op(")"):
            break
        cur.expect_op(",", "or ')' in the property list")
    _check_properties(props, cur.subject)
    return tuple(sorted(props.items()))


def _check_properties(props: dict[str, str], subject: str) -> None:
    try:
        properties.check(props)
    except properties.PropertyError as e:
        raise DdlError(f"Invalid property {e.what} for {subject}: {e.why}", "42000") from None
    cols = props.get("sort_columns")
    if cols is not None:
        names = [c.strip() for c in cols.split(",")]
        if cols.strip() and not all(re.fullmatch(r"[A-Za-z0-9_]+", c) for c in names):
            raise DdlError(f"Invalid property 'sort_columns'='{cols}' for {subject}: expected "
                           "a comma-separated list of column names", "42000")


def _query(cur: Cursor, after: str) -> str:
    tok = cur.peek()
    if tok.kind == "str":
        # The external data source design writes the query as a string: AS 'SELECT ...'.
        cur.next()
        cur.end()
        inner = Cursor(tok.value.strip().rstrip(";").rstrip())
        return _query(inner, after)
    if not ((tok.kind == "word" and tok.value in _QUERY_START) or tok.value == "("):
        raise cur.error(f"expected a SELECT statement after {after}")
    query, _ = cur.rest()
    return query


def _create(cur: Cursor) -> CreateDatamap | CreateIndexDatamap:
    if cur.accept("materialized"):
        cur.expect("view")
        if_not_exists = _if_not_exists(cur)
        name = _datamap_name(cur, "materialized view")
        lazy = False
        if cur.accept("with"):
            cur.expect("deferred", "DEFERRED after WITH")
            cur.expect("refresh", "REFRESH after WITH DEFERRED")
            lazy = True
        props: tuple[tuple[str, str], ...] = ()
        if cur.accept("properties", "tblproperties", "dmproperties"):
            props = _properties(cur)
        cur.expect("as", "AS before the SELECT statement")
        query = _query(cur, "AS")
        return CreateDatamap(name, "mv", query, query, None, if_not_exists, lazy, props, "mv")

    cur.expect("datamap")
    if_not_exists = _if_not_exists(cur)
    name = _datamap_name(cur)
    on_table = _on_table(cur)
    # The MV guide's quick example leaves USING out: an mv datamap then.
    prov_tok = cur.peek() if cur.accept("using") else None
    provider = cur.string("the datamap provider").strip().lower() if prov_tok else "mv"
    if provider not in PROVIDERS + INDEX_PROVIDERS:
        raise DdlError(f"Datamap provider '{prov_tok.value}' is not supported for datamap {name}"
                       f" (supported: {', '.join(PROVIDERS + INDEX_PROVIDERS)})", "0A000",
                       prov_tok.pos, prov_tok.text)
    lazy = False
    if cur.accept("with"):
        cur.expect("deferred", "DEFERRED after WITH")
        cur.expect("rebuild", "REBUILD after WITH DEFERRED")
        lazy = True
    props = ()
    if cur.accept("dmproperties"):
        props = _properties(cur)
    if provider in INDEX_PROVIDERS:      # per-file indexes: proxy/datamaps/indexes
        return index_statement(cur, name, on_table, if_not_exists, provider, lazy, props)
    cur.expect("as", "AS before the SELECT statement")
    query = _query(cur, "AS")
    select_sql = query
    if provider != "mv":
        select_sql = translate_legacy(provider, name, on_table, dict(props), query)
    return CreateDatamap(name, provider, select_sql, query, on_table, if_not_exists, lazy,
                         props, "datamap")


def _if_not_exists(cur: Cursor) -> bool:
    if cur.accept("if"):
        cur.expect("not", "NOT after IF")
        cur.expect("exists", "EXISTS after IF NOT")
        return True
    return False


def _drop(cur: Cursor) -> DropDatamap:
    syntax: Syntax = "datamap"
    kind = "datamap"
    if cur.accept("materialized"):
        cur.expect("view")
        syntax, kind = "mv", "materialized view"
    else:
        cur.expect("datamap")
    if_exists = False
    if cur.accept("if"):
        cur.expect("exists", "EXISTS after IF")
        if_exists = True
    name = _datamap_name(cur, kind)
    on_table = _on_table(cur) if syntax == "datamap" else None
    cur.end()
    return DropDatamap(name, if_exists, on_table, syntax)


def _show(cur: Cursor) -> ShowDatamaps | ShowSegments | ShowSuggestions:
    if cur.accept("segments"):
        cur.expect("for", "FOR TABLE after SHOW SEGMENTS")
        cur.expect("table", "TABLE after SHOW SEGMENTS FOR")
        table = _name(cur, "table name")
        cur.end()
        return ShowSegments(table)
    syntax: Syntax = "datamap"
    if cur.accept("materialized"):
        cur.expect("views")
        syntax = "mv"
    else:
        cur.next()  # DATAMAP | DATAMAPS (pre-checked)
        if cur.accept("suggestions"):
            cur.end()
            return ShowSuggestions()
    on_table = _on_table(cur)
    cur.end()
    return ShowDatamaps(on_table, syntax)


def _alter(cur: Cursor) -> CompactDatamap | AlterRewrite:
    cur.expect("datamap")
    name = _datamap_name(cur)
    if cur.at("enable", "disable"):
        enabled = cur.next().value == "enable"
        cur.expect("query", "QUERY REWRITE after ENABLE / DISABLE")
        cur.expect("rewrite", "REWRITE after QUERY")
        cur.end()
        return AlterRewrite(name, enabled)
    cur.expect("compact", "COMPACT after the datamap name (or ENABLE | DISABLE QUERY REWRITE)")
    mode_tok = cur.peek()
    mode = cur.string("the compaction type ('MINOR', 'MAJOR' or 'CUSTOM')").strip().lower()
    if mode not in ("minor", "major", "custom"):
        raise cur.error("expected compaction type 'MINOR', 'MAJOR' or 'CUSTOM'", mode_tok)
    ids: list[str] = []
    if cur.at("where"):
        where_tok = cur.next()
        if mode != "custom":
            raise cur.error("WHERE SEGMENT.ID IN (...) is only allowed with COMPACT 'CUSTOM'",
                            where_tok)
        cur.expect("segment", "SEGMENT.ID after WHERE")
        cur.expect_op(".", "in SEGMENT.ID")
        cur.expect("id", "SEGMENT.ID after WHERE")
        cur.expect("in", "IN after SEGMENT.ID")
        cur.expect_op("(", "to open the segment id list")
        while True:
            tok = cur.peek()
            value = tok.value.strip() if tok.kind in ("word", "str") else ""
            if not re.fullmatch(r"\d+", value):
                raise cur.error("expected a segment id (a whole number)")
            cur.next()
            if value in ids:
                raise cur.error(f"segment id {value} is given twice", tok)
            ids.append(str(int(value)))
            if cur.accept_op(")"):
                break
            cur.expect_op(",", "or ')' in the segment id list")
    elif mode == "custom":
        raise cur.error("COMPACT 'CUSTOM' needs WHERE SEGMENT.ID IN (id, ...)")
    cur.end()
    return CompactDatamap(name, mode, tuple(ids))  # type: ignore[arg-type]


def _explain(cur: Cursor) -> Explain | ExplainWhatIf | None:
    if cur.accept("whatif"):
        return _whatif(cur)
    mode = ""
    if cur.at("extended", "formatted"):
        mode = cur.next().value
    tok = cur.peek()
    # EXPLAIN CODEGEN / COST / LOGICAL and EXPLAIN of commands are Spark's: forward them.
    if not ((tok.kind == "word" and tok.value in _QUERY_START) or tok.value == "("):
        return None
    query, _ = cur.rest()
    return Explain(mode, query)  # type: ignore[arg-type]


def _whatif(cur: Cursor) -> ExplainWhatIf:
    what = "expected CREATE DATAMAP or CREATE MATERIALIZED VIEW after EXPLAIN WHATIF"
    if not cur.at("create"):
        raise cur.error(what)
    statement, _ = cur.rest()
    create = parse(statement)
    if create is None:
        raise cur.error(what)
    if not isinstance(create, CreateDatamap):
        raise DdlError("EXPLAIN WHATIF takes an mv datamap (a CREATE with a SELECT), not an "
                       f"index datamap: {create.name}", "0A000")
    return ExplainWhatIf(create, statement)
