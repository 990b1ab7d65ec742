"""Distinct counts read off a datamap: exact ones from its grouping columns, approximate
ones from a stored HLL sketch (docs/distinct.md). This module holds the definitions, the
setting and the reasoning; the rule that rewrites a query's distinct count is
rules/rollup_distinct.py.

Exact (no setting needed; rules/rollup_aggregate.py handles count(DISTINCT e)):
  approx_count_distinct(e[, rsd]) -> approx_count_distinct(e'[, rsd]) over the datamap rows,
  re-aggregated, when e is computable from grouping columns (e' its form over them).
  Why it is equal: Spark's HyperLogLogPlusPlus has no sparse mode; its registers are the
  maxima, over the hashed non-NULL values, of each hash's rank, so they depend only on the
  SET of (value, type) pairs fed in, not on how often or in which order each comes. Every
  datamap row stands for >= 1 base rows with the same grouping values, and every base row
  for exactly one datamap row, so a query group sees the same set of e values either way
  (partial segments only repeat values), hence the same registers and the same estimate.
  Not for float/double e: grouping normalises -0.0 to 0.0 and NaNs to one NaN, which hash
  differently from the values the base rows hold.

Approximate (only when the session opts in: `SET datamap.rewrite.approximate=true`):
  a datamap stores `hll_sketch_agg(x, lgConfigK)` per group (role agg, StoredColumn.agg
  "hll", type binary), written directly in its definition or turned from
  approx_count_distinct(x[, rsd]) by `sketch_definition` when DMPROPERTIES say
  'distinct_sketch'='hll'. Sketches merge with hll_union_agg (segments, compaction), so
    approx_count_distinct(x[, rsd])        -> hll_sketch_estimate(hll_union_agg(col))
    hll_sketch_agg(x[, k]) (same k)        -> hll_union_agg(col)
  on a rollup, and hll_sketch_estimate(col) / col on an exact grain match. Datasketches'
  HLL is not Spark's HLL++ (other hash, other estimator, union vs direct estimates), so the
  number differs from what Spark would return: refused with a reason naming the setting
  unless the session allows it, and every use is recorded (EXPLAIN lists it).
"""
from __future__ import annotations

import contextvars
import math
from typing import Mapping

from sqlglot import exp

from rewriter.normalize import DIALECT, parse

APPROXIMATE_KEY = "datamap.rewrite.approximate"
SKETCH_PROPERTY = "distinct_sketch"          # DMPROPERTIES('distinct_sketch'='hll')
LGK_PROPERTY = "distinct_sketch_lgk"          # optional: lgConfigK of the stored sketches
DEFAULT_LGK = 12                              # hll_sketch_agg's own default
MIN_LGK, MAX_LGK = 4, 21                      # what hll_sketch_agg accepts
SKETCH_KIND = "hll"                           # StoredColumn.agg of a sketch column

# Set by DatamapIndex.rewrite for the statement being rewritten: whether the session
# allows approximate answers. A context variable rather than an argument threaded through
# every block and match call: only rules/rollup_distinct.py reads it.
APPROXIMATE: contextvars.ContextVar[bool] = contextvars.ContextVar("datamap_approximate",
                                                                   default=False)


class SketchDefinitionError(ValueError):
    """DMPROPERTIES asking for sketches that cannot be honoured; the message names why."""


# ---------------------------------------------------------------- definitions

def is_sketch_agg(node: exp.Expression) -> bool:
    return isinstance(node, exp.Anonymous) and node.name.lower() == "hll_sketch_agg"


def sketch_lgk(node: exp.Expression) -> int | None:
    """lgConfigK of an hll_sketch_agg call (its default when not written); None when it is
    not an integer literal in hll_sketch_agg's range."""
    args = node.expressions
    if len(args) == 1:
        return DEFAULT_LGK
    k = args[1] if len(args) == 2 else None
    if isinstance(k, exp.Literal) and not k.is_string and k.this.isdigit() \
            and MIN_LGK <= int(k.this) <= MAX_LGK:
        return int(k.this)
    return None


def lgk_for(relative_sd: float) -> int:
    """The smallest lgConfigK whose standard error (1.04 / sqrt(2^k) for an HLL sketch) is
    at most `relative_sd`, within hll_sketch_agg's range."""
    if relative_sd <= 0:
        return MAX_LGK
    return max(MIN_LGK, min(MAX_LGK, math.ceil(2 * math.log2(1.04 / relative_sd))))


def sketch_definition(select_sql: str, props: Mapping[str, str]) -> str:
    """The definition to store when DMPROPERTIES ask for sketches: every
    approx_count_distinct(x[, rsd]) becomes hll_sketch_agg(x, k), k from the property
    'distinct_sketch_lgk', else from rsd, else 12. The text unchanged without the property."""
    kind = (props.get(SKETCH_PROPERTY) or "").strip().lower()
    if not kind:
        return select_sql
    if kind != "hll":
        raise SketchDefinitionError(f"'{SKETCH_PROPERTY}'='{props[SKETCH_PROPERTY]}': expected 'hll'")
    fixed = props.get(LGK_PROPERTY)
    if fixed is not None and not (fixed.strip().isdigit() and MIN_LGK <= int(fixed) <= MAX_LGK):
        raise SketchDefinitionError(f"'{LGK_PROPERTY}'='{fixed}': expected a whole number "
                                    f"from {MIN_LGK} to {MAX_LGK}")
    tree = parse(select_sql)
    calls = [n for n in tree.walk() if isinstance(n, exp.ApproxDistinct)]
    if not calls:
        raise SketchDefinitionError(f"'{SKETCH_PROPERTY}'='hll' needs an "
                                    "approx_count_distinct(x) in the datamap query")
    for call in calls:
        k = int(fixed) if fixed is not None else DEFAULT_LGK
        rsd = call.args.get("accuracy")
        if fixed is None and rsd is not None:
            try:
                k = lgk_for(float(rsd.this))
            except (TypeError, ValueError):
                raise SketchDefinitionError(f"{call.sql(DIALECT)}: relativeSD must be a number") from None
        call.replace(exp.Anonymous(this="hll_sketch_agg",
                                   expressions=[call.this.copy(), exp.Literal.number(k)]))
    return tree.sql(DIALECT)


# ---------------------------------------------------------------- queries

def is_distinct_estimate(node: exp.Expression) -> bool:
    return isinstance(node, exp.ApproxDistinct) or is_sketch_agg(node)
