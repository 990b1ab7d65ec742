"""Subtotals: GROUP BY ROLLUP / CUBE / GROUPING SETS (and Spark's `WITH ROLLUP` / `WITH
CUBE`, mixed forms such as `GROUP BY a, ROLLUP(b, c)`) with grouping() / grouping_id().

The rewrite keeps the query's grouping structure as written and only replaces each
grouping expression by its derivation from the datamap (the finest grouping set must be
derivable), always re-aggregating. That is exact because every subtotal is an aggregate
over a union of finest-grain groups, each a union of datamap rows, and the stored
aggregates re-aggregate over any such union (rules/rollup_aggregate.py). Keeping the
structure keeps what tells a subtotal's NULL from a NULL in the data: Spark computes
grouping() and grouping_id() from which set a row belongs to, not from the values.

Spark (ResolveGroupingAnalytics) replaces, in the outputs, HAVING and ORDER BY, every
sub-expression outside an aggregate that equals a grouping expression by the grouping
attribute (NULL where that expression is rolled up), looking top-down; an aggregate reads
the input rows. `prepare` marks those occurrences on the query as written (before the
canonical forms, which would merge spellings Spark keeps apart) with `__dm_group(i)`
calls; `SubtotalDeriver` puts the derived grouping expression i in their place, so the
rewritten query has the same occurrences. Refused, each with its reason:
  - a grouping expression inside another (which one Spark picks depends on spelling),
  - two grouping expressions with the same canonical form spelled differently,
  - two grouping expressions reading the same datamap column (grouping_id() would
    lose a bit: Spark merges equal grouping expressions),
  - a constant or ordinal in a grouping set, only empty sets (a global aggregate: one
    row even over no input, where a datamap read has none), WITH TOTALS,
  - an argument of grouping() / grouping_id() that is not a grouping expression,
  - a column outside aggregates that is not a grouping expression.
"""
from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from rewriter.aggregates import is_aggregate_call
from rewriter.normalize import DIALECT, canonical_expr, ident, is_constant, key_of
from rewriter.precedence import wrap_operands
from rewriter.rules.refusals import NoDerive

MARK = "__dm_group"
_CONTAINERS = (exp.Rollup, exp.Cube, exp.GroupingSets, exp.Tuple)


class SubtotalError(Exception):
    """The query's subtotals cannot be rewritten; the message is the reason."""


@dataclass
class Subtotals:
    template: exp.Group                  # the GROUP BY with leaf i replaced by __dm_group(i)
    leaves: list[exp.Expression]         # distinct grouping expressions, as written (copies)
    texts: list[str]                     # their SQL as written (for reasons)
    items: list[exp.Expression]          # SELECT items, marked (copies)
    having: exp.Expression | None        # marked copy
    order: list[exp.Ordered]             # ORDER BY items, marked copies


def has_subtotals(group: exp.Group | None) -> bool:
    if group is None:
        return False
    return any(group.args.get(k) for k in ("grouping_sets", "cube", "rollup", "totals")) \
        or any(isinstance(g, (exp.Rollup, exp.Cube, exp.GroupingSets)) for g in group.expressions)


def _text(e: exp.Expression) -> str:
    """The expression as written, parentheses aside (a column without generating SQL)."""
    if isinstance(e, exp.Column):
        return ".".join(p.name for p in e.parts)
    return canonical_expr(e).sql(DIALECT)


def _marker(i: int) -> exp.Expression:
    return exp.Anonymous(this=MARK, expressions=[exp.Literal.number(i)])


def marker_index(node: exp.Expression) -> int | None:
    if isinstance(node, exp.Anonymous) and node.name == MARK:
        return int(node.expressions[0].this)
    return None


