"""Datamap layout: definition SELECT -> stored columns, and the SELECT that builds them.

Layout rules (issue 3, item 1):
  * every grouping expression is a stored column (role group), named after the user's alias,
    else the column name, else expr_<n>;
  * every aggregate call found in the projection is stored once, re-aggregatable:
    sum(x) -> sum, count(x) -> count, count(*) / count(1) -> count_star, min, max, and
    avg(x) -> sum(x) + count(x); names <kind>_<column> (or the alias of a lone aggregate);
  * a projection-only (SPJ) definition stores each projected expression (role column);
    SELECT DISTINCT without aggregates is a GROUP BY of its projection;
  * names are lower-case, unique, never the segment column.
Refused (DatamapDefinitionError): unknown table/column (42S02); LIMIT, UNION, HAVING,
window functions, subqueries, DISTINCT aggregates, other aggregates, non-deterministic
functions, SELECT *, more than one timeseries granularity (0A000); grouping expressions
missing from the projection or ungrouped projected columns (42000).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from sqlglot import exp

from rewriter import sparktypes
from rewriter.bytecache import ByteLRU, text_size
from rewriter.api import SEGMENT_COLUMN, DatamapDefinition, DatamapDefinitionError, StoredColumn
from rewriter.facts import Facts, Unsupported, extract, has_aggregate, is_aggregate_call
from rewriter.normalize import (DIALECT, NormalizeError, key_of, make_schema,
                                ident, parse, qualify_tree, quote_unsafe, spark_output_name)

STORABLE = (exp.Sum, exp.Count, exp.Min, exp.Max, exp.Avg)


@dataclass
class Compiled:
    """A definition prepared for matching (built once per catalog version)."""
    definition: DatamapDefinition
    facts: Facts
    group: list[tuple[exp.Expression, str]] = field(default_factory=list)     # canonical expr, column
    aggs: list[tuple[str, exp.Expression | None, str]] = field(default_factory=list)  # kind, arg, column
    plain: list[tuple[exp.Expression, str]] = field(default_factory=list)     # SPJ columns
    types: dict[str, str] = field(default_factory=dict)                       # column -> type
    granularity: str | None = None
    keyed: dict = field(default_factory=dict)   # match.py's per-equivalence-shape key cache


# Compiled forms by (definition identity, schema): compile_datamap fills it, so the index
# built right after a CREATE does not compile the same definition again. Bounded in bytes:
# a compiled form (sqlglot trees, facts) weighs some tens of times its SQL text; the schema
# part of the key is shared by every entry of one index, so it is not counted per entry.
CACHE_BYTES = 32 << 20
_TREE_WEIGHT = 32


def _entry_size(key: tuple, comp: "Compiled") -> int:
    d = comp.definition
    return text_size(key[:-1]) + _TREE_WEIGHT * (len(d.qualified_sql or d.select_sql)
                                                  + len(d.build_select))


_CACHE: "ByteLRU[tuple, Compiled]" = ByteLRU(CACHE_BYTES, _entry_size)


def schema_key(schemas) -> tuple:
    return tuple(sorted((db, t, tuple(cols.items())) for db, ts in schemas.items() for t, cols in ts.items()))


def _cache_key(d: DatamapDefinition, skey) -> tuple:
    return (d.name, d.qualified_sql or d.select_sql, d.database, d.table, d.version,
            tuple(c.name for c in d.columns), skey)


def compile_datamap(name: str, select_sql: str, schemas, current_db: str) -> DatamapDefinition:
    comp = _compile(name, select_sql, schemas, current_db)
    _CACHE.put(_cache_key(comp.definition, schema_key(schemas)), comp)
    return comp.definition


def compiled_for(definition: DatamapDefinition, schemas, skey=None) -> Compiled:
    """The matcher's form of a catalog definition (cached)."""
    key = _cache_key(definition, skey if skey is not None else schema_key(schemas))
    comp = _CACHE.get(key)
    if comp is None:
        comp = compile_internal(definition, schemas)
        _CACHE.put(key, comp)
    return comp


