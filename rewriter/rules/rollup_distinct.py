"""Rule: a distinct count of a query read off a datamap (the definitions, the setting and
why each form is exact or only an estimate: rewriter/distinct.py, docs/distinct.md).

  approx_count_distinct(e[, rsd]) -> approx_count_distinct(e'[, rsd]) over the datamap
                                     rows when e is computable from grouping columns
  approx_count_distinct(x[, rsd]) -> hll_sketch_estimate(hll_union_agg(col)) and
  hll_sketch_agg(x[, k]) (same k) -> hll_union_agg(col) from a stored sketch, only when the
                                     session allows approximate answers
Called by rules/rollup_aggregate.py.
"""
from __future__ import annotations

from sqlglot import exp

from rewriter import sparktypes
from rewriter.distinct import (APPROXIMATE, APPROXIMATE_KEY, MAX_LGK, MIN_LGK, SKETCH_KIND,
                               is_sketch_agg, sketch_lgk)
from rewriter.normalize import DIALECT, ident, key_of
from rewriter.rules.refusals import NeedsReaggregation, NoDerive

_FLOATING = ("float", "double")


def derive_estimate(node: exp.Expression, ctx) -> exp.Expression:
    """approx_count_distinct / hll_sketch_agg of a query over the datamap (module docstring)."""
    text = node.sql(DIALECT)
    sketch = is_sketch_agg(node)
    arg = node.expressions[0] if sketch else node.this
    if sketch and sketch_lgk(node) is None:
        raise NoDerive(f"{text}: lgConfigK is not a literal from {MIN_LGK} to {MAX_LGK}")
    if not sketch:
        exact = _over_groups(node, arg, ctx)
        if exact is not None:
            return exact
    want = f"{SKETCH_KIND}:{sketch_lgk(node)}" if sketch else None
    col = next((c for (kind, k), c in ctx.agg_map.items()
                if kind.startswith(SKETCH_KIND + ":") and k == key_of(arg, ctx.rep)
                and (want is None or kind == want)), None)
    if col is None:
        if sketch:
            raise NoDerive(f"{text}: datamap {ctx.name} stores no sketch of that argument "
                           "with the same lgConfigK")
        raise NoDerive(f"{text}: its argument is not a datamap grouping column and datamap "
                       f"{ctx.name} stores no sketch of it")
    if not APPROXIMATE.get():
        raise NoDerive(f"{text} would be estimated from datamap {ctx.name}'s HLL sketch, "
                       f"which differs from Spark's estimate: SET {APPROXIMATE_KEY}=true "
                       "allows it")
    stored = exp.Column(this=ident(col), table=ident(ctx.view_alias))
    ctx.approximate.append(f"{text} estimated from the HLL sketch {ctx.name}.{col}")
    # an exact-grain match reads the group's own sketch; a rollup merges the sketches
    merged = exp.Anonymous(this="hll_union_agg", expressions=[stored]) if ctx.reagg else stored
    return merged if sketch else exp.Anonymous(this="hll_sketch_estimate", expressions=[merged])


def _over_groups(node: exp.ApproxDistinct, arg: exp.Expression, ctx) -> exp.Expression | None:
    try:
        inner = ctx.derive(arg, ctx, groups_only=True)
    except NoDerive:
        return None
    arg_type = sparktypes.infer(arg, ctx.column_type)
    if arg_type is None:
        raise NoDerive(f"{node.sql(DIALECT)}: cannot determine the type of its argument")
    if any(t in arg_type for t in _FLOATING):     # nested ones too: struct<a:double>
        raise NoDerive(f"{node.sql(DIALECT)}: a float/double argument is normalised by "
                       "grouping (-0.0, NaN), so its hashes would differ")
    if not isinstance(inner, exp.Column):
        # the hash depends on the type as well as the value: keep the query's own type
        # for an expression recomputed over stored columns (a stored column has it)
        inner = exp.Cast(this=inner, to=exp.DataType.build(arg_type, dialect=DIALECT))
    if not ctx.reagg:
        raise NeedsReaggregation()
    new = exp.ApproxDistinct(this=inner)
    if node.args.get("accuracy") is not None:
        new.set("accuracy", node.args["accuracy"].copy())
    return new
