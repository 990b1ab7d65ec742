"""Predicates on one column, compiled to tests over one file's statistics (files.py).

`compile_predicate` turns a WHERE / ON conjunct whose columns all belong to one table
reference into a small tree of tests; `possible` says whether some row of a file could make
it TRUE, from the file's FileStats. `possible` returning False is a proof, so anything not
understood compiles to None ("could be TRUE") and every literal is turned into the value
Spark compares with, or refused:

  * numeric column vs numeric literal: Spark widens both to a common type, which here is
    exact (int vs decimal as Decimal, float/double as Python float: Spark casts the literal
    to double, and to float for a FLOAT column, so a literal a float cannot hold is refused);
    a string literal vs a number (or a number vs a string column) is refused: Spark casts
    the string, whose order is not the number's;
  * string column vs string literal: Spark's default collation (UTF8_BINARY) orders by
    bytes, which for UTF-8 is Python's code point order; CHAR(n) (padding) is refused;
  * date / timestamp column vs DATE '…' / TIMESTAMP '…' / CAST('…' AS …) / a plain string
    in the strict ISO form (other spellings Spark's cast accepts are refused); timestamps
    are naive, in the session time zone the statistics were built in (the proxy prunes only
    sessions that did not change the time zone);
  * a NaN low/high (Spark orders NaN above every number) never prunes.
NULL never makes a comparison TRUE: a file whose column is all NULL fails every comparison.
"""
from __future__ import annotations

import datetime as dt
import math
import re
import struct
from decimal import ROUND_DOWN, Decimal, InvalidOperation
from typing import Any

from sqlglot import exp

from rewriter import sparktypes
from rewriter.normalize import strip_parens
from rewriter.prune.filestats import ColumnStats, FileStats

