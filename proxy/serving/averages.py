"""avg(x) and avg(DISTINCT x) as plain aggregates, computed as Spark computes them (pure).

Spark's Average: of integers and doubles, the sum of the values as doubles over the count
(a double; NULL over no rows); of decimal(p,s), the sum as decimal(p+10,s) divided by the
count (DecimalDivideWithOverflowCheck: the quotient at scale 39, then decimal(p+4,s+4),
each rounding HALF_UP; the engine's spark_decimal_div rounds exactly once per step). A sum that overflows its type raises, and
Spark answers. avg(DISTINCT x) is the same over the distinct values: of integers and
decimals only (a double's -0.0 / NaN folding in DISTINCT is not proven here).
"""
from __future__ import annotations

from sqlglot import exp

from proxy.serving.sqltypes import DEC, NotServable, duck_type
from rewriter.sparktypes import INTEGRAL

__all__ = ["avg", "decimal_average"]

_WIDE = 80     # the intermediate quotient's digits are not bounded (only the result's)


def avg(self, e: exp.Avg, scope) -> tuple[str, str]:
    arg, distinct = e.this, ""
    if isinstance(arg, exp.Distinct):
        if len(arg.expressions) != 1:
            raise NotServable("avg(DISTINCT ...) of several columns")
        arg, distinct = arg.expressions[0], "DISTINCT "
    if e.args.get("expressions"):
        raise NotServable("avg with more than one argument")
    sql, t = self.expr(arg, scope)
    d = DEC.match(t)
    if not (t in INTEGRAL or d or (t == "double" and not distinct)):
        raise NotServable(f"avg({distinct}...) of {t}")
    count = f"COUNT({distinct}{sql})"
    if d is None:        # the sum of the values as doubles over the count
        return (f"(CASE WHEN {count} = 0 THEN CAST(NULL AS DOUBLE) ELSE "
                f"SUM({distinct}CAST({sql} AS DOUBLE)) / {count} END)"), "double"
    p, s = int(d[1]), int(d[2])
    return decimal_average(f"SUM({distinct}{sql})", count, p, s)


def decimal_average(total: str, count: str, p: int, s: int) -> tuple[str, str]:
    """Spark's Average of decimal(p,s) values from their SUM and COUNT (SQL of the same
    rows: a group's aggregates or a window's): the sum as decimal(p+10,s), divided by
    DecimalDivideWithOverflowCheck, as a plain aggregate and over a window alike."""
    sp = min(38, p + 10)
    total = f"CAST({total} AS {duck_type(f'decimal({sp},{s})')})"
    rp, rs = min(38, p + 4), min(38, s + 4)
    # Decimal./ (the quotient at scale MAX_SCALE + 1 = 39, HALF_UP), then toPrecision(p+4,
    # s+4, HALF_UP); over p+4 digits raises
    quotient = (f"spark_decimal_div(CAST({total} AS VARCHAR), CAST({count} AS VARCHAR), "
                f"{_WIDE}, 39)")
    return (f"CAST(CASE WHEN {count} = 0 THEN NULL ELSE spark_decimal_div({quotient}, '1', "
            f"{rp}, {rs}) END AS DECIMAL({rp},{rs}))"), f"decimal({rp},{rs})"
