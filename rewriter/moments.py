"""Variances and standard deviations kept as re-aggregatable parts. A leaf: layout.py
stores the parts, rules/rollup_moments.py computes the query's aggregate from them.

var_pop(x), var_samp(x) (= variance(x)), stddev_pop(x), stddev_samp(x) (= stddev(x),
std(x)) are each computed from five sums that merge over any partition of the rows (the
segments of a datamap, its rows within a coarser group):

  n = count(x)    s = sum(CAST(x AS DOUBLE))    q = sum(CAST(x AS DOUBLE) * CAST(x AS DOUBLE))
  lo = min(x)     hi = max(x)

  var_pop  = (q - s*s/n) / n        (NULL when n = 0)
  var_samp = (q - s*s/n) / (n - 1)  (NULL when n <= 1, as Spark answers without
                                     spark.sql.legacy.statisticalAggregate)

Spark types all of them double (a decimal or integral x is cast to double first). Spark
computes them with a running mean (Welford), which is exact for a group whose values are
all equal (0.0); the sums above are not, so lo = hi answers 0.0 for such a group (for a
floating x only when s is finite: a NaN or infinite value makes Spark's answer NaN, as
the sums do). A negative result of the rounding is 0.0. Otherwise the two differ by the
rounding of the sums: relative to the variance, about 2^-52 * n * (mean^2 / variance),
which is within the audit's 1e-9 (docs/sql.md) while mean^2 / variance stays below about
10^5 over a group's values.
"""
from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

# sqlglot's node -> (population?, square root?)
_NODES = {exp.VariancePop: (True, False), exp.Variance: (False, False),
          exp.StddevPop: (True, True), exp.StddevSamp: (False, True), exp.Stddev: (False, True)}
_NAMES = {"var_pop": (True, False), "var_samp": (False, False), "variance": (False, False),
          "stddev_pop": (True, True), "stddev_samp": (False, True), "stddev": (False, True),
          "std": (False, True)}

# the parts, in the order parts() gives them
PARTS = ("n", "s", "q", "lo", "hi")


def form(node: exp.Expression) -> tuple[bool, bool] | None:
    """(population, square root) of a variance / standard deviation call, else None."""
    for cls, f in _NODES.items():
        if type(node) is cls:
            return f
    if isinstance(node, exp.Anonymous) and len(node.expressions) == 1:
        return _NAMES.get(node.name.lower())
    return None


def is_moment(node: exp.Expression) -> bool:
    return form(node) is not None


def argument(node: exp.Expression) -> exp.Expression:
    return node.expressions[0] if isinstance(node, exp.Anonymous) else node.this


def _double(x: exp.Expression) -> exp.Expression:
    return exp.Cast(this=x.copy(), to=exp.DataType.build("double"))


def part_args(x: exp.Expression) -> list[tuple[str, exp.Expression]]:
    """(stored kind, its argument) of each part, in PARTS order."""
    return [("count", x.copy()), ("sum", _double(x)),
            ("sum", exp.Mul(this=_double(x), expression=_double(x))),
            ("min", x.copy()), ("max", x.copy())]


def parts(x: exp.Expression, q_x: exp.Expression, argname: str):
    """(kind, canonical argument, argument as written in the definition, column name base)
    of each part of a variance of x (canonical) / q_x (qualified, as written)."""
    names = [f"count_{argname}", f"sum_{argname}_double", f"sumsq_{argname}",
             f"min_{argname}", f"max_{argname}"]
    return [(kind, arg, q_arg, base) for (kind, arg), (_, q_arg), base
            in zip(part_args(x), part_args(q_x), names)]


def formula(node: exp.Expression, n, s, q, lo, hi, floating: bool) -> exp.Expression:
    """The variance / standard deviation `node` computed from its parts' values."""
    population, root = form(node)
    return formula_of(population, root, n, s, q, lo, hi, floating)


def formula_of(population: bool, root: bool, n, s, q, lo, hi, floating: bool) -> exp.Expression:
    """formula() of a variance (population or sample, its square root or not)."""
    zero = exp.Cast(this=exp.Literal.number(0), to=exp.DataType.build("double"))
    spread = exp.Sub(this=q, expression=exp.Div(this=exp.Mul(this=s, expression=s.copy()),
                                                 expression=n))
    den = n.copy() if population else exp.Paren(this=exp.Sub(this=n.copy(),
                                                              expression=exp.Literal.number(1)))
    value = exp.Greatest(this=exp.Div(this=exp.Paren(this=spread), expression=den),
                         expressions=[zero])
    equal = exp.EQ(this=lo, expression=hi)
    if floating:
        finite = exp.Not(this=exp.Anonymous(this="isnan", expressions=[
            exp.Sub(this=s.copy(), expression=s.copy())]))
        equal = exp.And(this=equal, expression=finite)
    var = exp.Case(ifs=[exp.If(this=equal, true=zero.copy())], default=value)
    if root:
        var = exp.Sqrt(this=var)
    enough = exp.GT(this=n.copy(), expression=exp.Literal.number(0 if population else 1))
    return exp.Case(ifs=[exp.If(this=enough, true=var)])


@dataclass(frozen=True)
class Formula:
    """What formula() was given, read back off its result (read_formula)."""
    population: bool
    root: bool
    floating: bool
    n: exp.Expression
    s: exp.Expression
    q: exp.Expression
    lo: exp.Expression
    hi: exp.Expression


def read_formula(node: exp.Expression) -> Formula | None:
    """The parts of an expression formula() built (a rewritten query's variance, also once
    printed and parsed again), or None for anything else: the candidate parts are read off
    their places and formula() is built from them again; only the very same SQL counts."""
    try:
        population, root, var, n = _outer(node)
        equal, greatest = var.args["ifs"][0].this, var.args["default"]
        floating = isinstance(equal, exp.And)
        lo, hi = (equal.this if floating else equal).this, (equal.this if floating else equal).expression
        spread = greatest.this.this.this            # GREATEST(Div(Paren(Sub(q, s*s/n))))
        q, s = spread.this, spread.expression.this.this
    except (AttributeError, IndexError, KeyError, TypeError):
        return None
    found = Formula(population, root, floating, n, s, q, lo, hi)
    again = formula_of(population, root, n.copy(), s.copy(), q.copy(), lo.copy(), hi.copy(),
                       floating)
    return found if again.sql("spark") == node.sql("spark") else None


def _outer(node: exp.Expression):
    """(population, root, the inner CASE, n) of CASE WHEN n > k THEN [SQRT](CASE ...) END."""
    if not isinstance(node, exp.Case) or node.this is not None or node.args.get("default") \
            or len(node.args["ifs"]) != 1:
        raise TypeError
    when = node.args["ifs"][0]
    cond, body = when.this, when.args["true"]
    if not isinstance(cond, exp.GT) or cond.expression.this not in ("0", "1"):
        raise TypeError
    root = isinstance(body, exp.Sqrt)
    var = body.this if root else body
    if not isinstance(var, exp.Case):
        raise TypeError
    return cond.expression.this == "0", root, var, cond.this