# compiled forms: ("and", parts) ("or", parts) ("cmp", col, op, value, bloom_value)
# ("in", col, [(value, bloom_value)]) ("notin", col, values) ("null", col) ("notnull", col)
Test = tuple
_OPS = {exp.EQ: "=", exp.NEQ: "<>", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}
_MIRROR = {"=": "=", "<>": "<>", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_NEGATED = {"=": "<>", "<>": "=", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}
_INT = re.compile(r"[+-]?\d+")
_DEC = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_TS = re.compile(r"\d{4}-\d{2}-\d{2}( \d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?)?")
# An IN list longer than this is tested as the range of its values (still a proof: a file
# outside the range holds none of them), so a 10,000-value list costs what a BETWEEN does.
LONG_IN_LIST = 64
_INT_RANGE = {"tinyint": 1 << 7, "smallint": 1 << 15, "int": 1 << 31, "bigint": 1 << 63}


def _family(column_type: str | None) -> str | None:
    t = sparktypes.norm(column_type)
    if t is None:
        return None
    if t in sparktypes.INTEGRAL:
        return "int"
    if t in ("float", "double", "boolean", "date", "timestamp", "string"):
        return t
    if t.startswith("varchar("):
        return "string"
    if t.startswith("decimal("):
        return "decimal"
    return None


def _number(e: exp.Expression):
    """A numeric literal's exact value (int, Decimal, or float for 1e3), or None."""
    neg = False
    e = strip_parens(e)
    while isinstance(e, exp.Neg):
        neg, e = not neg, strip_parens(e.this)
    if isinstance(e, (exp.Cast, exp.TryCast)):       # 5L, 5Y, CAST(5 AS BIGINT)
        limit = _INT_RANGE.get(sparktypes.norm(e.to.sql("spark")) or "")
        inner = e.this
        if limit is None or not isinstance(inner, exp.Literal) or inner.is_string \
                or not _INT.fullmatch(inner.this) or not -limit <= int(inner.this) < limit:
            return None                  # CAST(5.7 AS INT) is 5; CAST(300 AS TINYINT) wraps
        e = inner
    if not isinstance(e, exp.Literal) or e.is_string:
        return None
    text = e.this
    try:
        if _INT.fullmatch(text):
            v: Any = int(text)
        elif _DEC.fullmatch(text):
            v = Decimal(text)
        else:
            v = float(text)                          # 1e3: a DOUBLE literal in Spark
            if not math.isfinite(v):
                return None
    except (ValueError, InvalidOperation):
        return None
    return -v if neg else v


def _fits_float(f: float) -> bool:
    """Does a FLOAT (32-bit) hold this value exactly (Spark casts the literal to FLOAT)?"""
    try:
        return struct.unpack("f", struct.pack("f", f))[0] == f
    except OverflowError:
        return False


def _text(e: exp.Expression, target: str) -> str | None:
    """'x', or DATE 'x' / CAST('x' AS <target>) when `target` is that cast's type."""
    e = strip_parens(e)
    if isinstance(e, exp.Literal) and e.is_string:
        return e.this
    if isinstance(e, exp.Cast) and not isinstance(e, exp.TryCast) \
            and isinstance(e.this, exp.Literal) and e.this.is_string \
            and _family(e.to.sql("spark")) == target:
        return e.this.this
    return None


def typed(e: exp.Expression, column_type: str | None):
    """(value to compare with the file's low/high, value for a bloom filter or None), or
    None when Spark's comparison of the column with `e` is not a plain order on one value."""
    family = _family(column_type)
    if family in ("int", "float", "double", "decimal"):
        v = _number(e)
        if v is None:
            return None
        if family in ("float", "double"):
            f = float(v)
            if family == "float" and not _fits_float(f):
                return None
            return f, f
        if isinstance(v, float):                     # a DOUBLE literal: Spark casts the column
            return None
        if family == "int":
            exact = int(v) if v == int(v) else None
            limit = _INT_RANGE[sparktypes.norm(column_type)]
            return v, exact if exact is not None and -limit <= exact < limit else None
        d = Decimal(v)
        try:      # the bloom filter holds values of the column's scale
            q = d.quantize(Decimal(1).scaleb(-sparktypes.decimal_of(column_type)[1]),
                           rounding=ROUND_DOWN)
        except InvalidOperation:
            q = None
        return d, q if q == d else None
    if family == "boolean":
        e = strip_parens(e)
        return (e.this, e.this) if isinstance(e, exp.Boolean) else None
    if family == "string":
        text = _text(e, "string")
        return None if text is None else (text, text)
    if family == "date":
        text = _text(e, "date")
        if text is None or not _DATE.fullmatch(text.strip()):
            return None
        d = _parse(dt.date.fromisoformat, text.strip())
        return None if d is None else (d, d)
    if family == "timestamp":
        text = _text(e, "timestamp")
        if text is None:
            date = _text(e, "date")              # a DATE compared with a TIMESTAMP: midnight
            if isinstance(strip_parens(e), exp.Cast) and date and _DATE.fullmatch(date.strip()):
                text = date
        if text is None or not _TS.fullmatch(text.strip()):
            return None
        t = _parse(dt.datetime.fromisoformat, text.strip())
        return None if t is None else (t, t)
    return None


def _parse(fn, text):
    try:
        return fn(text)
    except ValueError:
        return None


def compile_predicate(e: exp.Expression, types: dict[str, str], name_of) -> Test | None:
    """One predicate -> a test, or None (not understood: could be TRUE). `name_of(column)`
    is the table reference's column name for an exp.Column, or None when it is not one
    of that reference's."""
    e = strip_parens(e)
    if isinstance(e, (exp.And, exp.Or)):
        parts = [compile_predicate(x, types, name_of) for x in (e.this, e.expression)]
        if isinstance(e, exp.Or) and None in parts:
            return None
        parts = [p for p in parts if p is not None]
        return (("and" if isinstance(e, exp.And) else "or"), parts) if parts else None
    if isinstance(e, exp.Not):
        inner = strip_parens(e.this)
        if isinstance(inner, exp.Is) and isinstance(strip_parens(inner.expression), exp.Null):
            col = _column(inner.this, name_of)
            return None if col is None else ("notnull", col)
        if isinstance(inner, exp.In) and not inner.args.get("query") \
                and not inner.args.get("unnest"):
            col = _column(inner.this, name_of)
            if col is None:
                return None
            # a NULL in the list makes NOT IN never TRUE: only plain values are compiled
            values = [typed(v, types[col]) for v in inner.expressions]
            return None if not values or None in values \
                else ("notin", col, [v[0] for v in values])
        negated = _negate(inner)
        return None if negated is None else compile_predicate(negated, types, name_of)
    if isinstance(e, exp.Between):
        col = _column(e.this, name_of)
        if col is None:
            return None
        low = typed(e.args["low"], types[col])
        high = typed(e.args["high"], types[col])
        if low is None or high is None:
            return None
        return ("and", [("cmp", col, ">=", *low), ("cmp", col, "<=", *high)])
    if isinstance(e, exp.Is) and isinstance(strip_parens(e.expression), exp.Null):
        col = _column(e.this, name_of)
        return None if col is None else ("null", col)
    if isinstance(e, exp.In) and not e.args.get("query") and not e.args.get("unnest"):
        col = _column(e.this, name_of)
        if col is None:
            return None
        values = [typed(v, types[col]) for v in e.expressions]
        if not values or None in values:
            return None
        if len(values) > LONG_IN_LIST:  # checked per file: its range only, no bloom probes
            low, high = min(v[0] for v in values), max(v[0] for v in values)
            return ("and", [("cmp", col, ">=", low, None), ("cmp", col, "<=", high, None)])
        return ("in", col, values)
    op = _OPS.get(type(e))
    if op is None:
        return None
    col, other = _column(e.this, name_of), e.expression
    if col is None:
        col, other, op = _column(e.expression, name_of), e.this, _MIRROR[op]
    if col is None:
        return None
    value = typed(other, types[col])
    return None if value is None else ("cmp", col, op, *value)


def _negate(e: exp.Expression) -> exp.Expression | None:
    """NOT e as an equivalent predicate in three-valued logic, or None."""
    if isinstance(e, exp.Not):
        return strip_parens(e.this)
    if isinstance(e, (exp.And, exp.Or)):
        a, b = _negate(strip_parens(e.this)), _negate(strip_parens(e.expression))
        if a is None or b is None:
            return None
        return (exp.Or if isinstance(e, exp.And) else exp.And)(this=a, expression=b)
    if type(e) in _OPS:
        cls = next(k for k, v in _OPS.items() if v == _NEGATED[_OPS[type(e)]])
        return cls(this=e.this, expression=e.expression)
    if isinstance(e, (exp.Is, exp.In)):
        return exp.Not(this=e)          # IS NOT NULL / NOT IN: compiled by compile_predicate
    if isinstance(e, exp.Between):
        return exp.Or(this=exp.LT(this=e.this, expression=e.args["low"]),
                      expression=exp.GT(this=e.this, expression=e.args["high"]))
    return None


def _column(e: exp.Expression, name_of) -> str | None:
    e = strip_parens(e)
    return name_of(e) if isinstance(e, exp.Column) else None


def possible(test: Test, fs: FileStats, minmax: bool = True, bloom: bool = True,
             columns: frozenset[str] | None = None) -> bool:
    """Could some row of the file make `test` TRUE? False only when the statistics prove
    it cannot. `minmax` / `bloom` / `columns` restrict the statistics used (to say which
    index datamap pruned a file)."""
    if fs.rows == 0:
        return False
    kind = test[0]
    if kind == "and":
        return all(possible(t, fs, minmax, bloom, columns) for t in test[1])
    if kind == "or":
        return any(possible(t, fs, minmax, bloom, columns) for t in test[1])
    col = test[1]
    cs = fs.columns.get(col) if columns is None or col in columns else None
    if cs is None:
        return True
    all_null = minmax and cs.nulls is not None and fs.rows is not None and cs.nulls >= fs.rows
    if kind == "null":
        return not (minmax and cs.nulls == 0)
    if all_null:
        return False
    try:
        if kind == "notnull":
            return True
        if kind == "in":
            return any(_equal_possible(cs, v, b, minmax, bloom) for v, b in test[2])
        if kind == "notin":
            return not (minmax and _bounded(cs) and cs.low == cs.high and cs.low in test[2])
        op, value, bloom_value = test[2], test[3], test[4]
        if op == "=":
            return _equal_possible(cs, value, bloom_value, minmax, bloom)
        if not minmax or not _bounded(cs):
            return True
        return {"<>": lambda: not (cs.low == cs.high == value),
                "<": lambda: cs.low < value, "<=": lambda: cs.low <= value,
                ">": lambda: cs.high > value, ">=": lambda: cs.high >= value}[op]()
    except TypeError:                   # statistics of another type than the column's
        return True


def _bounded(cs: ColumnStats) -> bool:
    return cs.low is not None and cs.high is not None and not (
        isinstance(cs.low, float) and math.isnan(cs.low)) and not (
        isinstance(cs.high, float) and math.isnan(cs.high))


def _equal_possible(cs: ColumnStats, value, bloom_value, minmax: bool, bloom: bool) -> bool:
    if minmax and _bounded(cs) and not cs.low <= value <= cs.high:
        return False
    if bloom and cs.bloom is not None and bloom_value is not None:
        return bool(cs.bloom.might_contain(bloom_value))
    return True
