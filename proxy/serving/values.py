"""String, conditional and numeric functions of the serving tier's translation (pure): each
allow-listed sqlglot node -> (DuckDB SQL, Spark type), or NotServable. The functions take
the translator as `self` (proxy/serving/expressions.py's Expressions) and are registered
in its DISPATCH table.

Where DuckDB and Spark differ on some values only, the emitted SQL raises for those values
and the query goes to Spark (as for a zero divisor):
  * upper/lower: Spark maps case with ICU's full mappings ('ß' -> 'SS', 'İ' -> 'i̇'),
    DuckDB with simple ones ('ß' -> 'ẞ'): served for strings of ASCII and of the caseless
    CJK, kana and Hangul blocks only (CASE_SAFE), any other character raises;
  * floor/ceil of a double: a NaN, an infinity or a value beyond bigint fails the cast.
What is refused outright (NotServable) is named at each place: round/bround of a double
(Spark rounds the digits Java prints for it: 2.675 -> 2.68, though its exact value is
2.67499...), ILIKE and LIKE patterns that are not string literals, casts of doubles to
strings (Java's Double.toString text differs from DuckDB's: 1.0E10 vs 10000000000.0).
"""
from __future__ import annotations

from sqlglot import exp

from proxy.serving.sqltypes import (
    DEC, DUCK, INT_ORDER, NotServable, common, duck_type, fits_one_decimal, int_literal, lit,
)
from rewriter.sparktypes import INTEGRAL

# Characters whose upper and lower case are themselves in ICU and in DuckDB, or that both
# map alike (ASCII); a string with any other character is not case-mapped locally
CASE_SAFE = r"^[\x00-\x7F\x{3040}-\x{30FF}\x{4E00}-\x{9FFF}\x{AC00}-\x{D7A3}]*$"
# what Spark implicitly casts to a string in concat / concat_ws, exactly as DuckDB prints it
_TO_STRING = ("boolean", "date") + tuple(INT_ORDER)
_SMALL_INTS = ("tinyint", "smallint", "int")


def _string(self, e: exp.Expression, scope, what: str) -> str:
    sql, t = self.expr(e, scope)
    if t != "string":
        raise NotServable(f"{what} of {t}")
    return sql


def _as_string(self, e: exp.Expression, scope, what: str) -> str:
    """An argument Spark casts to a string (concat): strings, integers, decimals, dates and
    booleans, printed as CAST(x AS STRING) prints them."""
    sql, t = self.expr(e, scope)
    if t == "string":
        return sql
    if t in _TO_STRING or DEC.match(t):
        return f"CAST({sql} AS VARCHAR)"
    raise NotServable(f"{what} of {t}")


def _int_arg(self, e: exp.Expression, scope, what: str) -> str:
    sql, t = self.expr(e, scope)
    if t not in _SMALL_INTS:
        raise NotServable(f"{what} with a {t} argument")
    return f"CAST({sql} AS BIGINT)"


# ---------------------------------------------------------------- strings

def case_map(self, e, scope):
    fn = "upper" if isinstance(e, exp.Upper) else "lower"
    s = _string(self, e.this, scope, fn)
    return (f"(CASE WHEN NOT regexp_full_match({s}, {lit(CASE_SAFE)}) THEN "
            f"error('{fn} of a string outside ASCII: Spark maps its case with ICU') "
            f"ELSE {fn}({s}) END)"), "string"


def length(self, e, scope):
    if e.args.get("binary") or e.args.get("encoding"):
        raise NotServable("length with options")
    s = _string(self, e.this, scope, "length")       # characters (code points), as Spark
    return f"CAST(length({s}) AS INTEGER)", "int"