def prepare(select: exp.Select) -> Subtotals:
    """Marked copies of a qualified block with subtotals (raises SubtotalError)."""
    group = select.args["group"]
    if group.args.get("totals"):
        raise SubtotalError("WITH TOTALS is not supported")
    template = group.copy()
    leaves: list[exp.Expression] = []
    index: dict[str, int] = {}

    def place(node: exp.Expression, in_set: bool) -> None:
        if isinstance(node, _CONTAINERS) or (in_set and isinstance(node, exp.Paren)):
            for child in ([node.this] if isinstance(node, exp.Paren) else node.expressions):
                place(child, True)
            return
        leaf = canonical_expr(node)
        if is_constant(leaf):
            raise SubtotalError(f"constant or ordinal {node.sql(DIALECT)} in a grouping set")
        if any(is_aggregate_call(n) for n in leaf.walk()):
            raise SubtotalError(f"aggregate {node.sql(DIALECT)} in a grouping set")
        text = _text(leaf)
        if text not in index:
            index[text] = len(leaves)
            leaves.append(leaf)
        node.replace(_marker(index[text]))

    # Hive's `GROUP BY a, b GROUPING SETS (...)` keeps the sets in their own argument
    for key in ("expressions", "grouping_sets", "cube", "rollup"):
        for g in list(template.args.get(key) or []):
            place(g, key != "expressions")
    if not leaves:
        raise SubtotalError("the grouping sets name no column (a global aggregate)")
    # only nodes of a leaf's type (or parenthesised) can be one: SQL text is the costly part
    kinds = tuple({type(leaf) for leaf in leaves} | {exp.Paren})
    for b in leaves:
        for n in b.walk():
            if n is not b and isinstance(n, kinds) and _text(n) in index:
                raise SubtotalError(f"grouping expression {n.sql(DIALECT)} is part of "
                                    f"grouping expression {b.sql(DIALECT)}")

    def mark(node: exp.Expression) -> exp.Expression:
        if isinstance(node, (exp.Grouping, exp.GroupingId)):
            new = node.copy()
            args = []
            for a in new.expressions:
                i = index.get(_text(a))
                if i is None:
                    raise SubtotalError(f"{node.sql(DIALECT)}: {a.sql(DIALECT)} is not a "
                                        "grouping expression")
                args.append(_marker(i))
            new.set("expressions", args)
            return new
        if is_aggregate_call(node):
            return node
        i = index.get(_text(node)) if isinstance(node, kinds) else None
        if i is not None:
            return _marker(i)
        return _map_children(node, mark)

    items = [mark(e.copy()) for e in select.expressions]
    having = select.args.get("having")
    order = []
    for o in (select.args["order"].expressions if select.args.get("order") else []):
        new = o.copy()
        new.set("this", mark(new.this))
        order.append(new)
    return Subtotals(template=template, leaves=leaves, texts=list(index), items=items,
                     having=mark(having.this.copy()) if having else None, order=order)


def _map_children(node: exp.Expression, fn) -> exp.Expression:
    """`node` with fn applied to each child expression (in place: node is a copy)."""
    for k, v in list(node.args.items()):
        if isinstance(v, exp.Expression):
            node.set(k, fn(v))
        elif isinstance(v, list):
            node.set(k, [fn(x) if isinstance(x, exp.Expression) else x for x in v])
    return node


def check_leaves(group: list[exp.Expression], texts: list[str]) -> None:
    """Canonical forms merge spellings (date_trunc / timeseries, operand order) that Spark
    keeps as two grouping expressions: one of each is derivable, the pair is not."""
    seen: dict[str, int] = {}
    for i, g in enumerate(group):
        k = key_of(g)
        if k in seen:
            raise SubtotalError(f"grouping expressions {texts[seen[k]]} and {texts[i]} are one "
                                "expression spelled twice")
        seen[k] = i


