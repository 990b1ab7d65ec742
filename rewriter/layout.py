"""Datamap layout: definition SELECT -> stored columns, and the SELECT that builds them.

Layout rules (what a datamap's storage table holds):
  * every grouping expression is a stored column (role group), named after the user's alias,
    else the column name, else expr_<n>;
  * every aggregate call found in the projection is stored once, re-aggregatable:
    sum(x) -> sum, count(x) -> count, count(*) / count(1) -> count_star, min, max, and
    avg(x) -> sum(x) + count(x); names <kind>_<column> (or the alias of a lone aggregate);
    hll_sketch_agg(x[, k]) -> a mergeable sketch, agg "hll", type binary, k written out
    (rewriter/distinct.py; DMPROPERTIES('distinct_sketch'='hll') turns
    approx_count_distinct into it before compiling);
  * a projection-only (SPJ) definition stores each projected expression (role column);
    SELECT DISTINCT without aggregates is a GROUP BY of its projection;
  * names are lower-case, unique, never the segment column.
  * var_pop / var_samp / stddev_pop / stddev_samp (and variance, stddev, std) of x store
    count(x), sum and sum of squares of CAST(x AS DOUBLE), min(x) and max(x) (rewriter/moments.py);
  * a grouping expression the projection leaves out is a group column all the same;
  * HAVING is not applied: its aggregates are stored, the query's HAVING filters;
  * a WITH at the head whose CTEs filter and project base tables is inlined (flatten.py);
  * agg(DISTINCT e, ...) stores each e as a group column as well (the datamap is grouped by
    them too), from which agg(DISTINCT e) at the definition's grain or coarser is exact.
Refused (DatamapDefinitionError): unknown table/column (42S02); LIMIT, window
functions, other aggregates, non-deterministic functions, SELECT *, more than one
timeseries granularity (0A000); ungrouped projected columns (42000). A self-join (one table
read twice, under two aliases) is one relation per reference (rewriter/self_joins.py):
its base_tables name the table once per reference. The checks on the definition's shape
and its aggregate calls are rewriter/definition_checks.py.
A UNION, GROUPING SETS / CUBE / ROLLUP, a subquery inside the block or a CTE that is not a
per-row filter (refused here) make a datamap refreshed in full instead (rewriter/rebuilt.py:
compile_definition falls back to it, compile_internal recompiles it so).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from sqlglot import exp

from rewriter import distinct, moments, sparktypes, timeseries
from rewriter.aggregates import is_aggregate_call
from rewriter.api import SEGMENT_COLUMN, DatamapDefinition, DatamapDefinitionError, StoredColumn
from rewriter.definition_checks import (check_qualified, check_storable, check_tables, granularity,
                                        inline_ctes, parse_definition, refuse)
from rewriter.facts import Facts, Unsupported, extract, has_aggregate
from rewriter.rebuilt import FULL, FullForm, compile_full, construct, full_form
from rewriter.normalize import (DIALECT, NormalizeError, key_of, make_schema,
                                ident, qualify_tree, quote_unsafe, spark_output_name)

@dataclass
class Compiled:
    """A definition prepared for matching (built once per catalog version)."""
    definition: DatamapDefinition
    facts: Facts
    # (canonical expression, column)
    group: list[tuple[exp.Expression, str]] = field(default_factory=list)
    # (kind, argument, column)
    aggs: list[tuple[str, exp.Expression | None, str]] = field(default_factory=list)
    plain: list[tuple[exp.Expression, str]] = field(default_factory=list)     # SPJ columns
    types: dict[str, str] = field(default_factory=dict)                       # column -> type
    granularity: str | None = None
    keyed: dict = field(default_factory=dict)   # match.py's per-equivalence-shape key cache


def schema_key(schemas) -> tuple:
    return tuple(sorted((db, t, tuple(cols.items())) for db, ts in schemas.items() for t, cols in ts.items()))


def compile_definition(name: str, select_sql: str, schemas, current_db: str) -> Compiled | FullForm:
    """A user's definition SELECT -> its Compiled form (a new DatamapDefinition inside); a
    definition with a construct no increment exists for (rewriter/rebuilt.py) -> the
    FullForm of a datamap refreshed in full."""
    try:
        return _compile(name, select_sql, schemas, current_db)
    except DatamapDefinitionError as e:
        reason = construct(select_sql) if e.sqlstate == "0A000" else None
        if reason is None:
            raise
    definition = compile_full(name, select_sql, schemas, current_db, reason)
    return full_form(definition, schemas)


def compile_internal(definition: DatamapDefinition, schemas) -> Compiled | FullForm:
    if definition.refresh == FULL:
        return full_form(definition, schemas)
    sql = definition.qualified_sql or definition.select_sql
    c = _compile(definition.name, sql, schemas, definition.database)
    if [x.name for x in c.definition.columns] != [x.name for x in definition.columns]:
        raise DatamapDefinitionError(f"datamap {definition.name}: stored columns differ from the catalog's "
                                     "(recreate the datamap)", "HY000")
    c.definition = definition
    return c


def _compile(name: str, select_sql: str, schemas, current_db: str) -> Compiled:
    name = name.lower()
    tree = parse_definition(name, select_sql)
    check_tables(name, tree, schemas, current_db)
    user_alias = [e.alias.lower() if isinstance(e, exp.Alias) else None for e in tree.expressions]
    names = [spark_output_name(e) for e in tree.expressions]
    try:
        qualify_tree(tree, make_schema(schemas), current_db)
    except NormalizeError as e:
        raise DatamapDefinitionError(f"datamap {name}: {e}", "42S02") from e
    if tree.args.get("with_"):
        inline_ctes(name, tree)
    quote_unsafe(tree)
    check_qualified(name, tree)
    try:
        facts = extract(tree, schemas, names)
    except Unsupported as e:
        raise DatamapDefinitionError(f"datamap {name}: {e}", "0A000") from e
    if facts.subtotals is not None:
        raise refuse(name, "GROUPING SETS / CUBE / ROLLUP is not supported in a datamap query")
    comp = Compiled(definition=None, facts=facts)  # type: ignore[arg-type]
    comp.granularity = granularity(name, tree)
    qualified_items = [e.this if isinstance(e, exp.Alias) else e for e in tree.expressions]
    layout = _Layout(name, comp, schemas)
    group_node = tree.args.get("group")
    layout.place_outputs(qualified_items, user_alias,
                         list(group_node.expressions) if group_node else [])
    if facts.having is not None:
        # stored unfiltered: the aggregates HAVING reads are kept, and a query's HAVING
        # (the definition's own included) is applied when the datamap answers it
        layout.place_having(facts.having, tree.args["having"].this)
    first_db = facts.edges[0].table.split(".")[0]
    comp.definition = DatamapDefinition(
        name=name, database=first_db, table=f"{first_db}.{name}_table", select_sql=select_sql,
        base_tables=tuple(e.base for e in facts.edges), columns=tuple(layout.columns),
        is_aggregate=layout.is_agg, join_kinds=tuple(e.kind for e in facts.edges[1:]),
        qualified_sql=_qualified_text(tree, user_alias),
        build_select=_build_select(tree, layout, qualified_items).sql(DIALECT))
    return comp


# ---------------------------------------------------------------- naming and typing

# The stored aggregates each aggregate call becomes (avg is sum + count: re-aggregatable).
_KINDS = {exp.Sum: ("sum",), exp.Min: ("min",), exp.Max: ("max",), exp.Avg: ("sum", "count")}
_STORED_CALL = {"sum": exp.Sum, "count": exp.Count, "min": exp.Min, "max": exp.Max}


def _is_count_star(agg_node: exp.Expression) -> bool:
    arg = agg_node.this
    return isinstance(agg_node, exp.Count) and (arg is None or isinstance(arg, exp.Star) or
                                                (isinstance(arg, exp.Literal) and not arg.is_string))


def _stored_kinds(agg_node: exp.Expression, star: bool) -> tuple[str, ...]:
    if isinstance(agg_node, exp.Count):
        return ("count_star",) if star else ("count",)
    return _KINDS[type(agg_node)]


def _stored_type(name: str, kind: str, arg_type: str | None, q_node: exp.Expression) -> str | None:
    """Spark's type of a stored aggregate column: sum widens, counts are bigint."""
    if kind == "sum":
        ctype = sparktypes.sum_type(arg_type)
        if ctype is None:
            raise refuse(name, f"cannot determine a numeric type for {q_node.sql(DIALECT)}")
        return ctype
    if kind in ("count", "count_star"):
        return "bigint"
    return arg_type