def substring(self, e: exp.Substring, scope):
    """Spark's substr(s, pos[, len]): 1-based; pos 0 is 1; a negative pos counts from the
    end, and a window reaching before the start keeps only its part inside the string."""
    s = _string(self, e.this, scope, "substring")
    pos = _int_arg(self, e.args["start"], scope, "substring")
    ln = e.args.get("length")
    start = (f"(CASE WHEN {pos} > 0 THEN {pos} - 1 WHEN {pos} < 0 THEN length({s}) + {pos} "
             f"ELSE 0 END)")
    if ln is None:
        return (f"(CASE WHEN {s} IS NULL OR {pos} IS NULL THEN NULL "
                f"ELSE substring({s}, greatest({start}, 0) + 1) END)"), "string"
    n = _int_arg(self, ln, scope, "substring")
    end = f"({start} + {n})"
    return (f"(CASE WHEN {s} IS NULL OR {pos} IS NULL OR {n} IS NULL THEN NULL "
            f"WHEN greatest({start}, 0) >= {end} THEN '' "
            f"ELSE substring({s}, greatest({start}, 0) + 1, {end} - greatest({start}, 0)) END)"
            ), "string"


def concat(self, e: exp.Concat, scope):
    if not e.expressions or e.args.get("coalesce"):
        raise NotServable("concat() of no strings, or skipping NULLs")
    parts = [_as_string(self, a, scope, "concat") for a in e.expressions]
    return "(" + " || ".join(parts) + ")", "string"      # NULL when any part is


def dpipe(self, e: exp.DPipe, scope):
    """a || b: Spark's concat of the two."""
    parts = [_as_string(self, a, scope, "||") for a in (e.this, e.expression)]
    return "(" + " || ".join(parts) + ")", "string"


def concat_ws(self, e: exp.ConcatWs, scope):
    sep, *args = e.expressions
    if not args:
        raise NotServable("concat_ws of no strings")
    parts = [_string(self, sep, scope, "concat_ws")] + [
        _as_string(self, a, scope, "concat_ws") for a in args]
    return f"concat_ws({', '.join(parts)})", "string"    # skips NULLs; a NULL separator: NULL


def trim(self, e: exp.Trim, scope):
    if e.args.get("collation"):
        raise NotServable("TRIM with a collation")
    s = _string(self, e.this, scope, "trim")
    chars = e.args.get("expression")
    # Spark's trim without characters removes spaces only (not tabs or newlines)
    c = "' '" if chars is None else _string(self, chars, scope, "trim")
    fn = {"LEADING": "ltrim", "TRAILING": "rtrim", "BOTH": "trim", None: "trim"}.get(
        (e.args.get("position") or "").upper() or None)
    if fn is None:
        raise NotServable(f"TRIM {e.args.get('position')}")
    return f"{fn}({s}, {c})", "string"


def pad(self, e: exp.Pad, scope):
    """lpad/rpad: the string cut to `len` characters when it is as long; an empty pad only
    cuts; a length of 0 or less is ''."""
    fn = "lpad" if e.args.get("is_left") else "rpad"
    s = _string(self, e.this, scope, fn)
    n = _int_arg(self, e.expression, scope, fn)
    fill = e.args.get("fill_pattern")
    p = "' '" if fill is None else _string(self, fill, scope, fn)
    return (f"(CASE WHEN {p} = '' THEN substring({s}, 1, greatest({n}, 0)) "
            f"ELSE {fn}({s}, CAST({n} AS INTEGER), {p}) END)"), "string"


def replace(self, e: exp.Replace, scope):
    s = _string(self, e.this, scope, "replace")
    search = _string(self, e.expression, scope, "replace")
    rep = e.args.get("replacement")
    r = "''" if rep is None else _string(self, rep, scope, "replace")
    return f"replace({s}, {search}, {r})", "string"       # an empty search: s unchanged


def like_pattern(pattern: str, escape: str) -> str:
    """A Spark LIKE pattern checked as Spark checks it: the escape character may only
    precede '_', '%' or itself, and not end the pattern (else Spark raises)."""
    i = 0
    while i < len(pattern):
        if pattern[i] == escape:
            if i + 1 >= len(pattern) or pattern[i + 1] not in ("_", "%", escape):
                raise NotServable(f"LIKE pattern {pattern!r}: Spark rejects its escape")
            i += 2
        else:
            i += 1
    return pattern


