"""Spark result types of expressions, as far as the rewriter needs them.

Used for the stored column types of a datamap and for the casts that keep a rewritten
query's output types equal to the original's (sum of a decimal widens by 10 digits, avg of
a decimal(p,s) is decimal(p+4,s+4), ...). Rules follow Spark's DecimalPrecision and
the aggregate functions' resultType; anything not covered returns None, and callers that
need a type then refuse instead of guessing.
"""
from __future__ import annotations

import re

from sqlglot import exp

INTEGRAL = {"tinyint": 3, "smallint": 5, "int": 10, "bigint": 20}
FRACTIONAL = {"float", "double"}
_DEC = re.compile(r"^decimal\((\d+),\s*(\d+)\)$")
_ALIASES = {"integer": "int", "long": "bigint", "short": "smallint", "byte": "tinyint",
            "real": "float", "decimal": "decimal(10,0)", "varchar": "string", "text": "string"}


def norm(t: str | None) -> str | None:
    if t is None:
        return None
    t = t.strip().lower().replace(" ", "")
    return _ALIASES.get(t, t)


def decimal_of(t: str | None) -> tuple[int, int] | None:
    t = norm(t)
    if t is None:
        return None
    m = _DEC.match(t)
    if m:
        return int(m.group(1)), int(m.group(2))
    if t in INTEGRAL:
        return INTEGRAL[t], 0
    return None


def is_numeric(t: str | None) -> bool:
    t = norm(t)
    return t is not None and (t in INTEGRAL or t in FRACTIONAL or bool(_DEC.match(t)))


def dec(p: int, s: int) -> str:
    return f"decimal({min(p, 38)},{min(s, 38)})"


def _adjust(p: int, s: int) -> str:
    # DecimalType.adjustPrecisionScale with allowPrecisionLoss=true (Spark's default)
    if p <= 38:
        return dec(p, s)
    int_digits = p - s
    min_scale = min(s, 6)
    return dec(38, max(38 - int_digits, min_scale))


def sum_type(t: str | None) -> str | None:
    t = norm(t)
    if t == "string":   # Spark sums them cast to double (ANSI: fails on a malformed one)
        return "double"
    if t in INTEGRAL:
        return "bigint"
    if t in FRACTIONAL:
        return "double"
    d = decimal_of(t)
    if d and t.startswith("decimal"):
        return dec(d[0] + 10, d[1])
    return None


def avg_type(t: str | None) -> str | None:
    t = norm(t)
    if t in INTEGRAL or t in FRACTIONAL:   # not string: count(s) counts what avg skips
        return "double"
    if t and t.startswith("decimal"):
        p, s = decimal_of(t)
        return dec(p + 4, s + 4)
    return None


_NUMERIC_ORDER = ["tinyint", "smallint", "int", "bigint", "float", "double"]


def _wider_two(a: str, b: str) -> str | None:
    if a == b:
        return a
    if a in _NUMERIC_ORDER and b in _NUMERIC_ORDER:
        return max(a, b, key=_NUMERIC_ORDER.index)
    da, db = decimal_of(a), decimal_of(b)
    if da is None or db is None:
        return "double" if (a in FRACTIONAL and db) or (b in FRACTIONAL and da) else None
    # an integral type joins a decimal as decimal(digits, 0) (DecimalType.forType), then
    # the wider decimal keeps both integer ranges and the larger scale (bounded at 38)
    s = max(da[1], db[1])
    return dec(max(da[0] - da[1], db[0] - db[1]) + s, s)


def wider(types: list[str | None]) -> str | None:
    """The type Spark gives CASE / IF / COALESCE branches of these types (its wider common
    type for numbers; otherwise all must be equal), None when unknown or not that simple."""
    out = None
    for t in types:
        t = norm(t)
        if t is None:
            return None
        out = t if out is None else _wider_two(out, t)
        if out is None:
            return None
    return out


def literal_type(e: exp.Literal) -> str | None:
    if e.is_string:
        return "string"
    text = e.this
    if re.fullmatch(r"\d+", text):
        v = int(text)
        return "int" if v < 2**31 else ("bigint" if v < 2**63 else dec(len(text), 0))
    m = re.fullmatch(r"(\d*)\.(\d+)", text)
    if m:
        digits = len((m.group(1) or "").lstrip("0")) + len(m.group(2))
        return dec(max(digits, len(m.group(2)), 1), len(m.group(2)))
    if re.fullmatch(r"[\d.]+[eE][+-]?\d+", text):
        return "double"
    return None


