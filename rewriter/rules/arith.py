"""Spark's arithmetic for rebuilt aggregates: avg from a sum and a count, typed as Spark
types it, and casts to a Spark type. A leaf under the aggregate rules."""
from __future__ import annotations

import functools

from sqlglot import exp

from rewriter import sparktypes


@functools.lru_cache(maxsize=256)
def _datatype(t: str) -> exp.DataType:
    return exp.DataType.build(t, dialect="spark")


def cast(e: exp.Expression, t: str) -> exp.Expression:
    return exp.Cast(this=e, to=_datatype(t).copy())


def average(num: exp.Expression, den: exp.Expression, arg_type: str, reagg: bool) -> exp.Expression:
    """avg as Spark computes it from a sum and a count of its argument (type arg_type)."""
    at = sparktypes.avg_type(arg_type)
    if at.startswith("decimal"):
        st = sparktypes.sum_type(arg_type)
        num = cast(num, st) if reagg else num
        div = exp.Div(this=num, expression=cast(den, "decimal(20,0)"))
        return cast(div, at)
    return exp.Div(this=num, expression=den)