def like(self, e, scope):
    escape = "\\"
    node = e
    if isinstance(e, exp.Escape):
        esc = e.expression
        if not (isinstance(esc, exp.Literal) and esc.is_string and len(esc.this) == 1):
            raise NotServable("LIKE ... ESCAPE other than one character")
        escape, node = esc.this, e.this
    if not isinstance(node, exp.Like):
        raise NotServable(f"{node.key.upper()} ... ESCAPE")
    s = _string(self, node.this, scope, "LIKE")
    pat = node.expression
    if not (isinstance(pat, exp.Literal) and pat.is_string):
        raise NotServable("LIKE with a pattern that is not a string literal")
    p = like_pattern(pat.this, escape)
    neg = "NOT " if node.args.get("negate") else ""
    return f"({s} {neg}LIKE {lit(p)} ESCAPE {lit(escape)})", "boolean"


# ---------------------------------------------------------------- conditionals

def _typed(sql: str, t: str | None, to: str) -> str:
    return "NULL" if t is None else f"CAST({sql} AS {duck_type(to)})"


def if_(self, e: exp.If, scope):
    cond = self.condition(e.this, scope)
    a, at = self._value(e.args["true"], scope)
    fb = e.args.get("false")
    b, bt = self._value(fb, scope) if fb is not None else ("NULL", None)
    t = common([at, bt], "IF")
    return f"(CASE WHEN {cond} THEN {_typed(a, at, t)} ELSE {_typed(b, bt, t)} END)", t


def nvl2(self, e: exp.Nvl2, scope):
    x, _ = self.expr(e.this, scope)
    a, at = self._value(e.args["true"], scope)
    fb = e.args.get("false")
    b, bt = self._value(fb, scope) if fb is not None else ("NULL", None)
    t = common([at, bt], "NVL2")
    return (f"(CASE WHEN {x} IS NOT NULL THEN {_typed(a, at, t)} ELSE {_typed(b, bt, t)} "
            f"END)"), t


def nullif(self, e: exp.Nullif, scope):
    """nullif(a, b): NULL where a = b (compared as Spark compares them), else a, of a's type."""
    a, at = self.expr(e.this, scope)
    seen: list[str] = []
    left, right = self._comparable(e.this, e.expression, scope, seen)
    fits_one_decimal(seen)
    return f"(CASE WHEN {left} = {right} THEN NULL ELSE {a} END)", at


def extreme(self, e, scope):
    """greatest/least: NULLs skipped (NULL only when all are), as Spark's. Not of doubles:
    between -0.0 and 0.0 Spark returns -0.0 from greatest(0.0, -0.0) as from least, where
    DuckDB keeps the first."""
    fn = "greatest" if isinstance(e, exp.Greatest) else "least"
    args = [e.this] + list(e.expressions)
    if len(args) < 2:
        raise NotServable(f"{fn} of one argument")
    parts = [self._value(a, scope) for a in args]
    t = common([p[1] for p in parts], fn)
    if t == "double":
        raise NotServable(f"{fn} of doubles (Spark's choice between -0.0 and 0.0)")
    return f"{fn}({', '.join(_typed(s, st, t) for s, st in parts)})", t


# ---------------------------------------------------------------- numbers

def abs_(self, e: exp.Abs, scope):
    sql, t = self.expr(e.this, scope)
    if not (t in INTEGRAL or t == "double" or DEC.match(t)):
        raise NotServable(f"abs of {t}")
    # abs of the smallest integer overflows in both (Spark with ANSI on raises)
    return f"CAST(abs({sql}) AS {duck_type(t)})", t