class SubtotalDeriver:
    """Derives a subtotal query's expressions over the datamap: called like
    derive_expression(node, ctx)."""

    def __init__(self, group: list[exp.Expression], template: exp.Group, ctx, derive):
        self.derive = derive
        self.leaves = []
        seen: dict[str, int] = {}
        for i, g in enumerate(group):
            d = derive(g, ctx, groups_only=True)
            text = d.sql(DIALECT)
            if text in seen:
                raise_no_derive(f"grouping expressions {group[seen[text]].sql(DIALECT)} and "
                                f"{g.sql(DIALECT)} both read {text} from the datamap "
                                "(grouping_id() would lose a bit)")
            seen[text] = i
            self.leaves.append(d)
        self.template = template

    def group(self) -> exp.Group:
        return self._fill(self.template.copy())

    def _fill(self, node: exp.Expression) -> exp.Expression:
        for m in list(node.find_all(exp.Anonymous)):
            i = marker_index(m)
            if i is not None:
                new = self.leaves[i].copy()
                if m is node:
                    return new
                m.replace(new)
        return node

    def __call__(self, node: exp.Expression, ctx, groups_only: bool = False) -> exp.Expression:
        i = marker_index(node)
        if i is not None:
            return self.leaves[i].copy()
        if isinstance(node, (exp.Grouping, exp.GroupingId)):
            return self._fill(node.copy())
        if is_aggregate_call(node) or isinstance(node, exp.Filter):
            return self.derive(node, ctx)
        if isinstance(node, exp.Column):
            raise_no_derive(f"column {node.table}.{node.name} is neither a grouping expression "
                            "nor inside an aggregate")
        args = {}
        for k, v in node.args.items():
            if isinstance(v, exp.Expression):
                v = self(v, ctx)
            elif isinstance(v, list):
                v = [self(x, ctx) if isinstance(x, exp.Expression) else x for x in v]
            args[k] = v
        return wrap_operands(type(node)(**args))

    def finish(self, sel: exp.Select, q, ctx, names: list[str]) -> exp.Select:
        """HAVING, ORDER BY, LIMIT of the rewritten block. Spark resolves HAVING and ORDER BY
        over grouping sets against the outputs only: grouping() of an output aliased to a
        datamap column, or a datamap column itself, does not resolve there. So a HAVING or
        an ORDER BY expression is computed in the aggregate's SELECT list (where they
        resolve as in the outputs) and applied by an outer SELECT of the output names,
        which keeps the names, types, rows and order."""
        having = None
        hidden, order = [], []
        if q.having is not None:
            if any(isinstance(n, exp.Window) for e in sel.expressions for n in e.walk()):
                raise_no_derive("window functions next to HAVING over subtotals")
            having = exp.column(_HAVING)
            hidden.append(exp.alias_(self(q.having, ctx), _HAVING))
        for kind, value in q.order:
            if kind == "alias":
                ordered, idx = value
                new = ordered.copy()
                new.set("this", exp.Column(this=ident(names[idx])))
            elif isinstance(value.this, exp.Literal) and not value.this.is_string:
                new = value.copy()            # an ordinal names the same output outside
            else:
                col = f"{_ORDER}{len(hidden)}"
                hidden.append(exp.alias_(self(value.this, ctx), col))
                new = value.copy()
                new.set("this", exp.column(col))
            order.append(new)
        limits = {k: q.select.args[k].copy() for k in ("limit", "offset")
                  if q.select.args.get(k) is not None}
        if not hidden:
            if order:
                sel.set("order", exp.Order(expressions=order))
            for k, v in limits.items():
                sel.set(k, v)
            return sel
        if len(set(names)) != len(names) or {_HAVING, _INNER} & set(names) \
                or any(n.startswith(_ORDER) for n in names):
            raise_no_derive("two outputs share a name: HAVING or ORDER BY over subtotals "
                            "cannot be applied around them")
        if q.distinct and len(hidden) > (having is not None):
            raise_no_derive("DISTINCT with an ORDER BY expression over subtotals")
        sel.set("expressions", sel.expressions + hidden)
        outer = exp.Select(expressions=[exp.Column(this=ident(n)) for n in names])
        if sel.args.get("distinct"):
            sel.set("distinct", None)
            outer.set("distinct", exp.Distinct())
        outer.set("from_", exp.From(this=exp.Subquery(
            this=sel, alias=exp.TableAlias(this=exp.to_identifier(_INNER)))))
        if having is not None:
            outer.set("where", exp.Where(this=having))
        if order:
            outer.set("order", exp.Order(expressions=order))
        for k, v in limits.items():
            outer.set(k, v)
        return outer


_HAVING, _ORDER, _INNER = "dm_having", "dm_order_", "dm_subtotals"


def raise_no_derive(reason: str):
    raise NoDerive(reason)
