"""Facts of a query block x a compiled datamap -> the rewritten block, or a reason.

Order of the checks (each a rule in rewriter/rules/):
  1. match_tables        same tables and joins; extra query tables (and opaque derived
                         relations, rewriter/derived.py) become query-delta joins; a query
                         LEFT JOIN the WHERE makes inner is retried as inner
                         (rewriter/outer_joins.py)
  2. compensate_filters  datamap predicate implied by the query; the compensating conjuncts
  3. grain               exact (one datamap row per query group: use stored columns as they
                         are) or rollup (re-aggregate); partial datamaps always roll up
  4. derive_expression / rollup_aggregate  for grouping, outputs, HAVING, ORDER BY,
                         compensating predicates and query-delta ON conditions
Subtotals (GROUP BY ROLLUP / CUBE / GROUPING SETS) always re-aggregate and keep the
query's grouping structure: rewriter/subtotals.py derives its expressions.
The result is a new SELECT over the datamap table that keeps the query's output names
(every output aliased to the original name), DISTINCT, HAVING, ORDER BY, LIMIT and window
functions on top.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from sqlglot import exp

from rewriter import timeseries as ts
from rewriter.api import SEGMENT_COLUMN, Candidate
from rewriter.compensation import delta_refusal
from rewriter.facts import Facts, OrderItem
from rewriter.layout import Compiled
from rewriter.narrow import widen
from rewriter.normalize import ident, key_of, parse
from rewriter.outer_joins import inner_form
from rewriter.rules.compensate_filters import compensate_filters
from rewriter.rules.derive_expression import derive_expression
from rewriter.rules.match_tables import match_tables
from rewriter.rules.refusals import NeedsReaggregation, NoDerive
from rewriter.subtotals import SubtotalDeriver


@dataclass
class Ctx:
    name: str
    rep: dict
    view_alias: str
    view_map: dict
    agg_map: dict
    extra_aliases: dict
    datamap_is_aggregate: bool
    reagg: bool
    global_agg: bool
    # derive_expression, handed to the rules it calls (rules/rollup_aggregate.py and those
    # below it), which derive the arguments of an aggregate through it without importing it
    derive: Callable[..., exp.Expression]
    column_types: dict = field(default_factory=dict)
    filter_ctx: "Ctx | None" = None
    buckets: list = field(default_factory=list)     # (column key, granularity, view column, type)
    approximate: list = field(default_factory=list)  # estimates read off sketches (distinct.py)

    def column_type(self, col: exp.Column):
        return self.column_types.get(".".join(p.name for p in col.parts))


@dataclass
class Match:
    select: exp.Select
    datamap: str        # "db.name"
    rollup: bool
    approximate: tuple[str, ...] = ()   # what was estimated from a sketch (EXPLAIN says so)
    reads_base: bool = False    # part of the answer is read from the base tables (narrow.py)


def match(q: Facts, comp: Compiled, cand: Candidate, view_alias: str) -> Match | str:
    d = comp.facts
    if cand.delta:
        refused = delta_refusal(comp.definition, [t for t, _ in cand.delta])
        if refused:
            return "union compensation refused: " + refused
    extra = match_tables(q, d)
    if isinstance(extra, str):
        # the query's LEFT JOIN may be an inner join in disguise (rewriter/outer_joins.py)
        inner = inner_form(q)
        retry = match_tables(inner, d) if inner is not None else extra
        if isinstance(retry, str):
            return extra
        q, extra = inner, retry
    comp_preds = compensate_filters(q, d)
    complement = None
    if isinstance(comp_preds, str):
        widened = widen(q, comp)
        if widened is None or isinstance(widened, str):
            return comp_preds + (f"; {widened}" if widened else "")
        narrow_reason = comp_preds
        comp_preds, complement = widened.preds, widened.complement
    rep = q.rep
    view_map, agg_map = _maps(comp, rep)
    if comp.definition.is_aggregate and not q.is_aggregate and not q.distinct:
        return "query is not an aggregate; the datamap holds one row per group"
    # with a delta a group may have a row in the segments and another in the new rows
    # subtotals always re-aggregate: a subtotal row is many datamap rows
    exact = (comp.definition.is_aggregate and q.is_aggregate and cand.one_row_per_group
             and q.subtotals is None
             and not cand.delta and not extra and complement is None
             and {key_of(g, rep) for g in q.group} == set(view_map)
             and len(q.group) == len({key_of(g, rep) for g in q.group})
             and all(key_of(g, rep) in view_map for g in q.group))
    ctx = Ctx(name=comp.definition.name, rep=rep, view_alias=view_alias, view_map=view_map,
              agg_map=agg_map, extra_aliases={e.table: e.alias for e in extra},
              datamap_is_aggregate=comp.definition.is_aggregate, reagg=not exact,
              global_agg=not q.group, derive=derive_expression, column_types=q.column_types)
    ctx.buckets = _buckets(comp, rep, q.column_types)
    # Compensating conjuncts are derived with the datamap's own equivalences only: the
    # query's may rest on the very conjunct being compensated (a = b would become a = a).
    drep = d.rep
    ctx.filter_ctx = Ctx(name=ctx.name, rep=drep, view_alias=view_alias,
                         view_map=_maps(comp, drep)[0], agg_map={},
                         extra_aliases=ctx.extra_aliases, datamap_is_aggregate=ctx.datamap_is_aggregate,
                         reagg=ctx.reagg, global_agg=ctx.global_agg, derive=derive_expression,
                         column_types=q.column_types,
                         buckets=_buckets(comp, drep, q.column_types))
    try:
        try:
            sel = _build(q, comp, cand, ctx, extra, comp_preds, complement)
        except NeedsReaggregation:
            ctx.reagg = True
            ctx.approximate.clear()
            sel = _build(q, comp, cand, ctx, extra, comp_preds, complement)
    except NoDerive as e:
        if complement is not None:
            return f"{narrow_reason}; with union compensation for it: {e}"
        return str(e)
    return Match(select=sel, datamap=comp.definition.qualified, rollup=ctx.reagg,
                 approximate=tuple(dict.fromkeys(ctx.approximate)),
                 reads_base=complement is not None)


def _build(q: Facts, comp: Compiled, cand: Candidate, ctx: Ctx, extra, comp_preds,
           complement=None) -> exp.Select:
    agg_d = comp.definition.is_aggregate
    rollup = agg_d and ctx.reagg and q.is_aggregate
    derive = derive_expression
    if q.subtotals is not None:
        derive = SubtotalDeriver(q.group, q.subtotals.template, ctx, derive_expression)
    sel = exp.Select()
    outs = []
    final_names = []
    for i, (name, e) in enumerate(q.outputs):
        if name is None:
            raise NoDerive(f"output {i + 1} has no alias and Spark's name for it is not known")
        final_names.append(name)
        outs.append(exp.alias_(derive(e, ctx), ident(name), quoted=None))
    sel.set("expressions", outs)
    if q.distinct:
        sel.set("distinct", exp.Distinct())
    sel.set("from_", exp.From(this=_view_relation(comp, cand, ctx.view_alias, complement)))

    # query-delta joins: ON = their own conditions (left) or the conjuncts that reference them
    remaining = list(comp_preds)
    joins = []
    joined = {None}
    for e in extra:
        base = (e.base or e.table).split(".", 1)
        table = e.relation.copy() if e.relation is not None else \
            exp.Table(this=ident(base[1]), db=ident(base[0]),
                      alias=exp.TableAlias(this=ident(e.alias)))
        joined.add(e.table)
        if e.kind == "left":
            on = [derive_expression(c, ctx.filter_ctx) for c in e.on]
            joins.append(exp.Join(this=table, side="LEFT", on=exp.and_(*on)))
            continue
        mine = [c for c in remaining if _owners(c, ctx) and _owners(c, ctx) <= joined and e.table in _owners(c, ctx)]
        remaining = [c for c in remaining if not any(c is m for m in mine)]
        on = [derive_expression(c, ctx.filter_ctx, groups_only=True) for c in mine]
        joins.append(exp.Join(this=table, on=exp.and_(*on)) if on else exp.Join(this=table, kind="CROSS"))
    if joins:
        sel.set("joins", joins)
    where = [derive_expression(c, ctx.filter_ctx, groups_only=True) for c in remaining]
    if q.is_aggregate and agg_d and not rollup and q.having is not None:
        where.append(derive_expression(q.having, ctx))
    if where:
        sel.set("where", exp.Where(this=exp.and_(*where)))
    if q.is_aggregate and (rollup or not agg_d):
        if q.subtotals is not None:
            sel.set("group", derive.group())
            return derive.finish(sel, q, ctx, final_names)
        elif q.group:
            sel.set("group", exp.Group(expressions=[derive_expression(g, ctx, groups_only=True) for g in q.group]))
        if q.having is not None:
            sel.set("having", exp.Having(this=derive(q.having, ctx)))
    elif q.distinct or not q.is_aggregate:
        pass
    if q.order:
        sel.set("order", exp.Order(expressions=[_order_item(o, q, ctx, final_names, derive) for o in q.order]))
    for arg in ("limit", "offset"):
        if q.select.args.get(arg) is not None:
            sel.set(arg, q.select.args[arg].copy())
    return sel


def _maps(comp: Compiled, rep: dict) -> tuple[dict, dict]:
    """Stored expression keys under a query's equivalence classes (cached per class shape:
    repeated BI queries share it)."""
    ck = tuple(sorted(rep.items()))
    hit = comp.keyed.get(ck)
    if hit is not None:
        return hit
    view_map: dict[str, str] = {}
    for e, c in (comp.group if comp.definition.is_aggregate else comp.plain):
        view_map.setdefault(key_of(e, rep), c)
    agg_map: dict = {}
    for kind, arg, c in comp.aggs:
        agg_map.setdefault((kind, "" if arg is None else key_of(arg, rep)), c)
    if len(comp.keyed) > 64:
        comp.keyed.clear()
    comp.keyed[ck] = (view_map, agg_map)
    return view_map, agg_map


def _buckets(comp: Compiled, rep, column_types) -> list:
    out = []
    for e, c in comp.group:
        if isinstance(e, (exp.TimestampTrunc, exp.Paren, exp.Sub)):
            found = ts.bucket_of(e)
            if found is not None and isinstance(found[0], exp.Column):
                col = found[0]
                ctype = column_types.get(".".join(p.name for p in col.parts))
                out.append((key_of(col, rep), found[1], c, ctype))
    return out


def _owners(c: exp.Expression, ctx: Ctx) -> set:
    """Query-delta tables a conjunct references (None stands for the datamap's tables)."""
    out = set()
    for col in c.find_all(exp.Column):
        t = f"{col.db}.{col.table}"
        out.add(t if t in ctx.extra_aliases else None)
    return out


def _order_item(o: OrderItem, q: Facts, ctx: Ctx, final_names, derive=derive_expression) -> exp.Expression:
    kind, value = o
    if kind == "alias":
        ordered, idx = value
        new = ordered.copy()
        new.set("this", exp.Column(this=ident(final_names[idx])))
        return new
    new = value.copy()
    new.set("this", derive(value.this, ctx))
    return new


def _view_relation(comp: Compiled, cand: Candidate, alias: str, complement=None) -> exp.Expression:
    db, table = (cand.storage or comp.definition.table).split(".", 1)
    if cand.segments is None and not cand.delta and complement is None:
        return exp.Table(this=ident(table), db=ident(db),
                         alias=exp.TableAlias(this=ident(alias)))
    inner = exp.Select(expressions=[exp.Column(this=ident(c.name)) for c in comp.definition.columns])
    inner.set("from_", exp.From(this=exp.Table(this=ident(table), db=ident(db))))
    if cand.segments is not None:
        segs = [exp.Literal.string(s) for s in cand.segments]
        cond = exp.In(this=exp.Column(this=ident(SEGMENT_COLUMN)), expressions=segs) if segs \
            else exp.false()
        inner.set("where", exp.Where(this=cond))
    if cand.delta:
        inner = exp.union(inner, parse(comp.definition.build_sql(dict(cand.delta))),
                          distinct=False)
    if complement is not None:
        inner = exp.union(inner, complement.copy(), distinct=False)
    return exp.Subquery(this=inner, alias=exp.TableAlias(this=ident(alias)))