def floor_ceil(self, e, scope):
    fn = "floor" if isinstance(e, exp.Floor) else "ceil"
    if e.args.get("decimals") is not None or e.args.get("to") is not None:
        raise NotServable(f"{fn} with a scale")
    sql, t = self.expr(e.this, scope)
    if t in INTEGRAL:
        return f"CAST({sql} AS BIGINT)", "bigint"
    if t == "double":    # NaN, infinities and values beyond bigint fail the cast: Spark
        return f"CAST({fn}({sql}) AS BIGINT)", "bigint"
    d = DEC.match(t)
    if not d:
        raise NotServable(f"{fn} of {t}")
    p, s = int(d.group(1)), int(d.group(2))
    rt = t if s == 0 else f"decimal({min(38, p - s + 1)},0)"
    return f"CAST({fn}({sql}) AS {duck_type(rt)})", rt


def round_(self, e, scope):
    """round (HALF_UP) and bround (HALF_EVEN) of integers and decimals, typed as Spark's
    RoundBase: an integer keeps its type; decimal(p,s) to d >= 0 places is
    decimal(p-s+1+min(s,d), min(s,d)), to d < 0 places decimal(max(p-s+1, 1-d), 0)."""
    if isinstance(e, exp.Round):
        fn, x, d = "round", e.this, e.args.get("decimals")
        if e.args.get("truncate") is not None:
            raise NotServable("round with a mode")
    else:                                   # bround: sqlglot keeps it as a plain call
        if len(e.expressions) not in (1, 2):
            raise NotServable("bround with other than one or two arguments")
        fn, x, d = "round_even", e.expressions[0], (e.expressions[1:] or [None])[0]
    name = "round" if fn == "round" else "bround"
    places = 0
    if d is not None:
        text = int_literal(d)
        if text is None:
            raise NotServable(f"{name} to a scale that is not an integer literal")
        places = int(text)
        if abs(places) > 38:
            raise NotServable(f"{name} to {places} places")
    sql, t = self.expr(x, scope)
    if t == "double":
        raise NotServable(f"{name} of a double (Spark rounds the digits Java prints for it)")
    if t in INTEGRAL:
        if places >= 0:
            return sql, t
        return f"CAST({fn}(CAST({sql} AS HUGEINT), {places}) AS {duck_type(t)})", t
    m = DEC.match(t)
    if not m:
        raise NotServable(f"{name} of {t}")
    p, s = int(m.group(1)), int(m.group(2))
    if places >= 0:
        ns = min(s, places)
        rt = f"decimal({min(38, p - s + 1 + ns)},{ns})"
    else:
        rt = f"decimal({min(38, max(p - s + 1, 1 - places))},0)"
    # DuckDB's round is HALF_UP (away from zero) on decimals, round_even HALF_EVEN; the cast
    # fails where Spark's result type overflows (Spark with ANSI on raises)
    return f"CAST({fn}({sql}, {places}) AS {duck_type(rt)})", rt


# functions sqlglot keeps as plain calls (exp.Anonymous), by lower-case name
def pmod(self, e: exp.Anonymous, scope):
    """pmod(a, n) of integers as Spark's Pmod computes it: r = a % n, and (r + n) % n when
    r is negative; the wider integral type; a zero divisor raises and Spark answers."""
    if len(e.expressions) != 2:
        raise NotServable("pmod with other than two arguments")
    a, n = e.expressions
    mod = self.expr(exp.Mod(this=a.copy(), expression=n.copy()), scope)
    n_sql, _ = self.expr(n, scope)
    sql, t = mod
    return (f"list_transform([{{'r': {sql}, 'n': CAST({n_sql} AS {DUCK[t]})}}], lambda v: "
            f"CASE WHEN v.r < 0 THEN CAST((v.r + v.n) % v.n AS {DUCK[t]}) ELSE v.r END)[1]"), t


ANONYMOUS = {"bround": round_, "pmod": pmod}



