"""Facts of one qualified SELECT block: the SPJG normal form the matcher works on.

Columns are rewritten to the canonical `db.table.column` form (table aliases disappear,
so a name identifies one table reference). A table read more than once (a self-join) is
one relation per reference: in a datamap definition its n-th reference (FROM order) is
named `db.table#n` from the second on (rewriter/self_joins.py); a query's references are
named by an alias mapping onto a datamap's (extract's `refs`, tried per mapping by
rewriter/index.py), and a query reference no mapping names is an opaque relation, below.
Facts:
  edges       the FROM list: (kind, reference name, alias, ON conjuncts, the base table)
              in FROM order; inner joins' ON conjuncts also go to `preds` (an inner ON
              is a WHERE). In a query (extract(as_query=True)) an edge may also be an
              opaque relation
              (rewriter/derived.py): a derived table or a table's second reference, named
              "#derived.<alias>", its columns keyed so, joined onto the datamap later
  preds       canonical conjuncts of WHERE and inner ON, each classified as
                eq        column = column  (builds the equivalence classes)
                range     column op constant / column IN (constants)
                residual  anything else
  rep         column key -> representative of its equivalence class (non-trivial only)
  ranges      representative -> Range (intersection of that class's range conjuncts)
  group       canonical grouping expressions
  outputs     (output name, canonical expression) — aggregates still inside
  having      canonical
  order       one OrderItem per ORDER BY item: ("alias", (the Ordered node, index of the
              output it names)) or ("expr", the Ordered node over a canonical expression)
A block the matcher cannot reason about raises Unsupported(reason).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Mapping, Union

from sqlglot import exp

from rewriter import derived
from rewriter.self_joins import reference_name
from rewriter import ranges as R
from rewriter import subtotals
from rewriter import timeseries as ts
from rewriter.aggregates import is_aggregate_call
from rewriter.normalize import (DIALECT, canonical_expr, canonical_predicate, column_key,
                                conjuncts, is_constant, key_of, nondeterministic)


class Unsupported(Exception):
    """This block is outside what the rewriter handles; the reason is one line."""


@dataclass
class Pred:
    expr: exp.Expression
    kind: str                       # eq | range | residual
    cols: tuple[str, ...] = ()      # eq: both columns; range: the column
    range: R.Range | None = None


@dataclass
class Edge:
    kind: str                       # from | inner | left
    table: str                      # db.table
    alias: str
    on: list[exp.Expression] = field(default_factory=list)   # canonical, left joins only
    on_key: str = ""
    relation: exp.Expression | None = None   # an opaque derived table (rewriter/derived.py)
    base: str = ""                  # the base table "db.table" a table reference reads


# An ORDER BY item naming an output alias keeps that reference (the rewrite renames it);
# any other item is an expression to derive from the datamap's columns.
OrderItem = Union[tuple[Literal["alias"], tuple[exp.Ordered, int]],
                  tuple[Literal["expr"], exp.Ordered]]


@dataclass
class Facts:
    select: exp.Select
    edges: list[Edge]
    preds: list[Pred]
    rep: dict[str, str]
    ranges: dict[str, R.Range]
    group: list[exp.Expression]
    outputs: list[tuple[str | None, exp.Expression]]
    having: exp.Expression | None
    order: list[OrderItem]
    distinct: bool
    is_aggregate: bool
    column_types: dict[str, str]
    output_aliases: list[str]       # the qualified block's own aliases (ORDER BY may use them)
    # GROUP BY ROLLUP / CUBE / GROUPING SETS: `group` is then the distinct grouping
    # expressions, and outputs, HAVING and ORDER BY carry rewriter.subtotals' markers
    subtotals: "subtotals.Subtotals | None" = None

    @property
    def tables(self) -> frozenset[str]:
        return frozenset(e.table for e in self.edges)

    def table_of_alias(self) -> dict[str, str]:
        return {e.alias: e.table for e in self.edges}

    def base_of_alias(self) -> dict[str, str]:
        """alias -> the base table its reference reads (an opaque relation: its name)."""
        return {e.alias: e.base or e.table for e in self.edges}

    def self_joined(self) -> dict[str, int]:
        """Base tables read more than once -> how many references."""
        counts: dict[str, int] = {}
        for e in self.edges:
            if e.base:
                counts[e.base] = counts.get(e.base, 0) + 1
        return {t: n for t, n in counts.items() if n > 1}


_UNSUPPORTED_ARGS = ("exclude", "operation_modifiers", "for_", "laterals", "pivots", "qualify", "windows", "sort", "cluster",
                     "distribute", "into", "prewhere", "connect", "match", "kind", "locks",
                     "sample", "settings", "format", "options")


def has_aggregate(e: exp.Expression) -> bool:
    return any(is_aggregate_call(n) for n in e.walk())


def extract(select: exp.Select, schemas, names: list[str | None] | None, in_place: bool = False,
            as_query: bool = False, refs: Mapping[str, int] | None = None) -> Facts:
    """Facts of a qualified SELECT. `names` are Spark's output names computed before
    qualification (None entries: unknown). in_place=True lets the facts reuse (and change)
    the select's own expressions: for a disposable tree, it saves the copies.
    as_query=True (a query block, not a datamap definition) also reads `A RIGHT JOIN B ON p`
    (first join only) as `B LEFT JOIN A ON p`, and keeps uncorrelated subqueries in FROM
    and WHERE as opaque relations and conjuncts (rewriter/derived.py). A datamap's FROM
    order names its database and delta-linear tables, and it reads base tables only.
    `refs`: a query's alias mapping, alias -> the ordinal of the datamap reference it
    stands for (rewriter/self_joins.py); a self-joined table's aliases it leaves out are
    opaque relations. Without an entry for a table, its first reference is the table itself
    and the others are opaque. A definition names each reference by its FROM order."""
    opaque = derived.mark(select) if as_query else set()
    _check_block(select, opaque)
    edges, aliases = _edges(select, schemas, as_query, opaque, refs or {})
    canon = _Canoniser(schemas, aliases, {e.alias: e.relation for e in edges},
                       {e.alias: e.base for e in edges})
    preds = _predicates(select, edges, canon, in_place)
    rep = _equivalence(preds)
    rngs = class_ranges(preds, rep)
    group, sub = _grouping(select, canon, in_place)
    outputs, output_aliases = _outputs(select, sub, names, canon, in_place)
    having = select.args.get("having")
    if sub:
        having = exp.Having(this=sub.having) if sub.having is not None else None
    having_expr = canon(canonical_expr(having.this, copy=not in_place)) if having else None
    order = _order(select, sub, output_aliases, canon)
    is_agg = bool(group) or any(has_aggregate(e) for _, e in outputs) or having is not None
    return Facts(select=select, edges=edges, preds=preds, rep=rep, ranges=rngs, group=group,
                 outputs=outputs, having=having_expr, order=order,
                 distinct=bool(select.args.get("distinct")), is_aggregate=is_agg,
                 column_types=canon.types, output_aliases=output_aliases, subtotals=sub)


def _check_block(select: exp.Select, opaque: set[int]) -> None:
    """Refuse a block with a clause, a nested query (other than the opaque ones), a
    generator or a non-deterministic call the matcher cannot reason about."""
    for arg in _UNSUPPORTED_ARGS:
        if select.args.get(arg):
            raise Unsupported(f"{arg.upper()} clause is not supported")
    for key, value in select.args.items():
        if key == "with_" or value is None:
            continue
        for part in value if isinstance(value, list) else [value]:
            if not isinstance(part, exp.Expression):
                continue
            for node in part.walk(prune=lambda n: id(n) in opaque):
                if id(node) in opaque:
                    continue
                if isinstance(node, (exp.Select, exp.Subquery, exp.SetOperation)):
                    raise Unsupported("subquery inside the block")
                if isinstance(node, (exp.Lateral, exp.Explode)):
                    raise Unsupported("LATERAL VIEW / generator")
            nd = nondeterministic(part)
            if nd:
                raise Unsupported(f"non-deterministic function {nd}")


class _Canoniser:
    """Rewrites a block's columns to `db.table.column` (an opaque relation's as
    `#derived.<alias>.column`) and records each column's Spark type in `types`, keyed by
    the canonical column; then canonicalises time buckets, which need those types."""

    def __init__(self, schemas, aliases: dict[str, str],
                 relations: dict[str, exp.Expression | None], bases: dict[str, str]):
        self.schemas, self.aliases, self.relations = schemas, aliases, relations
        self.bases = bases
        self.types: dict[str, str] = {}

    def __call__(self, e: exp.Expression) -> exp.Expression:
        for col in list(derived.outer_columns(e)):
            new = self._column(col)
            if col is e:
                e = new
            else:
                col.replace(new)
        return canonical_buckets(e, self.types)

    def _column(self, col: exp.Column) -> exp.Column:
        if isinstance(col.this, exp.Star):
            raise Unsupported("unexpanded *")
        tbl = self.aliases.get(col.table)
        if tbl is None:
            raise Unsupported(f"column {col.sql(DIALECT)} does not belong to the block")
        db, t = tbl.split(".", 1)
        if db == derived.DERIVED_DB:
            rel = self.relations[col.table]
            table = isinstance(rel, exp.Table)
            ctype = self.schemas[rel.db][rel.name].get(col.name) if table else None
        else:
            bdb, bt = self.bases[col.table].split(".", 1)
            ctype = self.schemas[bdb][bt].get(col.name)
        new = exp.Column(this=exp.to_identifier(col.name), table=exp.to_identifier(t),
                         db=exp.to_identifier(db))
        self.types[column_key(new)] = ctype
        return new


def _predicates(select: exp.Select, edges: list[Edge], canon: _Canoniser,
                in_place: bool) -> list[Pred]:
    """The classified conjuncts of WHERE and of inner joins' ON; a left join's ON
    conjuncts stay on its edge (canonical, with their key)."""
    raw_preds = conjuncts(select.args.get("where").this) if select.args.get("where") else []
    for edge_expr, edge in zip(_join_ons(select), edges):
        if edge.kind == "inner":
            raw_preds.extend(conjuncts(edge_expr))
        elif edge.kind == "left":
            on = [canon(c) for cond in conjuncts(edge_expr) for c in canonical_predicate(cond)]
            edge.on = on
            edge.on_key = "&".join(sorted(key_of(c) for c in on))
    preds: list[Pred] = []
    for raw in raw_preds:
        for c in canonical_predicate(raw, copy=not in_place):
            preds.append(_classify(canon(c), canon.types))
    return preds


def _grouping(select: exp.Select, canon: _Canoniser, in_place: bool
              ) -> tuple[list[exp.Expression], "subtotals.Subtotals | None"]:
    """The canonical grouping expressions, and the subtotals' structure when GROUP BY has
    ROLLUP / CUBE / GROUPING SETS (then the distinct leaves are the grouping)."""
    group_node = select.args.get("group")
    if not subtotals.has_subtotals(group_node):
        exprs = group_node.expressions if group_node else []
        return [canon(canonical_expr(g, copy=not in_place)) for g in exprs], None
    try:
        sub = subtotals.prepare(select)
    except subtotals.SubtotalError as e:
        raise Unsupported(str(e)) from None
    group = [canon(g) for g in sub.leaves]
    try:
        subtotals.check_leaves(group, sub.texts)
    except subtotals.SubtotalError as e:
        raise Unsupported(str(e)) from None
    return group, sub


def _outputs(select: exp.Select, sub, names: list[str | None] | None, canon: _Canoniser,
             in_place: bool) -> tuple[list[tuple[str | None, exp.Expression]], list[str]]:
    """(Spark's output name, canonical expression) per output, and the block's own aliases."""
    outputs = []
    output_aliases = []
    for i, item in enumerate(sub.items if sub else select.expressions):
        inner = item.this if isinstance(item, exp.Alias) else item
        output_aliases.append(item.alias_or_name)
        name = names[i] if names is not None and i < len(names) else item.alias_or_name
        outputs.append((name, canon(canonical_expr(inner, copy=not in_place))))
    return outputs, output_aliases


def _order(select: exp.Select, sub, output_aliases: list[str],
           canon: _Canoniser) -> list[OrderItem]:
    """One OrderItem per ORDER BY item: a reference to an output alias, or an expression."""
    order: list[OrderItem] = []
    if not select.args.get("order"):
        return order
    for o in sub.order if sub else select.args["order"].expressions:
        ref = o.this
        if isinstance(ref, exp.Column) and not ref.table and ref.name in output_aliases:
            order.append(("alias", (o, output_aliases.index(ref.name))))
        else:
            item = o.copy()
            item.set("this", canon(canonical_expr(o.this)))
            order.append(("expr", item))
    return order


def class_ranges(preds: list[Pred], rep: dict[str, str]) -> dict[str, R.Range]:
    """Representative -> the intersection of its class's range conjuncts."""
    rngs: dict[str, R.Range] = {}
    for p in preds:
        if p.kind == "range":
            r = rep.get(p.cols[0], p.cols[0])
            rngs[r] = rngs[r].intersect(p.range) if r in rngs else p.range
    return rngs


def canonical_buckets(e: exp.Expression, types: dict[str, str]) -> exp.Expression:
    """timeseries(col, 'gran'), date_trunc('<unit>', col) and the n-minute form -> one form
    (rewriter.timeseries.bucket_expr), so a datamap bucket matches any spelling of it."""
    for node in list(e.walk()):
        if not isinstance(node, (exp.Anonymous, exp.TimestampTrunc, exp.Sub)):
            continue
        try:
            found = ts.bucket_of(node)
            if found is None:
                continue
            col, gran = found
            ctype = types.get(column_key(col)) if isinstance(col, exp.Column) else None
            ts.check_granularity(gran, ctype, what=node.sql(DIALECT))
        except ValueError as err:
            raise Unsupported(str(err)) from None
        new = ts.bucket_expr(col, gran)
        if node is e:
            return new
        node.replace(new)
    return e


def _join_ons(select: exp.Select) -> list[exp.Expression | None]:
    return [None] + [j.args.get("on") for j in select.args.get("joins") or []]


def _edges(select: exp.Select, schemas, as_query: bool = False, opaque: set[int] = frozenset(),
           refs: Mapping[str, int] = {}) -> tuple[list[Edge], dict[str, str]]:
    from_ = select.args.get("from_")
    if from_ is None:
        raise Unsupported("no FROM")
    items = [(from_.this, None)] + [(j.this, j) for j in select.args.get("joins") or []]
    mapped = {f"{r.db}.{r.name}" for r, _ in items
              if isinstance(r, exp.Table) and r.alias_or_name in refs}
    edges, aliases, counts, named = [], {}, {}, set()
    for rel, join in items:
        relation = None
        if id(rel) in opaque:
            relation, name = rel, f"{derived.DERIVED_DB}.{rel.alias}"
            rel = exp.Table(this=exp.to_identifier(rel.alias), db=exp.to_identifier(derived.DERIVED_DB),
                            alias=exp.TableAlias(this=exp.to_identifier(rel.alias)))
        else:
            if not isinstance(rel, exp.Table) or rel.args.get("joins"):
                raise Unsupported("FROM item is not a base table")
            if not rel.db or rel.args.get("catalog"):
                raise Unsupported(f"{rel.name} is not a base table")
            if rel.args.get("sample") or rel.args.get("version") or rel.args.get("partition") \
                    or rel.args.get("hints") or rel.args.get("pivots") or rel.args.get("laterals"):
                raise Unsupported(f"table modifier on {rel.name}")
            name = f"{rel.db}.{rel.name}"
            if rel.db not in schemas or rel.name not in schemas[rel.db]:
                raise Unsupported(f"no schema for table {name}")
        base = ""
        if relation is None:
            base, name = name, reference_name(name, rel.alias_or_name, as_query, refs, mapped,
                                               counts, named)
            if name is None:
                # a query's reference no mapping names is joined onto the datamap's rows
                # like a derived table (rewriter/derived.py); its columns get their own keys
                relation, name, base = rel, f"{derived.DERIVED_DB}.{rel.alias_or_name}", ""
        alias = rel.alias_or_name
        if join is None:
            kind = "from"
        else:
            side = (join.side or "").upper()
            jkind = (join.kind or "").upper()
            if join.args.get("using") or join.args.get("method"):
                raise Unsupported("USING / NATURAL join")
            if side == "RIGHT" and jkind in ("", "OUTER") and as_query and len(edges) == 1 \
                    and join.args.get("on") is not None:
                # (A RIGHT JOIN B ON p) is (B LEFT JOIN A ON p); later joins see the same rows
                first = edges[0]
                edges[0] = Edge(kind="from", table=name, alias=rel.alias_or_name, relation=relation,
                                base=base)
                aliases[rel.alias_or_name] = name
                edges.append(Edge(kind="left", table=first.table, alias=first.alias,
                                  relation=first.relation, base=first.base))
                continue
            if side == "" and jkind in ("", "INNER", "CROSS"):
                kind = "inner"
            elif side == "LEFT" and jkind in ("", "OUTER"):
                kind = "left"
                if join.args.get("on") is None:
                    raise Unsupported("LEFT JOIN without ON")
            else:
                raise Unsupported(f"{(side + ' ' + jkind).strip()} JOIN is not supported")
        aliases[alias] = name
        edges.append(Edge(kind=kind, table=name, alias=alias, relation=relation, base=base))
    return edges, aliases


def _classify(c: exp.Expression, types: dict[str, str]) -> Pred:
    if isinstance(c, exp.EQ) and isinstance(c.this, exp.Column) and isinstance(c.expression, exp.Column):
        a, b = column_key(c.this), column_key(c.expression)
        if a != b:
            return Pred(c, "eq", tuple(sorted((a, b))))
    if isinstance(c, (exp.EQ, exp.GT, exp.GTE, exp.LT, exp.LTE)) and isinstance(c.this, exp.Column) \
            and is_constant(c.expression):
        k = column_key(c.this)
        v = R.literal_value(c.expression, types.get(k))
        if v is not None:
            return Pred(c, "range", (k,), R.range_of(type(c), v))
    if isinstance(c, exp.In) and isinstance(c.this, exp.Column) and not c.args.get("query") \
            and c.expressions and all(is_constant(x) for x in c.expressions):
        k = column_key(c.this)
        vals = [R.literal_value(x, types.get(k)) for x in c.expressions]
        if None not in vals:
            return Pred(c, "range", (k,), R.points(vals))
    return Pred(c, "residual")


def _equivalence(preds: list[Pred]) -> dict[str, str]:
    parent: dict[str, str] = {}

    def find(x):
        while parent.get(x, x) != x:
            x = parent[x]
        return x

    for p in preds:
        if p.kind == "eq":
            a, b = find(p.cols[0]), find(p.cols[1])
            if a != b:
                lo, hi = sorted((a, b))
                parent[hi] = lo
                parent.setdefault(lo, lo)
    return {k: find(k) for k in parent}