def compile_internal(definition: DatamapDefinition, schemas) -> Compiled:
    sql = definition.qualified_sql or definition.select_sql
    c = _compile(definition.name, sql, schemas, definition.database)
    if [x.name for x in c.definition.columns] != [x.name for x in definition.columns]:
        raise DatamapDefinitionError(f"datamap {definition.name}: stored columns differ from the catalog's "
                                     "(recreate the datamap)", "HY000")
    c.definition = definition
    return c


def _compile(name: str, select_sql: str, schemas, current_db: str) -> Compiled:
    name = name.lower()
    try:
        tree = parse(select_sql)
    except NormalizeError as e:
        raise DatamapDefinitionError(f"datamap {name}: {e}", "42000") from e
    if isinstance(tree, exp.Union):
        raise DatamapDefinitionError(f"datamap {name}: UNION is not supported in a datamap query", "0A000")
    if not isinstance(tree, exp.Select):
        raise DatamapDefinitionError(f"datamap {name}: the query must be a SELECT", "0A000")
    if tree.args.get("with_"):
        raise DatamapDefinitionError(f"datamap {name}: WITH is not supported in a datamap query", "0A000")
    if tree.args.get("limit") or tree.args.get("offset"):
        raise DatamapDefinitionError(f"datamap {name}: LIMIT is not supported in a datamap query", "0A000")
    if any(isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star))
           for e in tree.expressions):
        raise DatamapDefinitionError(f"datamap {name}: SELECT * is not supported; list the columns", "0A000")
    for t in tree.find_all(exp.Table):
        db = (t.db or current_db).lower()
        if db not in schemas or t.name.lower() not in schemas[db]:
            raise DatamapDefinitionError(f"datamap {name}: table {db}.{t.name.lower()} not found", "42S02")
    user_alias = [e.alias.lower() if isinstance(e, exp.Alias) else None for e in tree.expressions]
    names = [spark_output_name(e) for e in tree.expressions]
    try:
        qualify_tree(tree, make_schema(schemas), current_db)
    except NormalizeError as e:
        raise DatamapDefinitionError(f"datamap {name}: {e}", "42S02") from e
    quote_unsafe(tree)
    if tree.args.get("having"):
        raise DatamapDefinitionError(f"datamap {name}: HAVING is not supported in a datamap query", "0A000")
    if any(isinstance(n, exp.Window) for n in tree.walk()):
        raise DatamapDefinitionError(f"datamap {name}: window functions are not supported in a datamap query", "0A000")
    try:
        facts = extract(tree, schemas, names)
    except Unsupported as e:
        raise DatamapDefinitionError(f"datamap {name}: {e}", "0A000") from e
    first_db = facts.edges[0].table.split(".")[0]
    comp = Compiled(definition=None, facts=facts)  # type: ignore[arg-type]
    used_names: set[str] = {SEGMENT_COLUMN}

    def column_type(col: exp.Column) -> str | None:
        return facts.column_types.get(f"{col.db}.{col.table}.{col.name}")

    alias_tables = facts.table_of_alias()

    def qtype(col: exp.Column) -> str | None:
        db, t = alias_tables.get(col.table, ".").split(".", 1)
        return schemas.get(db, {}).get(t, {}).get(col.name)

    def unique(base: str) -> str:
        base = re.sub(r"[^a-z0-9_]+", "_", base.lower()).strip("_") or "col"
        if base[0].isdigit():
            base = "c_" + base
        cand, n = base, 2
        while cand in used_names:
            cand, n = f"{base}_{n}", n + 1
        used_names.add(cand)
        return cand

    grans = set()
    for node in tree.walk():
        if isinstance(node, exp.Anonymous) and node.name.lower() == "timeseries":
            args = node.expressions
            if len(args) != 2 or not isinstance(args[1], exp.Literal) or not args[1].is_string:
                raise DatamapDefinitionError(f"datamap {name}: timeseries() takes a column and a granularity literal", "42000")
            grans.add(args[1].this.lower())
    if len(grans) > 1:
        raise DatamapDefinitionError(f"datamap {name}: more than one timeseries granularity ({', '.join(sorted(grans))})", "0A000")
    comp.granularity = grans.pop() if grans else None

    qualified_items = [e.this if isinstance(e, exp.Alias) else e for e in tree.expressions]
    columns: list[StoredColumn] = []
    build_items: list[exp.Expression] = []
    is_agg = facts.is_aggregate or facts.distinct
    group_keys = {key_of(g): g for g in facts.group}
    if facts.distinct and not facts.is_aggregate:
        group_keys = {key_of(e): e for _, e in facts.outputs}
    out_keys = set()
    agg_seen: dict[tuple[str, str], str] = {}

    def add(role, expr_sql_node, canon, col_name, ctype, agg=None):
        columns.append(StoredColumn(name=col_name, role=role, expr_sql=_translate(expr_sql_node, qtype).sql(DIALECT),
                                    type=ctype or "", agg=agg))
        build_items.append(exp.alias_(_translate(expr_sql_node, qtype), ident(col_name)))
        comp.types[col_name] = ctype or ""

    for i, ((_, canon), q_item) in enumerate(zip(facts.outputs, qualified_items)):
        if not is_agg:
            col_name = unique(user_alias[i] or (canon.name if isinstance(canon, exp.Column) else f"expr_{i}"))
            add("column", q_item, canon, col_name, sparktypes.infer(canon, column_type))
            comp.plain.append((canon, col_name))
            continue
        if not has_aggregate(canon):
            k = key_of(canon)
            if k not in group_keys:
                raise DatamapDefinitionError(
                    f"datamap {name}: {q_item.sql(DIALECT)} is neither grouped nor aggregated", "42000")
            if k in out_keys:
                continue
            out_keys.add(k)
            col_name = unique(user_alias[i] or (canon.name if isinstance(canon, exp.Column) else f"expr_{i}"))
            add("group", q_item, canon, col_name, sparktypes.infer(canon, column_type))
            comp.group.append((canon, col_name))
            continue
        lone = user_alias[i] if is_aggregate_call(canon) else None
        pairs = list(zip([n for n in canon.walk() if is_aggregate_call(n)],
                         [n for n in q_item.walk() if is_aggregate_call(n)]))
        for agg_node, q_node in pairs:
            if not isinstance(agg_node, STORABLE):
                raise DatamapDefinitionError(
                    f"datamap {name}: aggregate {q_node.sql(DIALECT)} is not supported (sum, count, min, max, avg)", "0A000")
            arg = agg_node.this
            if isinstance(arg, exp.Distinct):
                raise DatamapDefinitionError(
                    f"datamap {name}: {q_node.sql(DIALECT)}: DISTINCT aggregates cannot be re-aggregated", "0A000")
            if has_aggregate(arg) if arg is not None else False:
                raise DatamapDefinitionError(f"datamap {name}: nested aggregate {q_node.sql(DIALECT)}", "0A000")
            star = isinstance(agg_node, exp.Count) and (arg is None or isinstance(arg, exp.Star) or
                                                         (isinstance(arg, exp.Literal) and not arg.is_string))
            arg_type = None if star else sparktypes.infer(arg, column_type)
            argname = "star" if star else (arg.name if isinstance(arg, exp.Column) else f"expr_{i}")
            kinds = {exp.Sum: ["sum"], exp.Count: ["count_star" if star else "count"], exp.Min: ["min"],
                     exp.Max: ["max"], exp.Avg: ["sum", "count"]}[type(agg_node)]
            for kind in kinds:
                k = (kind, "" if star else key_of(arg))
                if k in agg_seen:
                    continue
                if kind == "sum":
                    ctype = sparktypes.sum_type(arg_type)
                    if ctype is None:
                        raise DatamapDefinitionError(
                            f"datamap {name}: cannot determine a numeric type for {q_node.sql(DIALECT)}", "0A000")
                elif kind in ("count", "count_star"):
                    ctype = "bigint"
                else:
                    ctype = arg_type
                if lone and len(kinds) == 1:
                    base = lone
                elif lone:
                    base = f"{lone}_{kind}"
                else:
                    base = "count_star" if kind == "count_star" else f"{kind}_{argname}"
                col_name = unique(base)
                agg_seen[k] = col_name
                q_arg = None if star else q_node.this
                node = {"sum": lambda a: exp.Sum(this=a), "count": lambda a: exp.Count(this=a),
                        "count_star": lambda a: exp.Count(this=exp.Star()), "min": lambda a: exp.Min(this=a),
                        "max": lambda a: exp.Max(this=a)}[kind](q_arg.copy() if q_arg is not None else None)
                canon_node = node.copy() if star else type(node)(this=arg.copy())
                add("agg", node, canon_node, col_name, ctype, agg=kind)
                comp.aggs.append((kind, None if star else arg, col_name))
    for k, g in group_keys.items():
        if k not in out_keys and is_agg:
            raise DatamapDefinitionError(
                f"datamap {name}: grouping expression {g.sql(DIALECT)} must be in the projection", "42000")
    if not columns:
        raise DatamapDefinitionError(f"datamap {name}: the query projects nothing storable", "0A000")

    build = tree.copy()
    build.set("expressions", build_items)
    build.set("order", None)
    build.set("distinct", None)
    if is_agg:
        groups = [_translate(g, qtype) for g in
                  ([e for e, n in zip(qualified_items, facts.outputs) if not has_aggregate(n[1])]
                   if facts.distinct and not facts.is_aggregate else
                   (tree.args["group"].expressions if tree.args.get("group") else []))]
        build.set("group", exp.Group(expressions=[g.copy() for g in groups]) if groups else None)
    definition = DatamapDefinition(
        name=name, database=first_db, table=f"{first_db}.{name}_table", select_sql=select_sql,
        base_tables=tuple(e.table for e in facts.edges), columns=tuple(columns), is_aggregate=is_agg,
        join_kinds=tuple(e.kind for e in facts.edges[1:]), qualified_sql=_qualified_text(tree, user_alias),
        build_select=build.sql(DIALECT))
    comp.definition = definition
    return comp