def _agg_column_base(lone: str | None, kind: str, n_kinds: int, argname: str) -> str:
    """A lone aggregate keeps the user's alias (avg's two columns get a suffix)."""
    if lone and n_kinds == 1:
        return lone
    if lone:
        return f"{lone}_{kind}"
    return "count_star" if kind == "count_star" else f"{kind}_{argname}"


def _stored_call(kind: str, q_arg: exp.Expression | None) -> exp.Expression:
    if kind == "count_star":
        return exp.Count(this=exp.Star())
    return _STORED_CALL[kind](this=q_arg.copy() if q_arg is not None else None)


class _Layout:
    """The stored columns of one definition, placed output by output: unique names, Spark
    types, and the build SELECT's items."""

    def __init__(self, name: str, comp: Compiled, schemas):
        self.name = name
        self.comp = comp
        facts = comp.facts
        self.facts = facts
        self.schemas = schemas
        self.alias_tables = facts.base_of_alias()
        self.columns: list[StoredColumn] = []
        self.build_items: list[exp.Expression] = []
        self.used_names: set[str] = {SEGMENT_COLUMN}
        self.is_agg = facts.is_aggregate or facts.distinct
        self.group_keys = {key_of(g): g for g in facts.group}
        if facts.distinct and not facts.is_aggregate:
            self.group_keys = {key_of(e): e for _, e in facts.outputs}
        self.out_keys: set = set()
        self.agg_seen: dict[tuple[str, str], str] = {}
        self.extra_groups: list[exp.Expression] = []   # DISTINCT arguments, grouped by too

    def column_type(self, col: exp.Column) -> str | None:
        return self.facts.column_types.get(f"{col.db}.{col.table}.{col.name}")

    def qtype(self, col: exp.Column) -> str | None:
        db, t = self.alias_tables.get(col.table, ".").split(".", 1)
        return self.schemas.get(db, {}).get(t, {}).get(col.name)

    def unique(self, base: str) -> str:
        base = re.sub(r"[^a-z0-9_]+", "_", base.lower()).strip("_") or "col"
        if base[0].isdigit():
            base = "c_" + base
        cand, n = base, 2
        while cand in self.used_names:
            cand, n = f"{base}_{n}", n + 1
        self.used_names.add(cand)
        return cand

    def add(self, role: str, node: exp.Expression, col_name: str, ctype: str | None,
            agg: str | None = None) -> None:
        translated = _translate(node, self.qtype)
        self.columns.append(StoredColumn(name=col_name, role=role, expr_sql=translated.sql(DIALECT),
                                         type=ctype or "", agg=agg))
        self.build_items.append(exp.alias_(_translate(node, self.qtype), ident(col_name)))
        self.comp.types[col_name] = ctype or ""

    def place_outputs(self, qualified_items: list[exp.Expression], user_alias: list,
                      qualified_groups: list[exp.Expression]) -> None:
        for i, ((_, canon), q_item) in enumerate(zip(self.facts.outputs, qualified_items)):
            if not self.is_agg:
                self._place_plain(i, canon, q_item, user_alias[i])
            elif not has_aggregate(canon):
                self._place_group(i, canon, q_item, user_alias[i])
            else:
                self._place_aggregates(i, canon, q_item,
                                       user_alias[i] if is_aggregate_call(canon) else None)
        if self.is_agg:
            self._place_hidden_groups(qualified_groups)
        if not self.columns:
            raise refuse(self.name, "the query projects nothing storable")

    def _place_distinct(self, agg_node, q_node) -> None:
        """agg(DISTINCT e, ...): each e is stored as a group column, kept apart from the
        definition's grouping: the datamap holds a row per distinct value within each of
        its groups, and agg(DISTINCT e) of a query at that grain or coarser is computed
        over them (rules/rollup_aggregate.py), merged across segments exactly."""
        for canon, q_arg in zip(agg_node.this.expressions, q_node.this.expressions):
            self._place_hidden(canon, q_arg)

    def _place_hidden(self, canon: exp.Expression, q_group: exp.Expression) -> bool:
        k = key_of(canon)
        if k in self.out_keys:
            return False
        self.out_keys.add(k)
        col_name = self.unique(canon.name if isinstance(canon, exp.Column) else "group_expr")
        self.add("group", q_group, col_name, sparktypes.infer(canon, self.column_type))
        self.comp.group.append((canon, col_name))
        if k not in self.group_keys:
            self.extra_groups.append(q_group)
        return True

    def place_having(self, canon: exp.Expression, q_having: exp.Expression) -> None:
        if has_aggregate(canon):
            self._place_aggregates(len(self.facts.outputs), canon, q_having, None)

    def _place_hidden_groups(self, qualified_groups: list[exp.Expression]) -> None:
        """A grouping expression the projection leaves out is stored all the same (a group
        column no output names): the datamap keeps the definition's grain, and a query
        grouping by it, or by the definition's own outputs, is answered from it."""
        for canon, q_group in zip(self.facts.group, qualified_groups):
            self._place_hidden(canon, q_group)

    def _output_name(self, i: int, canon: exp.Expression, alias: str | None) -> str:
        return self.unique(alias or (canon.name if isinstance(canon, exp.Column) else f"expr_{i}"))

    def _place_plain(self, i, canon, q_item, alias) -> None:
        col_name = self._output_name(i, canon, alias)
        self.add("column", q_item, col_name, sparktypes.infer(canon, self.column_type))
        self.comp.plain.append((canon, col_name))

    def _place_group(self, i, canon, q_item, alias) -> None:
        k = key_of(canon)
        if k not in self.group_keys:
            raise refuse(self.name, f"{q_item.sql(DIALECT)} is neither grouped nor aggregated",
                          "42000")
        if k in self.out_keys:
            return
        self.out_keys.add(k)
        col_name = self._output_name(i, canon, alias)
        self.add("group", q_item, col_name, sparktypes.infer(canon, self.column_type))
        self.comp.group.append((canon, col_name))

    def _place_aggregates(self, i, canon, q_item, lone: str | None) -> None:
        pairs = zip([n for n in canon.walk() if is_aggregate_call(n)],
                    [n for n in q_item.walk() if is_aggregate_call(n)])
        for agg_node, q_node in pairs:
            check_storable(self.name, agg_node, q_node)
            if distinct.is_sketch_agg(agg_node):
                self._place_sketch(i, agg_node, q_node, lone)
                continue
            if moments.is_moment(agg_node):
                self._place_moments(i, agg_node, q_node)
                continue
            if isinstance(agg_node.this, exp.Distinct):
                self._place_distinct(agg_node, q_node)
                continue
            arg = agg_node.this
            star = _is_count_star(agg_node)
            arg_type = None if star else sparktypes.infer(arg, self.column_type)
            argname = "star" if star else (arg.name if isinstance(arg, exp.Column) else f"expr_{i}")
            kinds = _stored_kinds(agg_node, star)
            for kind in kinds:
                k = (kind, "" if star else key_of(arg))
                if k in self.agg_seen:
                    continue
                ctype = _stored_type(self.name, kind, arg_type, q_node)
                col_name = self.unique(_agg_column_base(lone, kind, len(kinds), argname))
                self.agg_seen[k] = col_name
                self.add("agg", _stored_call(kind, None if star else q_node.this), col_name,
                         ctype, agg=kind)
                self.comp.aggs.append((kind, None if star else arg, col_name))

    def _place_moments(self, i, agg_node, q_node) -> None:
        """A variance or standard deviation: the re-aggregatable parts it is computed from
        (rewriter/moments.py), each stored once."""
        arg = moments.argument(agg_node)
        if has_aggregate(arg):
            raise refuse(self.name, f"nested aggregate {q_node.sql(DIALECT)}")
        if not sparktypes.is_numeric(sparktypes.infer(arg, self.column_type)):
            raise refuse(self.name, f"{q_node.sql(DIALECT)}: the argument must be numeric")
        argname = arg.name if isinstance(arg, exp.Column) else f"expr_{i}"
        for kind, part, q_part, base in moments.parts(arg, moments.argument(q_node), argname):
            k = (kind, key_of(part))
            if k in self.agg_seen:
                continue
            ctype = _stored_type(self.name, kind, sparktypes.infer(part, self.column_type), q_node)
            col_name = self.unique(base)
            self.agg_seen[k] = col_name
            self.add("agg", _stored_call(kind, q_part), col_name, ctype, agg=kind)
            self.comp.aggs.append((kind, part, col_name))

    def _place_sketch(self, i, agg_node, q_node, lone: str | None) -> None:
        arg, lgk = agg_node.expressions[0], distinct.sketch_lgk(agg_node)
        k = (f"{distinct.SKETCH_KIND}:{lgk}", key_of(arg))
        if k in self.agg_seen:
            return
        argname = arg.name if isinstance(arg, exp.Column) else f"expr_{i}"
        col_name = self.unique(lone or f"hll_{argname}")
        self.agg_seen[k] = col_name
        call = exp.Anonymous(this="hll_sketch_agg", expressions=[q_node.expressions[0].copy(),
                                                                  exp.Literal.number(lgk)])
        self.add("agg", call, col_name, "binary", agg=distinct.SKETCH_KIND)
        self.comp.aggs.append((k[0], arg, col_name))


