"""Which calls are aggregates: sqlglot's AggFunc nodes and the Spark aggregate functions
sqlglot parses as anonymous calls. A leaf: facts, layout, subtotals and the rules read it."""
from __future__ import annotations

from sqlglot import exp

# Spark aggregate functions sqlglot may parse as anonymous calls: never treat them as scalar.
AGG_NAMES = frozenset({
    "count_if", "bool_and", "bool_or", "every", "any", "some", "collect_list", "collect_set",
    "percentile", "percentile_approx", "approx_percentile", "first", "first_value", "last",
    "last_value", "mode", "median", "kurtosis", "skewness", "var_pop", "var_samp", "variance",
    "stddev", "stddev_pop", "stddev_samp", "std", "bit_and", "bit_or", "bit_xor", "max_by",
    "min_by", "try_sum", "try_avg", "histogram_numeric", "count_min_sketch", "hll_sketch_agg",
    "hll_union_agg", "array_agg", "regr_count", "regr_avgx", "regr_avgy", "regr_sxx", "regr_sxy",
    "regr_syy", "regr_slope", "regr_intercept", "regr_r2", "corr", "covar_pop", "covar_samp",
    "approx_count_distinct", "listagg", "string_agg", "grouping", "grouping_id", "mean",
    "product", "any_value", "sum_distinct",
})


def is_aggregate_call(node: exp.Expression) -> bool:
    """An aggregate applied to the block's groups (not a window function)."""
    if isinstance(node, exp.AggFunc) or (isinstance(node, exp.Anonymous) and node.name.lower() in AGG_NAMES):
        parent = node.parent
        return not (isinstance(parent, exp.Window) and parent.this is node)
    return False