def _qualified_text(tree: exp.Select, user_alias) -> str:
    """The qualified definition with only the user's own aliases (qualify invents _col_N
    aliases, which would otherwise change the stored column names on recompilation)."""
    t = tree.copy()
    items = []
    for e, a in zip(t.expressions, user_alias):
        items.append(e.this if isinstance(e, exp.Alias) and a is None else e)
    t.set("expressions", items)
    return t.sql(DIALECT)


def _translate(node: exp.Expression, qtype) -> exp.Expression:
    """timeseries(col, 'gran') -> Spark SQL through rewriter.timeseries (other engineer's)."""
    node = node.copy()
    calls = [n for n in node.walk() if isinstance(n, exp.Anonymous) and n.name.lower() == "timeseries"]
    if not calls:
        return node
    try:
        from rewriter import timeseries
    except ImportError as e:  # pragma: no cover - depends on the other module
        raise DatamapDefinitionError("timeseries() is not available yet", "0A000") from e
    for call in calls:
        col = call.expressions[0]
        ctype = qtype(col) if isinstance(col, exp.Column) else None
        new = timeseries.translate(call, ctype or "timestamp")
        if call is node:
            return new
        call.replace(new)
    return node


def build_sql(definition: DatamapDefinition, sources) -> str:
    """The SELECT producing exactly definition.columns from the base tables, reading
    sources[db.table] instead of a base table where given."""
    if not definition.build_select:
        raise DatamapDefinitionError(f"datamap {definition.name}: definition was not compiled", "HY000")
    tree = parse(definition.build_select)
    for t in list(tree.find_all(exp.Table)):
        full = f"{t.db}.{t.name}"
        if full in (sources or {}):
            alias = t.alias_or_name
            repl = exp.to_table(sources[full], dialect=DIALECT)
            repl.set("alias", exp.TableAlias(this=exp.to_identifier(alias)))
            t.replace(repl)
    return tree.sql(DIALECT)
