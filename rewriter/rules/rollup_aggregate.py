"""Rule: compute a query aggregate from a datamap's stored partial aggregates.

Rollup table (each correct over any partition of the base rows into datamap rows, which
is also why partial per-segment rows are fine):
  sum(x)            -> sum(sum_x)      cast back to Spark's sum type (decimal(p+10,s))
  count(*), count(x)-> sum(count)      coalesce(…, 0) for a global aggregate: count over no
                                       rows is 0, sum over no rows is NULL
  count(g)          -> sum(CASE WHEN g IS NULL THEN 0 ELSE count_star END) for a grouping
                       expression g (all rows of a datamap row share g)
  min(x), max(x)    -> min/max of the stored min/max, or of x when x is a grouping column
  avg(x)            -> sum(sum_x) / sum(count_x), typed as Spark's avg: double for
                       integral/floating x; for decimal(p,s) the same decimal division
                       Spark's Average does, cast to decimal(p+4,s+4)
  agg(DISTINCT e)   -> agg(DISTINCT e') when e is computable from grouping columns: every
                       datamap row stands for ≥ 1 base rows with those grouping values
  var_pop, var_samp, variance, stddev_pop, stddev_samp, stddev, std
                    -> rules/rollup_moments.py, from stored count, sum, sum of squares,
                       min and max (rewriter/moments.py)
  approx_count_distinct, hll_sketch_agg -> rules/rollup_distinct.py (exact over grouping
                       columns; from a stored sketch only when the session allows it)
On an exact grain match (ctx.reagg False) the stored column is used directly. Anything
else (percentile, avg of a stored avg, count(DISTINCT) of a non-grouping column)
fails with a reason.
"""
from __future__ import annotations

from sqlglot import exp

from rewriter import distinct, sparktypes
from rewriter.normalize import ident, key_of
from rewriter import moments
from rewriter.rules import rollup_distinct, rollup_moments
from rewriter.rules.arith import average, cast
from rewriter.rules.equal_aggregates import derive_equal
from rewriter.rules.refusals import NeedsReaggregation, NoDerive


def _col(ctx, name: str) -> exp.Column:
    return exp.Column(this=ident(name), table=ident(ctx.view_alias))


class _Lazy:
    """SQL text of a node, rendered only when a reason is actually formatted."""
    __slots__ = ("node",)

    def __init__(self, node):
        self.node = node

    def __str__(self):
        return self.node.sql("spark")

    __format__ = lambda self, spec: format(str(self), spec)  # noqa: E731


def rollup_aggregate(node: exp.Expression, ctx) -> exp.Expression:
    if isinstance(node, exp.Count) and isinstance(node.this, (exp.Case, exp.If)):
        # Looker's COUNT(CASE WHEN p THEN 1 ELSE NULL END): the count(g) rule below would
        # answer too, through a CASE nested in a CASE
        try:
            new = derive_equal(node, ctx)
        except NoDerive:
            new = None                    # the count(g) rule may still answer
        if new is not None:
            return new
    try:
        return _from_stored(node, ctx)
    except NoDerive as stored_reason:
        # a BI tool's spelling of an aggregate merged from per-row partials; when the node
        # is none of those forms, the stored-aggregate reason stands
        try:
            new = derive_equal(node, ctx)
        except NoDerive as why:
            raise NoDerive(f"{stored_reason}; as an equal aggregate: {why}") from None
        if new is None:
            raise
        return new


def derive_filtered(node: exp.Filter, ctx) -> exp.Expression:
    """agg(x) FILTER (WHERE p) = agg(CASE WHEN p THEN x END); count(*) FILTER (WHERE p)
    = count(CASE WHEN p THEN 1 END): a row the filter drops is a NULL the aggregate skips."""
    agg, cond = node.this, node.expression.this
    what = node.sql("spark")
    if not isinstance(agg, (exp.Sum, exp.Count, exp.Min, exp.Max, exp.Avg)) \
            or isinstance(agg.this, exp.Distinct) or agg.args.get("ignore_nulls") is not None:
        raise NoDerive(f"aggregate FILTER clause in {what}: only sum, count, min, max and avg "
                       "without DISTINCT are derived")
    if isinstance(agg, exp.Count) and (agg.this is None or isinstance(agg.this, exp.Star)):
        return rollup_aggregate(exp.CountIf(this=cond), ctx)
    case = exp.Case(ifs=[exp.If(this=cond, true=agg.this)])
    new = type(agg)(this=case, **({"big_int": True} if isinstance(agg, exp.Count) else {}))
    return rollup_aggregate(new, ctx)