# ---------------------------------------------------------------- build SELECT

def _build_select(tree: exp.Select, layout: _Layout, qualified_items) -> exp.Select:
    """The definition with the stored columns as its projection, grouped as stored."""
    facts = layout.facts
    build = tree.copy()
    build.set("expressions", layout.build_items)
    build.set("order", None)
    build.set("having", None)
    build.set("distinct", None)
    if layout.is_agg:
        if facts.distinct and not facts.is_aggregate:
            keys = [e for e, n in zip(qualified_items, facts.outputs) if not has_aggregate(n[1])]
        else:
            keys = tree.args["group"].expressions if tree.args.get("group") else []
            keys = [*keys, *layout.extra_groups]
        groups = [_translate(g, layout.qtype) for g in keys]
        build.set("group", exp.Group(expressions=[g.copy() for g in groups]) if groups else None)
    return build


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
    """timeseries(col, 'gran') -> Spark SQL (rewriter.timeseries)."""
    node = node.copy()
    calls = [n for n in node.walk() if isinstance(n, exp.Anonymous) and n.name.lower() == "timeseries"]
    for call in calls:
        col = call.expressions[0]
        ctype = qtype(col) if isinstance(col, exp.Column) else None
        new = timeseries.translate(call, ctype or "timestamp")
        if call is node:
            return new
        call.replace(new)
    return node
