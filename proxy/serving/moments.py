"""Variances and standard deviations rolled up from a datamap's stored moments (pure).

The rewriter answers var_pop / var_samp / stddev_pop / stddev_samp (and variance, stddev,
std) from a datamap's count, sum and sum of squares (as double), min and max of the
argument, as one CASE expression (rewriter/moments.py `formula`):

  CASE WHEN n > k THEN [SQRT](CASE WHEN lo = hi [AND NOT isnan(s - s)] THEN 0.0
                                ELSE GREATEST((q - s * s / n) / den, 0.0) END) END

(k = 0 and den = n for the population forms, k = 1 and den = n - 1 for the sample forms).
That expression, and only it (`rewriter.moments.read_formula` reads it back and builds it
again), is served here with each step written as Spark computes it:
  * n a bigint, s and q doubles (their sums are the tier's SUM of double: the order of
    the additions differs from Spark's, which the documented double tolerance covers),
    lo and hi of one numeric type;
  * s * s / n and the division by den in double, in Spark's order of operations;
  * lo = hi as Spark compares them (NaN = NaN, -0.0 = 0.0: DuckDB's too);
  * GREATEST(v, 0.0) as Spark's (NaN is the greatest double): v when it is NaN or above
    zero, else 0.0 (a v of -0.0 cannot occur: q and s * s / n are sums of squares);
  * SQRT correctly rounded in both engines; NULL below k + 1 values (no rows, or one row
    of a sample form), as Spark answers with spark.sql.legacy.statisticalAggregate off
    (a session that sets any spark.sql.legacy key is never answered from datamaps:
    proxy/routing/session_keys.py).
Anything else of that shape is not a moment here and is left to the generic CASE (which
refuses GREATEST of doubles)."""
from __future__ import annotations

from sqlglot import exp

from proxy.serving.sqltypes import DEC, NotServable
from rewriter.moments import read_formula
from rewriter.sparktypes import INTEGRAL

ALLOWED = ("var_pop, var_samp, variance, stddev_pop, stddev_samp, stddev, std rolled up "
           "from stored moments (double; NULL for no value, and for one value of a sample "
           "form)")


def moment(self, e: exp.Case, scope) -> tuple[str, str] | None:
    """(DuckDB SQL, "double") of a rolled-up variance, None when `e` is not one."""
    f = read_formula(e)
    if f is None:
        return None
    n = _typed(self, f.n, scope, ("bigint",), "count")
    s = _typed(self, f.s, scope, ("double",), "sum")
    q = _typed(self, f.q, scope, ("double",), "sum of squares")
    lo, lt = self.expr(f.lo, scope)
    hi, ht = self.expr(f.hi, scope)
    if lt != ht or not (lt in INTEGRAL or DEC.match(lt) or lt == "double"):
        raise NotServable(f"a variance whose minimum and maximum are {lt} and {ht}")
    nd = f"CAST({n} AS DOUBLE)"
    den = nd if f.population else f"(CAST({n} AS DOUBLE) - 1.0)"
    value = f"(({q} - {s} * {s} / {nd}) / {den})"
    equal = f"({lo} = {hi})"
    if f.floating:
        equal = f"({equal} AND NOT isnan({s} - {s}))"
    var = (f"(CASE WHEN {equal} THEN CAST(0 AS DOUBLE) WHEN isnan({value}) OR {value} > 0 "
           f"THEN {value} ELSE CAST(0 AS DOUBLE) END)")
    if f.root:
        var = f"sqrt({var})"
    return f"(CASE WHEN {n} > {0 if f.population else 1} THEN {var} END)", "double"


def _typed(self, part: exp.Expression, scope, types: tuple[str, ...], what: str) -> str:
    sql, t = self.expr(part, scope)
    if t not in types:
        raise NotServable(f"a variance whose stored {what} is {t}")
    return sql