DISPATCH = {
    exp.Upper: case_map, exp.Lower: case_map, exp.Length: length,
    exp.Substring: substring, exp.Concat: concat, exp.DPipe: dpipe, exp.ConcatWs: concat_ws,
    exp.Trim: trim, exp.Pad: pad, exp.Replace: replace, exp.Like: like, exp.Escape: like,
    exp.If: if_, exp.Nvl2: nvl2, exp.Nullif: nullif, exp.Greatest: extreme,
    exp.Least: extreme, exp.Abs: abs_, exp.Floor: floor_ceil, exp.Ceil: floor_ceil,
    exp.Round: round_,
}


# ---------------------------------------------------------------- aggregates

def distinct_agg(self, e: exp.AggFunc, scope):
    """count(DISTINCT x[, y, ...]): the distinct rows whose values are all non-NULL (Spark
    and DuckDB alike fold -0.0 into 0.0 and every NaN into one value, alone or in a row);
    sum(DISTINCT x) of integers and decimals; min/max(DISTINCT x) are min/max(x)."""
    d = e.this
    args = list(d.expressions) if isinstance(d, exp.Distinct) else []
    if not args:
        raise NotServable(f"{e.key.upper()}(DISTINCT ...)")
    if isinstance(e, (exp.Min, exp.Max)) and len(args) == 1:
        return self._agg(type(e)(this=args[0]), scope)
    parts = [self.expr(a, scope) for a in args]
    if isinstance(e, exp.Count):
        if len(parts) == 1:
            return f"COUNT(DISTINCT {parts[0][0]})", "bigint"
        every = " AND ".join(f"{s} IS NOT NULL" for s, _ in parts)
        rows = ", ".join(s for s, _ in parts)
        return f"COUNT(DISTINCT CASE WHEN {every} THEN row({rows}) END)", "bigint"
    if isinstance(e, exp.Sum) and len(parts) == 1:
        sql, t = parts[0]
        if t in INTEGRAL:
            return f"CAST(SUM(DISTINCT {sql}) AS BIGINT)", "bigint"
        m = DEC.match(t)
        if m:
            rt = f"decimal({min(38, int(m.group(1)) + 10)},{m.group(2)})"
            return f"CAST(SUM(DISTINCT {sql}) AS {duck_type(rt)})", rt
        raise NotServable(f"sum(DISTINCT ...) of {t}")
    raise NotServable(f"{e.key.upper()}(DISTINCT ...)")


def filtered_agg(self, e: exp.Filter, scope):
    """agg(...) FILTER (WHERE c): the aggregate of the rows where c is TRUE, read as
    agg(CASE WHEN c THEN x END) over each argument (count(*) as count of CASE WHEN c THEN 1):
    the rows left out are NULLs, which every served aggregate skips, in both engines."""
    agg, where = e.this, e.expression
    if not isinstance(agg, (exp.Sum, exp.Count, exp.Min, exp.Max)) \
            or not isinstance(where, exp.Where) or agg.find(exp.Window):
        raise NotServable(f"FILTER of {e.this.key.upper()}")
    cond = where.this

    def only(x: exp.Expression) -> exp.Expression:
        return exp.Case(ifs=[exp.If(this=cond.copy(), true=x.copy())])
    agg = agg.copy()
    arg = agg.this
    if isinstance(agg, exp.Count) and (arg is None or isinstance(arg, exp.Star)):
        agg.set("this", only(exp.Literal.number(1)))
    elif isinstance(arg, exp.Distinct):
        arg.set("expressions", [only(x) for x in arg.expressions])
    else:
        agg.set("this", only(arg))
    return self.expr(agg, scope)


def null_safe_eq(self, e: exp.NullSafeEQ, scope):
    """a <=> b (IS NOT DISTINCT FROM): true when both are NULL, false when one is."""
    seen: list[str] = []
    left, right = self._comparable(e.this, e.expression, scope, seen)
    fits_one_decimal(seen)
    return f"({left} IS NOT DISTINCT FROM {right})", "boolean"


DISPATCH[exp.NullSafeEQ] = null_safe_eq
DISPATCH[exp.Filter] = filtered_agg