def _from_stored(node: exp.Expression, ctx) -> exp.Expression:
    name = _Lazy(node)
    arg = node.this if isinstance(node, exp.AggFunc) else None
    if distinct.is_distinct_estimate(node):
        return rollup_distinct.derive_estimate(node, ctx)
    if moments.is_moment(node):
        return rollup_moments.derive_moment(node, ctx)
    if not isinstance(node, (exp.Sum, exp.Count, exp.Min, exp.Max, exp.Avg)):
        raise NoDerive(f"aggregate {name} cannot be derived from a datamap")
    if node.args.get("ignore_nulls") is not None or (isinstance(node, exp.Count) and node.args.get("big_int") is False):
        raise NoDerive(f"aggregate {name} cannot be derived from a datamap")
    if isinstance(arg, exp.Distinct):
        if not ctx.reagg:
            raise NeedsReaggregation()
        try:
            inner = [ctx.derive(x, ctx, groups_only=True) for x in arg.expressions]
        except NoDerive:
            raise NoDerive(f"{name}: DISTINCT argument is not a datamap grouping column")
        return type(node)(this=exp.Distinct(expressions=inner))
    star = isinstance(node, exp.Count) and (arg is None or isinstance(arg, exp.Star) or
                                            (isinstance(arg, exp.Literal) and not arg.is_string))
    k = "" if star else key_of(arg, ctx.rep)

    def stored(kind):
        return ctx.agg_map.get((kind, k))

    if isinstance(node, exp.Count):
        col = stored("count_star" if star else "count")
        per_row = _col(ctx, col) if col is not None else None
        star_col = ctx.agg_map.get(("count_star", ""))
        if per_row is None and not star and star_col is not None:
            # count(g) of a grouping expression g: the rows of a datamap row all share g,
            # so they count fully when g is not NULL and not at all when it is
            try:
                g = ctx.derive(arg, ctx, groups_only=True)
            except NoDerive:
                g = None
            if g is not None:
                per_row = exp.Case(ifs=[exp.If(this=exp.Is(this=g, expression=exp.Null()),
                                                true=exp.Literal.number(0))],
                                   default=_col(ctx, star_col))
        if per_row is None:
            raise NoDerive(f"{name} is not stored in datamap {ctx.name}")
        if not ctx.reagg:
            return per_row
        total = exp.Sum(this=per_row)
        return exp.Coalesce(this=total, expressions=[exp.Literal.number(0)]) if ctx.global_agg else total
    if isinstance(node, (exp.Min, exp.Max)):
        col = stored("min" if isinstance(node, exp.Min) else "max")
        if col is not None:
            return _col(ctx, col) if not ctx.reagg else type(node)(this=_col(ctx, col))
        if not ctx.reagg:
            raise NeedsReaggregation()
        try:
            return type(node)(this=ctx.derive(arg, ctx, groups_only=True))
        except NoDerive:
            raise NoDerive(f"{name} is not stored in datamap {ctx.name}")
    arg_type = sparktypes.infer(arg, ctx.column_type)
    if isinstance(node, exp.Sum):
        col = stored("sum")
        if col is None:
            raise NoDerive(f"{name} is not stored in datamap {ctx.name}")
        if not ctx.reagg:
            return _col(ctx, col)
        st = sparktypes.sum_type(arg_type)
        if st is None:
            raise NoDerive(f"{name}: cannot determine its type")
        total = exp.Sum(this=_col(ctx, col))
        return cast(total, st) if st.startswith("decimal") else total
    # avg
    s, c = stored("sum"), stored("count")
    if s is None or c is None:
        raise NoDerive(f"{name} needs sum and count of its argument stored in datamap {ctx.name}")
    if sparktypes.avg_type(arg_type) is None:
        raise NoDerive(f"{name}: cannot determine its type")
    if ctx.reagg:
        return average(exp.Sum(this=_col(ctx, s)), exp.Sum(this=_col(ctx, c)), arg_type, True)
    return average(_col(ctx, s), _col(ctx, c), arg_type, False)
