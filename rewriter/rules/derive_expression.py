"""Rule: rewrite a query expression over the datamap's columns.

Whole sub-expressions are matched by canonical key (columns mapped to the query's
equivalence-class representatives, so any member of a class serves): a sub-expression
equal to a stored grouping/projected expression becomes a reference to that column. A
column of a query-delta table keeps its alias. Aggregate calls go to `rollup_aggregate`
(aggregate datamaps) or are recomputed over the datamap rows (projection-only datamaps,
whose rows are the base rows). Anything left over base columns cannot be computed: the
rule fails with the column's name. Correct because the datamap's column holds exactly that
expression's value for the rows it represents.
"""
from __future__ import annotations

from sqlglot import exp

from rewriter import grains
from rewriter import timeseries as ts
from rewriter.aggregates import is_aggregate_call
from rewriter.derived import MARK
from rewriter.normalize import ident, key_of
from rewriter.precedence import wrap_operands
from rewriter.rules.refusals import NoDerive
from rewriter.rules.rollup_aggregate import derive_filtered, rollup_aggregate

_LEAVES = (exp.Literal, exp.Identifier, exp.DataType, exp.Star, exp.Var, exp.Null, exp.Boolean)


def derive_expression(node: exp.Expression, ctx, groups_only: bool = False) -> exp.Expression:
    """A fresh expression over ctx.view_alias's columns (and query-delta tables)."""
    if isinstance(node, _LEAVES) or (isinstance(node, exp.Subquery) and MARK in node.meta):
        return node.copy()          # a literal, or an opaque subquery (rewriter/derived.py)
    if isinstance(node, exp.Column):
        alias = ctx.extra_aliases.get(f"{node.db}.{node.table}")
        if alias is not None:
            return exp.Column(this=ident(node.name), table=ident(alias))
    hit = ctx.view_map.get(key_of(node, ctx.rep))
    if hit is not None:
        return exp.Column(this=ident(hit), table=ident(ctx.view_alias))
    if isinstance(node, exp.Filter) and ctx.datamap_is_aggregate:
        if groups_only:
            raise NoDerive(f"aggregate {node.sql('spark')} where a grouping expression is needed")
        return derive_filtered(node, ctx)
    if is_aggregate_call(node):
        if groups_only:
            raise NoDerive(f"aggregate {node.sql('spark')} where a grouping expression is needed")
        if ctx.datamap_is_aggregate:
            return rollup_aggregate(node, ctx)
        return _rebuild(node, ctx, groups_only)
    if isinstance(node, exp.Column):
        day = _date_from_day_bucket(node, ctx)
        if day is not None:
            return day
        raise NoDerive(f"column {node.table}.{node.name} is not in datamap {ctx.name}")
    if ctx.buckets and isinstance(node, (exp.GTE, exp.LT, exp.LTE, exp.GT)):
        aligned = _aligned_bound(node, ctx)
        if aligned is not None:
            return aligned
    if ctx.buckets and isinstance(node, (exp.TimestampTrunc, exp.Paren, exp.Sub)):
        rolled = _roll_up_bucket(node, ctx)
        if rolled is not None:
            return rolled
    if ctx.buckets:
        grain = _grain_from_bucket(node, ctx)
        if grain is not None:
            return grain
    return _rebuild(node, ctx, groups_only)


def _grain_from_bucket(node: exp.Expression, ctx) -> exp.Expression | None:
    """A BI tool's time grain of a column (rewriter.grains) from a stored bucket of that
    column, when every grain value is constant on the stored buckets."""
    found = grains.grain_of(node)
    if found is None:
        return None
    k = key_of(found[0], ctx.rep)
    if k in ctx.view_map:
        return None                       # the raw column itself is stored: use it
    for col_key, fine, view_col, ctype in ctx.buckets:
        if col_key == k:
            stored = exp.Column(this=ident(view_col), table=ident(ctx.view_alias))
            new = grains.derive_grain(node, ctype, fine, stored)
            if new is not None:
                return new
    return None


def _date_from_day_bucket(col: exp.Column, ctx) -> exp.Expression | None:
    """A DATE column the datamap keeps only as its day bucket (rewriter.grains)."""
    k = key_of(col, ctx.rep)
    for col_key, fine, view_col, ctype in ctx.buckets or ():
        if col_key == k:
            stored = exp.Column(this=ident(view_col), table=ident(ctx.view_alias))
            new = grains.date_from_day_bucket(ctype, fine, stored)
            if new is not None:
                return new
    return None


def _roll_up_bucket(node: exp.Expression, ctx) -> exp.Expression | None:
    """A coarser time bucket from a stored finer bucket of the same column (timeseries
    rollup: only when every coarse bucket is a union of fine buckets, per
    rewriter.timeseries.is_rollup — never week->month, never ten->fifteen minutes)."""
    found = ts.bucket_of(node)
    if found is None:
        return None
    col, gran = found
    k = key_of(col, ctx.rep)
    for col_key, fine, view_col, ctype in ctx.buckets:
        if col_key == k and ts.is_rollup(fine, gran):
            stored = exp.Column(this=ident(view_col), table=ident(ctx.view_alias))
            return ts.rollup_expr(stored, fine, gran, ctype)
    return None


def _aligned_bound(node: exp.Expression, ctx) -> exp.Expression | None:
    """`col >= X` / `col < X` on a raw time column the datamap only keeps as a bucket: when X
    starts a bucket, bucket(col) >= X <=> col >= X (and likewise for <), because the bucket
    is monotone and bucket(X) = X (rewriter.timeseries.is_aligned). > and <= only on a DATE
    and a plain date X, as >= / < the next day (rewriter.grains.next_day).
    The same holds for the column's local date (CAST(col AS DATE), to_date(col): Tableau's
    and Metabase's date filters) when X also starts a day: date(col) >= X <=> col >= X."""
    col, day = node.this, False
    if not isinstance(col, exp.Column):
        col, day = grains.date_of(col), True
        if col is None:
            return None
    k = key_of(col, ctx.rep)
    if k in ctx.view_map:
        return None                       # the raw column itself is stored: use it
    bound = node.expression
    text = None
    if isinstance(bound, exp.Literal) and bound.is_string:
        text = bound.this
    elif isinstance(bound, exp.Cast) and isinstance(bound.this, exp.Literal) and bound.this.is_string:
        text = bound.this.this
    if text is None or day and not ts.is_aligned(text, "day"):
        return None
    op = type(node)
    if op in (exp.LTE, exp.GT):
        # only on a DATE (the column's, or its local date): see grains.next_day
        text, op = grains.next_day(text), exp.LT if op is exp.LTE else exp.GTE
        if text is None:
            return None
        bound = exp.Cast(this=exp.Literal.string(text), to=exp.DataType.build("date"))
    for col_key, fine, view_col, ctype in ctx.buckets:
        if col_key == k and ts.is_aligned(text, fine) and (not day or grains.typed(ctype)) \
                and (op is type(node) or day or (ctype or "").lower() == "date"):
            stored = exp.Column(this=ident(view_col), table=ident(ctx.view_alias))
            return op(this=stored, expression=bound.copy())
    return None


def _rebuild(node: exp.Expression, ctx, groups_only: bool) -> exp.Expression:
    args = {}
    for k, v in node.args.items():
        if isinstance(v, exp.Expression):
            args[k] = derive_expression(v, ctx, groups_only)
        elif isinstance(v, list):
            args[k] = [derive_expression(x, ctx, groups_only) if isinstance(x, exp.Expression) else x for x in v]
        else:
            args[k] = v
    return wrap_operands(type(node)(**args))
