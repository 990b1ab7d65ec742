"""Expressions of the serving tier's translation (pure): each allow-listed sqlglot node
-> (DuckDB SQL, Spark type), or NotServable. `Expressions` is the half of
translate._Translator that reads expressions; a scope resolves column names."""
from __future__ import annotations

import re
from decimal import Decimal
from typing import Callable

from sqlglot import exp

import proxy.serving.dates as dates
from proxy.serving.averages import avg
import proxy.serving.formats as formats
import proxy.serving.moments as moments
import proxy.serving.windows as windows
from proxy.serving.sqltypes import (
    BIGINT_MAX, DEC, DUCK, INT_MAX, INT_ORDER, NotServable, common, date_literal, dec_operand,
    decimal_div_type, duck_type, fits_one_decimal, int_literal, is_num, lit, short,
    spark_type,
)
from proxy.serving.values import ANONYMOUS as VALUE_ANONYMOUS, DISPATCH as VALUE_FUNCTIONS, distinct_agg
from rewriter.sparktypes import INTEGRAL, norm


def unlisted(e: exp.Expression) -> str:
    """Why an expression outside the allow-list is not served: named once (its SQL begins
    with its name more often than not: "ROLLUP (a, b)", not "ROLLUP (ROLLUP (a, b))")."""
    text, name = short(e), e.key.upper()
    shown = text if text.upper().startswith(name) else f"{name} ({text})"
    return f"{shown} is outside what the local engine computes"


class Scope:
    """What a column name means where an expression is read: translate._Scope."""

    def column(self, col: exp.Column) -> tuple[str, str]:
        raise NotImplementedError


