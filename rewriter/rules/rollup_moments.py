"""Rule: a variance or standard deviation of a query computed from the parts a datamap
stores of it (rewriter/moments.py: count, sum and sum of squares as double, min and max):
each part summed (min / max of the stored min / max) over the datamap rows of a query
group, or read as it is at the datamap's own grain. Called by rules/rollup_aggregate.py."""
from __future__ import annotations

from sqlglot import exp

from rewriter import moments, sparktypes
from rewriter.normalize import DIALECT, ident, key_of
from rewriter.rules.refusals import NoDerive

_ROLLUP = {"count": exp.Sum, "sum": exp.Sum, "min": exp.Min, "max": exp.Max}


def derive_moment(node: exp.Expression, ctx) -> exp.Expression:
    arg = moments.argument(node)
    values = []
    for kind, part in moments.part_args(arg):
        col = ctx.agg_map.get((kind, key_of(part, ctx.rep)))
        if col is None:
            raise NoDerive(f"{node.sql(DIALECT)} cannot be derived: datamap {ctx.name} stores "
                           "no count, sum and sum of squares of its argument (a variance of it "
                           "in the definition stores them)")
        value = exp.Column(this=ident(col), table=ident(ctx.view_alias))
        values.append(_ROLLUP[kind](this=value) if ctx.reagg else value)
    floating = sparktypes.norm(sparktypes.infer(arg, ctx.column_type)) in sparktypes.FRACTIONAL
    return moments.formula(node, *values, floating=floating)
