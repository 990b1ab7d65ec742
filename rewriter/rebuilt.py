"""Datamaps refreshed in full: definitions no increment exists for, stored as their rows.

A definition whose value after a load cannot be computed from its stored rows and the new
rows alone is accepted in refresh mode `full` (`DatamapDefinition.refresh`): it is
rebuilt from the whole base tables at every load (or at REBUILD, when lazy), and the new
segment replaces the old ones in one publish. The constructs that make it so (`construct`):
  * a UNION / UNION ALL / INTERSECT / EXCEPT of SELECT blocks (a set operation: a new row
    may remove a row of the result, or a union's branches keep no partials to merge);
  * GROUPING SETS / CUBE / ROLLUP (the subtotal rows of every level, kept as written);
  * a subquery inside the block: a derived table, an IN / EXISTS subquery, a scalar
    subquery (a new row of the subquery's table changes rows the block kept before);
  * a WITH whose CTE is more than a per-row filter of base tables (an aggregate, a join).
What stays refused in full mode too, naming the construct: window functions, LIMIT /
OFFSET (which rows is not fixed), non-deterministic functions, SELECT * as the output,
timeseries().

The stored columns are the definition's outputs (role `column`), named after the user's
aliases, else Spark's output names made identifiers; Spark types them at CREATE
(pipeline.with_spark_types). No aggregate is re-aggregated by refresh or compaction:
`is_aggregate` is False, and a full datamap only ever has one live segment.

Which queries a full datamap answers is rewriter/rebuilt_match.py's.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from sqlglot import exp

from rewriter import sparktypes
from rewriter.api import SEGMENT_COLUMN, DatamapDefinition, DatamapDefinitionError, StoredColumn
from rewriter.definition_checks import check_tables, refuse
from rewriter.normalize import (DIALECT, NormalizeError, make_schema, nondeterministic, parse,
                                qualify_tree, quote_unsafe, spark_output_name)

FULL = "full"
INCREMENTAL = "incremental"


def construct(select_sql: str) -> str | None:
    """The construct for which a definition is refreshed in full, or None (a definition the
    incremental layout refused for another reason stays refused)."""
    try:
        tree = parse(select_sql)
    except NormalizeError:
        return None
    if isinstance(tree, exp.SetOperation):
        return set_operation_name(tree)
    if not isinstance(tree, exp.Select):
        return None
    group = tree.args.get("group")
    if group is not None:
        kinds = [name for name, cls in (("GROUPING SETS", exp.GroupingSets), ("CUBE", exp.Cube),
                                        ("ROLLUP", exp.Rollup))
                 if group.args.get(name.split()[-1].lower()) or group.find(cls)]
        if kinds:
            return " and ".join(kinds)
    with_ = tree.args.get("with_")
    body = tree.copy()
    body.set("with_", None)
    for node in body.walk():
        if isinstance(node, exp.Subquery) and isinstance(node.parent, (exp.From, exp.Join)):
            return "a derived table (a subquery in FROM)"
        if isinstance(node, exp.Exists):
            return "an EXISTS subquery"
        if isinstance(node, exp.In) and node.args.get("query") is not None:
            return "an IN subquery"
        if isinstance(node, exp.Select) and node is not body:
            return "a scalar subquery"
    if with_ is not None and with_.expressions:
        return f"a WITH whose CTE {with_.expressions[0].alias_or_name} is more than a filter " \
               "of base tables"
    return None


def set_operation_name(tree: exp.SetOperation) -> str:
    if isinstance(tree, exp.Union):
        return "UNION" if tree.args.get("distinct") else "UNION ALL"
    return "INTERSECT" if isinstance(tree, exp.Intersect) else "EXCEPT"


def leftmost(tree: exp.Expression) -> exp.Select | None:
    """The SELECT whose items name a block's outputs (a set operation's first branch)."""
    while isinstance(tree, (exp.SetOperation, exp.Subquery)):
        tree = tree.this
    return tree if isinstance(tree, exp.Select) else None


def why_full(reason: str) -> str:
    return f"{reason} has no increment: rebuilt in full at each load"


def compile_full(name: str, select_sql: str, schemas, current_db: str,
                 reason: str) -> DatamapDefinition:
    """The definition of a datamap refreshed in full (its rows as the definition gives
    them), or DatamapDefinitionError naming what even a full rebuild cannot keep."""
    name = name.lower()
    tree = parse(select_sql)
    check_tables(name, tree, schemas, current_db)
    head = leftmost(tree)
    if head is None:
        raise refuse(name, "the query must be a SELECT")
    if any(isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star))
           for e in head.expressions):
        raise refuse(name, "SELECT * is not supported; list the columns")
    user_names = [spark_output_name(e) for e in head.expressions]
    try:
        qualify_tree(tree, make_schema(schemas), current_db)
    except NormalizeError as e:
        raise DatamapDefinitionError(f"datamap {name}: {e}", "42S02") from e
    quote_unsafe(tree)
    _check_full(name, tree, reason)
    tree.set("order", None)
    head = leftmost(tree)
    names = _column_names(user_names)
    types = _output_types(head, schemas)
    columns = tuple(StoredColumn(name=n, role="column", expr_sql=_unaliased(e).sql(DIALECT),
                                 type=t or "") for n, e, t in zip(names, head.expressions, types))
    qualified_sql = tree.sql(DIALECT)
    for e, n in zip(list(head.expressions), names):
        e.replace(exp.alias_(_unaliased(e).copy(), exp.to_identifier(n)))
    tables = _base_tables(tree)
    if not tables:
        raise refuse(name, "the query reads no table")
    first_db = tables[0].split(".")[0]
    return DatamapDefinition(
        name=name, database=first_db, table=f"{first_db}.{name}_table", select_sql=select_sql,
        base_tables=tables, columns=columns, is_aggregate=False, qualified_sql=qualified_sql,
        build_select=tree.sql(DIALECT), refresh=FULL, refresh_reason=why_full(reason))


def _check_full(name: str, tree: exp.Expression, reason: str) -> None:
    """What a full rebuild cannot keep either, each refusal naming the construct."""
    for node in tree.walk():
        if isinstance(node, exp.Window):
            raise refuse(name, f"window functions are not supported in a datamap query "
                               f"(even refreshed in full, for its {reason})")
        if isinstance(node, (exp.Select, exp.SetOperation)) and (
                node.args.get("limit") or node.args.get("offset")):
            raise refuse(name, "LIMIT is not supported in a datamap query (which rows it keeps "
                               "is not fixed)")
        if isinstance(node, exp.Anonymous) and node.name.lower() == "timeseries":
            raise refuse(name, f"timeseries() is not supported in a datamap refreshed in full "
                               f"(its {reason})")
    bad = nondeterministic(tree)
    if bad:
        raise refuse(name, f"non-deterministic function {bad} in a datamap query")
    for node in tree.walk():
        if isinstance(node, _ORDER_DEPENDENT):
            raise refuse(name, f"{node.sql(DIALECT)}: its value depends on the order Spark "
                               "reads the rows in, so a rebuild could keep another")


# aggregates whose value depends on the order rows arrive in (ties of mode, max_by, min_by)
_ORDER_DEPENDENT = (exp.First, exp.Last, exp.FirstValue, exp.LastValue, exp.AnyValue,
                    exp.ArrayAgg, exp.ArrayUniqueAgg, exp.ApproxQuantile, exp.Mode, exp.ArgMax,
                    exp.ArgMin)


def _unaliased(e: exp.Expression) -> exp.Expression:
    return e.this if isinstance(e, exp.Alias) else e


def _column_names(user_names: list[str | None]) -> list[str]:
    used = {SEGMENT_COLUMN}
    out = []
    for i, n in enumerate(user_names):
        base = re.sub(r"[^a-z0-9_]+", "_", (n or f"expr_{i}").lower()).strip("_") or f"expr_{i}"
        if base[0].isdigit():
            base = "c_" + base
        cand, k = base, 2
        while cand in used:
            cand, k = f"{base}_{k}", k + 1
        used.add(cand)
        out.append(cand)
    return out


def _output_types(head: exp.Select, schemas) -> list[str | None]:
    """The rewriter's types of a plain block's outputs (Spark's replace them at CREATE);
    None where a subquery or another block decides."""
    aliases = {}
    for rel in [(head.args.get("from_") or exp.From()).this,
                *[j.this for j in head.args.get("joins") or []]]:
        if isinstance(rel, exp.Table) and rel.db:
            aliases[rel.alias_or_name] = schemas.get(rel.db, {}).get(rel.name, {})

    def column_type(col: exp.Column) -> str | None:
        return aliases.get(col.table, {}).get(col.name)
    return [sparktypes.infer(_unaliased(e), column_type) for e in head.expressions]


def _base_tables(tree: exp.Expression) -> tuple[str, ...]:
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    out: dict[str, None] = {}
    for t in tree.find_all(exp.Table):
        if t.db or t.name.lower() not in ctes:
            out[f"{t.db}.{t.name}".lower()] = None
    return tuple(out)


@dataclass
class FullForm:
    """A full datamap ready for matching: its canonical block (rebuilt_match.canonical)."""
    definition: DatamapDefinition
    canon: str
    tree: exp.Expression = field(repr=False)   # the canonical tree (read, never changed)


def canonical(node: exp.Expression) -> exp.Expression:
    """A copy of a qualified block in the form two spellings of one query share: table and
    derived-table aliases renamed in order of appearance (a bijection, so the meaning is
    kept), the outer projection's aliases (only names, which the caller keeps apart) and the
    block's own ORDER BY / LIMIT / OFFSET dropped (the caller puts them back)."""
    c = node.copy()
    for arg in ("order", "limit", "offset"):
        c.set(arg, None)
    renamed: dict[str, str] = {}
    aliases = [a for a in c.find_all(exp.TableAlias) if not isinstance(a.parent, exp.CTE)]
    for a in aliases:
        renamed.setdefault(a.name.lower(), f"_t{len(renamed) + 1}")
    for a in aliases:
        if a.name:
            a.set("this", exp.to_identifier(renamed[a.name.lower()]))
    for col in c.find_all(exp.Column):
        if col.table and col.table.lower() in renamed:
            col.set("table", exp.to_identifier(renamed[col.table.lower()]))
    for head in _heads(c):
        head.set("expressions", [_unaliased(e) for e in head.expressions])
    return c


def _heads(tree: exp.Expression) -> list[exp.Select]:
    """The SELECTs whose items are a block's outputs (every branch of a set operation)."""
    if isinstance(tree, exp.SetOperation):
        return _heads(tree.this) + _heads(tree.expression)
    if isinstance(tree, exp.Subquery):
        return _heads(tree.this)
    return [tree] if isinstance(tree, exp.Select) else []


def full_form(definition: DatamapDefinition, schemas) -> FullForm:
    """The matcher's form of a stored full definition (rebuilt_match.py reads it)."""
    tree = parse(definition.qualified_sql)
    try:
        qualify_tree(tree, make_schema(schemas), definition.database)
    except NormalizeError as e:
        raise DatamapDefinitionError(f"datamap {definition.name}: {e}", "42S02") from e
    quote_unsafe(tree)
    canon = canonical(tree)
    return FullForm(definition, canon.sql(DIALECT), canon)


def refresh_mode(definition: DatamapDefinition | None) -> tuple[str, str]:
    """SHOW DATAMAP's Refresh Mode and Refresh Reason: `full` and the construct, or
    `incremental` and what a load appends (with what is stored for mergeable distinct
    counts: the distinct values per group, or an HLL sketch)."""
    if definition is None:
        return "NA", ""
    if definition.refresh == FULL:
        return FULL, definition.refresh_reason
    what = ("the new rows' partial aggregates are appended as a segment"
            if definition.is_aggregate else "the new rows are appended as a segment")
    return INCREMENTAL, "; ".join([what, *distinct_storage(definition)])


def distinct_storage(definition: DatamapDefinition) -> list[str]:
    """One phrase per distinct aggregate of the definition: what is stored to merge it."""
    out: list[str] = []
    for c in definition.columns:
        if c.agg == "hll":
            out.append(f"approximate distinct count: HLL sketch column {c.name} ({c.expr_sql})")
    try:
        tree = parse(definition.qualified_sql or definition.select_sql)
    except NormalizeError:
        return out
    groups = {}
    for c in definition.columns:
        if c.role == "group":
            try:
                groups.setdefault(parse(c.expr_sql).sql(DIALECT), c.name)
            except NormalizeError:
                continue
    seen = set()
    for d in tree.find_all(exp.Distinct):
        call = d.parent
        if not isinstance(call, exp.AggFunc) or call.sql(DIALECT) in seen:
            continue
        seen.add(call.sql(DIALECT))
        cols = [groups.get(a.sql(DIALECT)) for a in d.expressions]
        if all(cols):
            out.append(f"exact {call.sql(DIALECT)}: the distinct values of its argument kept "
                       f"per group in column{'s' if len(cols) > 1 else ''} {', '.join(cols)}")
    return out