class Expressions:
    zone = None              # the session's timestamps.Zone, None when not served
    zone_problem: str | None = None
    # a datetime's text printed by a pattern injective at a unit -> (the datetime truncated
    # to it, the text printed from that): formats._printed, read by a GROUP BY (translate.py)
    grains: dict[str, tuple[str, str]]

    def condition(self, e: exp.Expression, scope: "Scope") -> str:
        sql, t = self.expr(e, scope)
        if t != "boolean":
            raise NotServable("a condition that is not boolean")
        return sql

    def expr(self, e: exp.Expression, scope: "Scope") -> tuple[str, str]:
        method = DISPATCH.get(type(e))
        if method is None:
            raise NotServable(unlisted(e))
        return method(self, e, scope)

    def _column(self, e: exp.Column, scope):
        if isinstance(e.this, exp.Star):
            raise NotServable("*")
        return scope.column(e)

    def _paren(self, e, scope):
        sql, t = self.expr(e.this, scope)
        return f"({sql})", t

    def _literal(self, e: exp.Literal, scope):
        if e.is_string:
            return lit(e.this), "string"
        text = e.this
        if re.fullmatch(r"\d+", text):
            v = int(text)
            if v <= INT_MAX:
                return text, "int"
            if v <= BIGINT_MAX:
                return text, "bigint"
            raise NotServable(f"integer literal {text}")
        m = re.fullmatch(r"(\d*)\.(\d+)|(\d+)\.", text)
        if m:
            whole, frac = (m.group(1) or "", m.group(2) or "") if m.group(3) is None else (m.group(3), "")
            digits = (whole.lstrip("0") + frac) or "0"
            p, s = max(len(digits), len(frac), 1), len(frac)
            p = max(p, s)
            if p > 38:
                raise NotServable(f"decimal literal {text}")
            return f"CAST({lit(text)} AS DECIMAL({p},{s}))", f"decimal({p},{s})"
        raise NotServable(f"literal {text}")

    def _boolean(self, e, scope):
        return ("TRUE" if e.this else "FALSE"), "boolean"

    def _neg(self, e, scope):
        if int_literal(e) is not None:
            # Spark reads `-2147483648` as one literal (an int), not minus a bigint
            text = int_literal(e)
            v = int(text)
            if v < -BIGINT_MAX - 1:
                raise NotServable(f"integer literal {text}")
            return f"CAST({text} AS {'INTEGER' if v >= -INT_MAX - 1 else 'BIGINT'})", \
                ("int" if v >= -INT_MAX - 1 else "bigint")
        sql, t = self.expr(e.this, scope)
        if not (t in INTEGRAL or DEC.match(t) or t == "double"):
            raise NotServable("minus of a non-number")
        if DEC.match(t) and int(DEC.match(t).group(1)) > 34:
            # Spark negates a wide decimal through Scala's BigDecimal, which rounds it to 34
            # digits (-999...9.9999999999 of decimal(38,10) comes back as -1E27)
            raise NotServable(f"unary minus of a {t}")
        return f"CAST(-({sql}) AS {duck_type(t)})", t

    def _arith(self, e: exp.Binary, scope):
        if isinstance(e.this, exp.Interval) or isinstance(e.expression, exp.Interval):
            return dates.interval(self, e, scope)
        if dates.is_make_dt_interval(e.expression):
            return dates.plus_minutes(self, e, scope)
        l_sql, lt = self.expr(e.this, scope)
        r_sql, rt = self.expr(e.expression, scope)
        op = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*"}[type(e)]
        if not (is_num(lt) and is_num(rt)):
            raise NotServable(f"{op} of {lt} and {rt}")
        if lt == "double" or rt == "double":
            if lt != rt and (DEC.match(lt) or DEC.match(rt)):
                raise NotServable(f"{op} of a decimal and a double")
            return f"(CAST({l_sql} AS DOUBLE) {op} CAST({r_sql} AS DOUBLE))", "double"
        if lt in INTEGRAL and rt in INTEGRAL:
            t = max(lt, rt, key=INT_ORDER.index)
            # DuckDB fails on overflow where Spark fails (ANSI) or wraps: both go to Spark
            return f"CAST(CAST({l_sql} AS {DUCK[t]}) {op} CAST({r_sql} AS {DUCK[t]}) AS {DUCK[t]})", t
        (p1, s1), (p2, s2) = dec_operand(e.this, lt), dec_operand(e.expression, rt)
        if op == "*":
            p, s = p1 + p2 + 1, s1 + s2
        else:
            s = max(s1, s2)
            p = max(p1 - s1, p2 - s2) + s + 1
        if p > 38:
            raise NotServable(f"decimal {op} that loses precision in Spark")
        t = f"decimal({p},{s})"
        # DuckDB multiplies two decimals of up to 18 digits in 64 bits and fails on a
        # product Spark's decimal(p1+p2+1) holds: multiply at 38 digits, then narrow
        w1, w2 = (38, 38) if op == "*" else (p1, p2)
        return (f"CAST(CAST({l_sql} AS DECIMAL({w1},{s1})) {op} CAST({r_sql} AS "
                f"DECIMAL({w2},{s2})) AS DECIMAL({p},{s}))"), t

    def _div(self, e: exp.Div, scope):
        l_sql, lt = self.expr(e.this, scope)
        r_sql, rt = self.expr(e.expression, scope)
        if not (is_num(lt) and is_num(rt)):
            raise NotServable(f"/ of {lt} and {rt}")
        if DEC.match(lt) or DEC.match(rt):
            if lt == "double" or rt == "double":
                raise NotServable("/ of a decimal and a double")
            (p1, s1), (p2, s2) = dec_operand(e.this, lt), dec_operand(e.expression, rt)
            p, s = decimal_div_type(p1, s1, p2, s2)
            # exact, HALF_UP, by Spark's rule (serving/engine.py registers spark_decimal_div);
            # a zero divisor or an overflow raises, and Spark answers
            return (f"CAST(spark_decimal_div(CAST({l_sql} AS VARCHAR), CAST({r_sql} AS VARCHAR), "
                    f"{p}, {s}) AS DECIMAL({p},{s}))"), f"decimal({p},{s})"
        # Spark divides integers and doubles as doubles; a zero divisor is NULL or an error
        # in Spark, inf in DuckDB: raise, and Spark answers
        # (NULL on either side is NULL first, as Spark evaluates it)
        left, right = f"CAST({l_sql} AS DOUBLE)", f"CAST({r_sql} AS DOUBLE)"
        return (f"(CASE WHEN {left} IS NULL OR {right} IS NULL THEN CAST(NULL AS DOUBLE) "
                f"WHEN {right} = 0 THEN error('division by zero') "
                f"ELSE {left} / {right} END)"), "double"

    def _mod(self, e: exp.Mod, scope):
        """`a % b` of integers: the wider integral type, the sign of the dividend (Java's
        remainder, and DuckDB's); a zero divisor raises (Spark fails or returns NULL by its
        ANSI setting), and Spark answers."""
        l_sql, lt = self.expr(e.this, scope)
        r_sql, rt = self.expr(e.expression, scope)
        if not (lt in INTEGRAL and rt in INTEGRAL):
            raise NotServable(f"% of {lt} and {rt}")
        t = max(lt, rt, key=INT_ORDER.index)
        left, right = f"CAST({l_sql} AS {DUCK[t]})", f"CAST({r_sql} AS {DUCK[t]})"
        divisor = int_literal(e.expression)
        if divisor is not None and int(divisor) != 0:
            # a nonzero literal divisor raises nothing, and NULL % n is NULL in both: the
            # dividend written once (a guard would copy it into every branch, and with it
            # whatever it nests: the Hive quarter grain's month arithmetic)
            return f"CAST({left} % {right} AS {DUCK[t]})", t
        return (f"(CASE WHEN {left} IS NULL OR {right} IS NULL THEN CAST(NULL AS {DUCK[t]}) "
                f"WHEN {right} = 0 THEN error('remainder by zero') "
                f"ELSE CAST({left} % {right} AS {DUCK[t]}) END)"), t

    def _compare(self, e: exp.Binary, scope):
        op = {exp.EQ: "=", exp.NEQ: "<>", exp.GT: ">", exp.GTE: ">=", exp.LT: "<",
              exp.LTE: "<="}[type(e)]
        seen: list[str] = []
        l_sql, r_sql = self._comparable(e.this, e.expression, scope, seen)
        fits_one_decimal(seen)
        return f"({l_sql} {op} {r_sql})", "boolean"

    def _comparable(self, a: exp.Expression, b: exp.Expression, scope,
                    seen: list[str]) -> tuple[str, str]:
        a_sql, at = self.expr(a, scope)
        b_sql, bt = self.expr(b, scope)
        seen += [at, bt]
        if at == "date" and bt == "string":
            b_sql = date_literal(b)
        elif at == "string" and bt == "date":
            a_sql = date_literal(a)
        elif at == "timestamp" and bt in ("string", "date"):
            b_sql = dates.timestamp_operand(self, b, b_sql, bt)
        elif bt == "timestamp" and at in ("string", "date"):
            a_sql = dates.timestamp_operand(self, a, a_sql, at)
        elif is_num(at) and is_num(bt):
            if ("double" in (at, bt)) and (DEC.match(at) or DEC.match(bt)):
                # Spark casts the decimal to a double: served for a literal of up to 15
                # digits, whose double both engines round alike (one correctly rounded value)
                if at == "double":
                    b_sql = _double_literal(b)
                else:
                    a_sql = _double_literal(a)
        elif at != bt:
            raise NotServable(f"comparison of {at} and {bt}")
        return a_sql, b_sql

    def _logic(self, e, scope):
        op = "AND" if isinstance(e, exp.And) else "OR"
        return f"({self.condition(e.this, scope)} {op} {self.condition(e.expression, scope)})", "boolean"

    def _not(self, e, scope):
        return f"(NOT {self.condition(e.this, scope)})", "boolean"

    def _is(self, e: exp.Is, scope):
        if not isinstance(e.expression, exp.Null):
            raise NotServable("IS other than IS NULL")
        sql, _ = self.expr(e.this, scope)
        return f"({sql} IS NULL)", "boolean"

    def _in(self, e: exp.In, scope):
        if e.args.get("query") or e.args.get("unnest") or e.args.get("field"):
            raise NotServable("IN (subquery)")
        items, seen = [], []
        for item in e.expressions:
            if not isinstance(item, (exp.Literal, exp.Neg, exp.Boolean)):
                raise NotServable("IN with other than literals")
            items.append(self._comparable(e.this, item, scope, seen))
        if not items:
            raise NotServable("empty IN")
        fits_one_decimal(seen)
        return f"({items[0][0]} IN ({', '.join(i[1] for i in items)}))", "boolean"

    def _between(self, e: exp.Between, scope):
        seen: list[str] = []
        a, low = self._comparable(e.this, e.args["low"], scope, seen)
        _, high = self._comparable(e.this, e.args["high"], scope, seen)
        fits_one_decimal(seen)
        return f"({a} BETWEEN {low} AND {high})", "boolean"

    def _cast(self, e: exp.Cast, scope):
        sql, src = self.expr(e.this, scope)
        to = e.to
        if to.is_type(exp.DataType.Type.DECIMAL):
            params = [int(p.this.this if isinstance(p, exp.DataTypeParam) else p.this)
                      for p in to.expressions]
            p, s = (params + [10, 0][len(params):])[:2] if params else (10, 0)
            dst = f"decimal({p},{s})"
        else:
            dst = norm(to.sql("spark"))
        dst = spark_type(dst)
        if src == dst:
            return sql, dst
        if src == "string" and dst in ("date", "timestamp"):
            if not (isinstance(e.this, exp.Literal) and e.this.is_string):
                return formats.cast(self, sql, src, dst), dst
            return (date_literal(e.this) if dst == "date"
                    else dates.timestamp_operand(self, e.this, sql, "string")), dst
        if (src, dst) in (("date", "timestamp"), ("timestamp", "date")):
            return dates.cast_date_time(self, sql, src, dst), dst
        served = formats.cast(self, sql, src, dst)
        if served is not None:
            return served, dst
        ok = ((src in INTEGRAL or DEC.match(src)) and (dst in INTEGRAL or DEC.match(dst))) \
            or (src in INTEGRAL and dst == "double") \
            or (dst == "string" and (src in INTEGRAL or DEC.match(src)
                                     or src in ("date", "boolean")))
        if not ok:
            raise NotServable(f"CAST from {src} to {dst}")
        if DEC.match(src) and dst in INTEGRAL:
            # Spark truncates a decimal towards zero (2.5 -> 2); DuckDB's cast rounds (-> 3)
            sql = f"trunc({sql})"
        # narrowing that overflows fails in DuckDB (Spark: error or NULL): Spark answers
        return f"CAST({sql} AS {duck_type(dst)})", dst

    def _agg(self, e: exp.AggFunc, scope):
        if e.args.get("distinct") or isinstance(e.this, exp.Distinct):
            return distinct_agg(self, e, scope)
        if isinstance(e, exp.Count):
            arg = e.this
            if arg is None or isinstance(arg, exp.Star):
                return "COUNT(*)", "bigint"
            sql, _ = self.expr(arg, scope)
            return f"COUNT({sql})", "bigint"
        sql, t = self.expr(e.this, scope)
        if isinstance(e, (exp.Min, exp.Max)):
            if e.expressions:
                raise NotServable("min/max with more than one argument")
            return f"{e.key.upper()}({sql})", t
        # SUM: Spark's result type; DuckDB sums wider (HUGEINT, DECIMAL(38,s)), so the cast
        # fails exactly where Spark's sum overflows
        if t in INTEGRAL:
            return f"CAST(SUM({sql}) AS BIGINT)", "bigint"
        if t == "double":
            return f"SUM({sql})", "double"
        d = DEC.match(t)
        if d:
            p, s = int(d.group(1)), int(d.group(2))
            rt = f"decimal({min(38, p + 10)},{s})"
            return f"CAST(SUM({sql}) AS {duck_type(rt)})", rt
        raise NotServable(f"sum of {t}")

    def _case(self, e: exp.Case, scope):
        rolled = moments.moment(self, e, scope)     # a variance from stored moments
        if rolled is not None:
            return rolled
        whens, types = [], []
        for w in e.args.get("ifs") or []:
            # CASE x WHEN v: Spark's parser makes it CASE WHEN x = v (a NULL x matches none)
            cond = self.condition(w.this if e.this is None else
                                  exp.EQ(this=e.this.copy(), expression=w.this.copy()), scope)
            val, t = self._value(w.args["true"], scope)
            whens.append((cond, val, t))
            types.append(t)
        default = e.args.get("default")
        tail = ""
        if default is not None:
            tail, t = self._value(default, scope)
            types.append(t)
        t = common(types, "CASE")
        typed = " ".join(f"WHEN {c} THEN CAST({v} AS {duck_type(t)})" for c, v, _ in whens)
        if default is not None:
            tail = f" ELSE CAST({tail} AS {duck_type(t)})"
        return f"(CASE {typed}{tail} END)", t

    def _value(self, e, scope):
        if isinstance(e, exp.Null):
            return "NULL", None
        return self.expr(e, scope)

    def _coalesce(self, e: exp.Coalesce, scope):
        args = [e.this] + list(e.expressions)
        parts = [self.expr(a, scope) for a in args]
        t = common([p[1] for p in parts], "COALESCE")
        return f"COALESCE({', '.join(f'CAST({p[0]} AS {duck_type(t)})' for p in parts)})", t