def _literal_decimal(e: exp.Expression) -> tuple[int, int] | None:
    """Spark types an integral literal in decimal arithmetic by its own digits."""
    if isinstance(e, exp.Literal) and not e.is_string and e.this.isdigit():
        return max(len(e.this.lstrip("0")), 1), 0
    return None


def _arith(op, a: exp.Expression, b: exp.Expression, ta: str, tb: str) -> str | None:
    if ta in FRACTIONAL or tb in FRACTIONAL:
        return "double"
    if op is exp.Div and ta in INTEGRAL and tb in INTEGRAL:
        return "double"
    if ta in INTEGRAL and tb in INTEGRAL:
        order = ["tinyint", "smallint", "int", "bigint"]
        return order[max(order.index(ta), order.index(tb))]
    da = _literal_decimal(a) if tb.startswith("decimal") else None
    db = _literal_decimal(b) if ta.startswith("decimal") else None
    da = da or decimal_of(ta)
    db = db or decimal_of(tb)
    if not da or not db:
        return None
    (p1, s1), (p2, s2) = da, db
    if op in (exp.Add, exp.Sub):
        s = max(s1, s2)
        return _adjust(max(p1 - s1, p2 - s2) + s + 1, s)
    if op is exp.Mul:
        return _adjust(p1 + p2 + 1, s1 + s2)
    if op is exp.Div:
        s = max(6, s1 + p2 + 1)
        return _adjust(p1 - s1 + s2 + s, s)
    if op is exp.Mod:
        s = max(s1, s2)
        return _adjust(min(p1 - s1, p2 - s2) + s, s)
    return None


_FIXED = {exp.Year: "int", exp.Month: "int", exp.Day: "int", exp.Quarter: "int",
          exp.Upper: "string", exp.Lower: "string", exp.Substring: "string",
          exp.Concat: "string", exp.DPipe: "string", exp.Length: "int",
          exp.TimestampTrunc: "timestamp", exp.Count: "bigint"}
_PREDICATES = (exp.Predicate, exp.Not, exp.And, exp.Or, exp.In, exp.Between, exp.Is)
_ANON = {"weekofyear": "int", "dayofweek": "int", "dayofmonth": "int", "hour": "int",
         "minute": "int", "second": "int", "to_date": "date", "date_format": "string",
         "concat_ws": "string", "trim": "string"}


def infer(e: exp.Expression, column_type) -> str | None:
    """Spark type of a canonical expression; `column_type(Column) -> str | None`."""
    if isinstance(e, exp.Paren):
        return infer(e.this, column_type)
    if isinstance(e, exp.Column):
        return norm(column_type(e))
    if isinstance(e, exp.Literal):
        return literal_type(e)
    if isinstance(e, exp.Boolean):
        return "boolean"
    if isinstance(e, exp.Cast):
        return norm(e.to.sql("spark"))
    if isinstance(e, exp.Neg):
        return infer(e.this, column_type)
    if isinstance(e, (exp.Add, exp.Sub)) and isinstance(e.expression, exp.Anonymous) \
            and e.expression.name.lower() == "make_dt_interval" \
            and infer(e.this, column_type) == "timestamp":
        return "timestamp"        # timeseries()' n-minute buckets (rewriter/timeseries.py)
    if isinstance(e, (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod)):
        ta, tb = infer(e.this, column_type), infer(e.expression, column_type)
        if not ta or not tb:
            return None
        return _arith(type(e), e.this, e.expression, ta, tb)
    if isinstance(e, _PREDICATES):
        return "boolean"
    if isinstance(e, exp.Abs):
        return infer(e.this, column_type)
    if isinstance(e, exp.Coalesce):
        return wider([infer(x, column_type) for x in [e.this, *e.expressions]
                      if not isinstance(x, exp.Null)])
    if isinstance(e, exp.Case):
        branches = [w.args.get("true") for w in e.args.get("ifs") or []]
        if e.args.get("default") is not None:
            branches.append(e.args["default"])
        return wider([infer(x, column_type) for x in branches if not isinstance(x, exp.Null)])
    if isinstance(e, exp.If):
        branches = [e.args.get("true"), e.args.get("false")]
        return wider([infer(x, column_type) for x in branches
                      if x is not None and not isinstance(x, exp.Null)])
    if isinstance(e, exp.Sum):
        return sum_type(infer(e.this, column_type))
    if isinstance(e, exp.Avg):
        return avg_type(infer(e.this, column_type))
    if isinstance(e, (exp.Min, exp.Max)):
        return infer(e.this, column_type)
    for cls, t in _FIXED.items():
        if isinstance(e, cls):
            return t
    if isinstance(e, exp.Anonymous):
        return _ANON.get(e.name.lower())
    return None