def _double_literal(e: exp.Expression) -> str:
    """A decimal literal compared with a double, as the double Spark casts it to."""
    neg = isinstance(e, exp.Neg)
    lit_ = e.this if neg else e
    if not (isinstance(lit_, exp.Literal) and not lit_.is_string
            and re.fullmatch(r"[0-9]*\.?[0-9]*", lit_.this)
            and len(lit_.this.replace(".", "").lstrip("0")) <= 15):
        raise NotServable("comparison of a decimal and a double")
    value = float(Decimal(lit_.this))
    value = -value if neg and value else value      # a decimal has no -0
    return f"CAST({repr(value)!r} AS DOUBLE)"


_T = Expressions
DISPATCH: dict[type, Callable] = {
    exp.Column: _T._column, exp.Paren: _T._paren, exp.Literal: _T._literal,
    exp.Boolean: _T._boolean, exp.Neg: _T._neg,
    exp.Add: _T._arith, exp.Sub: _T._arith, exp.Mul: _T._arith, exp.Div: _T._div, exp.Mod: _T._mod,
    exp.EQ: _T._compare, exp.NEQ: _T._compare, exp.GT: _T._compare, exp.GTE: _T._compare,
    exp.LT: _T._compare, exp.LTE: _T._compare,
    exp.And: _T._logic, exp.Or: _T._logic, exp.Not: _T._not, exp.Is: _T._is, exp.In: _T._in,
    exp.Between: _T._between, exp.Cast: _T._cast, exp.TryCast: _T._cast,
    exp.Sum: _T._agg, exp.Count: _T._agg, exp.Min: _T._agg, exp.Max: _T._agg, exp.Avg: avg,
    exp.Case: _T._case, exp.Coalesce: _T._coalesce,
    exp.Window: windows.window,     # window functions in a SELECT's outputs
    **dates.DISPATCH,       # date and timestamp functions, interval arithmetic
    **formats.DISPATCH,     # datetime patterns, string <-> date/timestamp
}
DISPATCH.update(VALUE_FUNCTIONS)     # strings, conditionals, numbers: values.py

# Functions sqlglot leaves as plain calls (exp.Anonymous), by lower-case name: one table
# for every module of the tier, so none of them shadows another's.
ANONYMOUS: dict[str, Callable] = {**dates.ANONYMOUS, **formats.ANONYMOUS, **VALUE_ANONYMOUS}


def _anonymous(self, e: exp.Anonymous, scope):
    handler = ANONYMOUS.get(e.name.lower())
    if handler is None:
        raise NotServable(f"function {e.name.lower()}")
    return handler(self, e, scope)


DISPATCH[exp.Anonymous] = _anonymous
