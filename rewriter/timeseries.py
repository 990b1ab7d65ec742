"""timeseries(col, 'granularity') -> Spark SQL, and the granularity lattice used for rollup.

CarbonData lets a query or a datamap definition group by ``timeseries(col, 'gran')``; Spark
has no such function, so every call is translated before anything reaches Spark.

Semantics (contract.md): a bucket is the START of the interval containing ``col``, as a
TIMESTAMP, computed in the session time zone -- exactly Spark's ``date_trunc``:

    year, month, week, day, hour, minute, second  ->  date_trunc('<UNIT>', col)
    five/ten/fifteen/thirty_minute                 ->  date_trunc('MINUTE', col)
                                                        - make_dt_interval(0, 0, minute(col) % n, 0)

The n-minute buckets floor the minute-of-hour in LOCAL time (as CarbonData's TimeSeriesUDF
does), not the epoch: ``floor(unix_timestamp(col)/(n*60))*(n*60)`` aligns buckets to UTC,
which is wrong in zones whose offset is not a multiple of n minutes (Asia/Kathmandu is
+05:45, so UTC-aligned thirty-minute buckets start at local :15/:45). The subtraction keeps
the result a TIMESTAMP and is plain int arithmetic, so it is valid with ANSI mode on.

Weeks start on Monday (date_trunc('WEEK')), unlike CarbonData's Sunday default.

DATE columns allow year, month, week, day only; the result type is TIMESTAMP as well
(midnight of the bucket's first day in the session time zone), i.e. exactly what Spark's
``date_trunc(unit, date_col)`` returns. One result type for both column types means the
translation does not depend on knowing the column's type (translate_sql works without
schemas), and a datamap bucket column has the same type whichever column it came from.

Granularity lattice: ``is_rollup(fine, coarse)`` is True when every coarse bucket is a union
of fine buckets (divisible AND aligned). Week buckets straddle month and year boundaries,
and ten-minute buckets straddle fifteen-minute ones, so those pairs are refused -- the two
rollups CarbonData gets wrong by comparing bucket lengths only.

Errors (unknown granularity, wrong argument count, granularity not allowed for the column
type, non-temporal column) raise ValueError with a message naming the call; the caller maps
it to SQLSTATE 42000.
"""
from __future__ import annotations

import re
from typing import Mapping

import sqlglot
from sqlglot import exp

from rewriter.normalize import spark_output_name

# Ordered FINE -> COARSE (by bucket length; note that length order is not the rollup order,
# see is_rollup).
GRANULARITIES: tuple[str, ...] = (
    "second", "minute", "five_minute", "ten_minute", "fifteen_minute", "thirty_minute",
    "hour", "day", "week", "month", "year",
)

DATE_GRANULARITIES: frozenset[str] = frozenset({"day", "week", "month", "year"})

# n-minute granularities -> n
_N_MINUTE: dict[str, int] = {
    "five_minute": 5, "ten_minute": 10, "fifteen_minute": 15, "thirty_minute": 30,
}

# granularity -> Spark date_trunc unit, for the ones date_trunc does directly
_TRUNC_UNIT: dict[str, str] = {
    "second": "SECOND", "minute": "MINUTE", "hour": "HOUR", "day": "DAY",
    "week": "WEEK", "month": "MONTH", "year": "YEAR",
}

# Spark date_trunc format strings (case-insensitive) -> granularity. QUARTER, MILLISECOND
# and MICROSECOND are valid for date_trunc but are not timeseries granularities.
_UNIT_TO_GRAN: dict[str, str] = {
    "YEAR": "year", "YYYY": "year", "YY": "year",
    "MONTH": "month", "MON": "month", "MM": "month",
    "WEEK": "week",
    "DAY": "day", "DD": "day",
    "HOUR": "hour", "MINUTE": "minute", "SECOND": "second",
}

_TIMESTAMP_TYPES = frozenset({"timestamp", "timestamp_ltz", "timestamp_ntz"})
_DATE_TYPES = frozenset({"date"})

# fine -> set of coarser granularities whose buckets are unions of fine buckets.
_ROLLUP: dict[str, frozenset[str]] = {}


def _build_rollup() -> None:
    above_hour = {"hour", "day", "week", "month", "year"}
    _ROLLUP["year"] = frozenset()
    _ROLLUP["month"] = frozenset({"year"})
    _ROLLUP["week"] = frozenset()                       # weeks straddle months and years
    _ROLLUP["day"] = frozenset({"week", "month", "year"})
    _ROLLUP["hour"] = frozenset({"day", "week", "month", "year"})
    for g, n in _N_MINUTE.items():
        # local-time n-minute buckets nest in m-minute ones iff n divides m; every n divides 60
        _ROLLUP[g] = frozenset({h for h, m in _N_MINUTE.items() if m > n and m % n == 0}
                               | above_hour)
    _ROLLUP["minute"] = frozenset(set(_N_MINUTE) | above_hour)
    _ROLLUP["second"] = frozenset(set(GRANULARITIES) - {"second"})


_build_rollup()


def normalize_granularity(name: str) -> str:
    """'HOUR' / 'Hour' / ' hour ' -> 'hour'; unknown names raise ValueError."""
    if not isinstance(name, str):
        raise ValueError(f"timeseries granularity must be a string, got {name!r}")
    g = name.strip().lower()
    if g not in _ROLLUP:
        raise ValueError(
            f"unknown timeseries granularity '{name}'; expected one of {', '.join(GRANULARITIES)}")
    return g


def is_rollup(fine: str, coarse: str) -> bool:
    """True when every `coarse` bucket is a union of `fine` buckets, so a coarse bucket can be
    computed from a stored fine bucket (rollup_expr). Reflexive: is_rollup(g, g) is True."""
    f, c = normalize_granularity(fine), normalize_granularity(coarse)
    return f == c or c in _ROLLUP[f]


def _kind_of(column_type: str | None) -> str | None:
    """'timestamp' | 'date' | None (unknown); raises for non-temporal types."""
    if column_type is None:
        return None
    t = column_type.strip().lower()
    if t in _TIMESTAMP_TYPES:
        return "timestamp"
    if t in _DATE_TYPES:
        return "date"
    raise ValueError(f"timeseries() needs a timestamp or date column, not {column_type}")


def check_granularity(gran: str, column_type: str | None, what: str = "timeseries()") -> str:
    """Normalise `gran` and check it is allowed for a column of `column_type` (None: unknown,
    no type check). Returns the normalised granularity."""
    g = normalize_granularity(gran)
    try:
        kind = _kind_of(column_type)
    except ValueError:
        raise ValueError(f"{what} needs a timestamp or date column, not {column_type}") from None
    if kind == "date" and g not in DATE_GRANULARITIES:
        raise ValueError(
            f"{what}: granularity '{g}' is not allowed for a DATE column; "
            f"use one of day, week, month, year")
    return g


def _is_timeseries_call(node: exp.Expression) -> bool:
    return isinstance(node, exp.Anonymous) and str(node.this).lower() == "timeseries"


def parse_call(call: exp.Expression) -> tuple[exp.Expression, str]:
    """timeseries(col, 'gran') -> (col, normalised gran). Raises ValueError when malformed."""
    if not _is_timeseries_call(call):
        raise ValueError(f"not a timeseries() call: {call.sql(dialect='spark')}")
    args = call.expressions
    text = call.sql(dialect="spark")
    if len(args) != 2:
        raise ValueError(
            f"timeseries() takes 2 arguments (column, 'granularity'), got {len(args)} in {text}")
    col, gran = args
    if not (isinstance(gran, exp.Literal) and gran.is_string):
        raise ValueError(f"timeseries() granularity must be a string literal in {text}")
    try:
        g = normalize_granularity(gran.this)
    except ValueError as e:
        raise ValueError(f"{e} in {text}") from None
    return col, g


def bucket_expr(column: exp.Expression, gran: str) -> exp.Expression:
    """The Spark expression for the `gran` bucket start of `column` (a fresh tree; `column` is
    copied). No type check: see translate for that."""
    g = normalize_granularity(gran)
    if g in _TRUNC_UNIT:
        return exp.TimestampTrunc(this=column.copy(), unit=exp.Var(this=_TRUNC_UNIT[g]))
    n = _N_MINUTE[g]
    minute_mod = exp.Mod(this=exp.Minute(this=column.copy()), expression=exp.Literal.number(n))
    shift = exp.Anonymous(this="make_dt_interval", expressions=[
        exp.Literal.number(0), exp.Literal.number(0), exp.Paren(this=minute_mod),
        exp.Literal.number(0)])
    trunc = exp.TimestampTrunc(this=column.copy(), unit=exp.Var(this="MINUTE"))
    return exp.Paren(this=exp.Sub(this=trunc, expression=shift))


def translate(call: exp.Expression, column_type: str | None) -> exp.Expression:
    """timeseries(col, 'gran') -> Spark expression of TIMESTAMP type (the bucket start in the
    session time zone). `column_type` is the Spark type of `col` ("timestamp", "date", ...)
    or None when unknown (then only the granularity is checked)."""
    col, g = parse_call(call)
    check_granularity(g, column_type, what=f"timeseries({col.sql(dialect='spark')}, '{g}')")
    return bucket_expr(col, g)


def _unwrap(e: exp.Expression) -> exp.Expression:
    while isinstance(e, (exp.Paren, exp.Alias)):
        e = e.this
    return e


def bucket_of(expr: exp.Expression) -> tuple[exp.Expression, str] | None:
    """Recognise a time bucket: timeseries(col, 'gran') (any letter case), Spark's
    date_trunc('<unit>', col) for the units that are granularities (YEAR/YYYY/YY, MONTH/MON/MM,
    WEEK, DAY/DD, HOUR, MINUTE, SECOND), and this module's n-minute form. Returns
    (column expression, granularity) or None. A malformed timeseries() call raises ValueError.
    """
    e = _unwrap(expr)
    if _is_timeseries_call(e):
        return parse_call(e)
    if isinstance(e, exp.TimestampTrunc):
        unit = e.args.get("unit")
        name = unit.name if isinstance(unit, (exp.Var, exp.Literal)) else None
        g = _UNIT_TO_GRAN.get(name.upper()) if name else None
        return (e.this, g) if g else None
    if isinstance(e, exp.Sub):
        return _n_minute_of(e)
    return None


def _n_minute_of(e: exp.Sub) -> tuple[exp.Expression, str] | None:
    trunc, shift = _unwrap(e.this), _unwrap(e.expression)
    if not (isinstance(trunc, exp.TimestampTrunc) and trunc.args.get("unit") is not None
            and trunc.args["unit"].name.upper() == "MINUTE"):
        return None
    if not (isinstance(shift, exp.Anonymous) and str(shift.this).lower() == "make_dt_interval"
            and len(shift.expressions) == 4):
        return None
    d, h, m, s = (_unwrap(a) for a in shift.expressions)
    if not all(isinstance(z, exp.Literal) and not z.is_string and z.this in ("0", 0)
               for z in (d, h, s)):
        return None
    if not (isinstance(m, exp.Mod) and isinstance(_unwrap(m.this), exp.Minute)
            and isinstance(m.expression, exp.Literal) and not m.expression.is_string):
        return None
    n = int(m.expression.this)
    gran = next((g for g, k in _N_MINUTE.items() if k == n), None)
    col = _unwrap(m.this).this
    if gran is None or col != trunc.this:
        return None
    return trunc.this, gran


def rollup_expr(fine_bucket_col: exp.Expression, fine: str, coarse: str,
                column_type: str | None) -> exp.Expression:
    """The `coarse` bucket computed from a stored `fine` bucket column.

    Correct because is_rollup(fine, coarse) means every coarse bucket is a union of fine
    buckets: a fine bucket's start lies in the same coarse bucket as every value in it, so
    bucketing the start at `coarse` gives the value's coarse bucket. `column_type` is the type
    of the ORIGINAL column (the stored bucket is always TIMESTAMP); it is only validated.
    Raises ValueError when the pair does not roll up or the granularity is invalid."""
    f = check_granularity(fine, column_type)
    c = check_granularity(coarse, column_type)
    if not is_rollup(f, c):
        raise ValueError(f"timeseries granularity '{f}' does not roll up to '{c}'")
    if f == c:
        return fine_bucket_col.copy()
    return bucket_expr(fine_bucket_col, c)


# --- filters on the raw time column ----------------------------------------------------------

_TS_LITERAL = re.compile(
    r"^\s*(\d{4})-(\d{1,2})-(\d{1,2})(?:[ T](\d{1,2}):(\d{1,2})(?::(\d{1,2})(?:\.(\d{1,9}))?)?)?\s*$")


def is_aligned(value: str, gran: str) -> bool:
    """True when the timestamp/date literal text `value` (as Spark reads it, in the session
    time zone) is the start of a `gran` bucket. Unparseable text (zones, offsets,
    out-of-range fields) is never aligned.

    Why it matters: for an aligned X, `col >= X` <=> `bucket(col) >= X` and
    `col < X` <=> `bucket(col) < X` (the bucket is monotone and bucket(X) = X), so such a
    filter on the raw column can be evaluated on a stored bucket column. `>` and `<=` are
    never equivalent (X + 1 second is in X's bucket)."""
    import datetime as _dt
    g = normalize_granularity(gran)
    m = _TS_LITERAL.match(value)
    if not m:
        return False
    y, mo, d, h, mi, sec, frac = m.groups()
    try:
        t = _dt.datetime(int(y), int(mo), int(d), int(h or 0), int(mi or 0), int(sec or 0))
    except ValueError:
        return False
    if frac and int(frac) != 0:
        return False
    if g == "second":
        return True
    if t.second:
        return False
    if g == "minute":
        return True
    if g in _N_MINUTE:
        return t.minute % _N_MINUTE[g] == 0
    if t.minute:
        return False
    if g == "hour":
        return True
    if t.hour:
        return False
    if g == "day":
        return True
    if g == "week":
        return t.weekday() == 0
    if g == "month":
        return t.day == 1
    return t.day == 1 and t.month == 1


# --- whole statements -------------------------------------------------------------------

_HAS_TIMESERIES = re.compile(r"timeseries\s*\(", re.IGNORECASE)


def _column_type(col: exp.Expression, schemas: Mapping | None, current_db: str) -> str | None:
    """Best-effort type of `col` from the FROM clause of its enclosing SELECT; None if unknown
    (derived tables, CTEs, ambiguous names, expressions)."""
    if not schemas or not isinstance(col, exp.Column):
        return None
    select = col.find_ancestor(exp.Select)
    if select is None:
        return None
    tables: list[tuple[str, Mapping[str, str]]] = []   # (alias, columns)
    sources = []
    if select.args.get("from_") is not None:
        sources.append(select.args["from_"].this)
    sources += [j.this for j in select.args.get("joins") or []]
    for src in sources:
        if not isinstance(src, exp.Table):
            continue
        db = (src.db or current_db).lower()
        cols = schemas.get(db, {}).get(src.name.lower())
        if cols is not None:
            tables.append(((src.alias_or_name).lower(), cols))
    name = col.name.lower()
    if col.table:
        hits = [c for a, c in tables if a == col.table.lower()]
    else:
        hits = [c for _, c in tables if name in c]
    if len(hits) != 1 or name not in hits[0]:
        return None
    return hits[0][name]


def _keep_output_names(tree: exp.Expression) -> None:
    """Alias every unaliased SELECT item that contains timeseries() with the name Spark would
    give it if timeseries were a function (`timeseries(ts, hour)`), so a column's name does
    not depend on whether a datamap answered the query (the rewriter names it the same way).
    """
    for select in tree.find_all(exp.Select):
        for item in select.expressions:
            if isinstance(item, exp.Alias) or not any(
                    _is_timeseries_call(n) for n in item.find_all(exp.Anonymous)):
                continue
            name = spark_output_name(item)
            if name:
                item.replace(exp.alias_(item.copy(), exp.to_identifier(name, quoted=True)))


def translate_tree(tree: exp.Expression, schemas: Mapping | None = None,
                   current_db: str = "default") -> exp.Expression:
    """Replace every timeseries() call in `tree` (in place) and return the tree."""
    _keep_output_names(tree)
    calls = [n for n in tree.find_all(exp.Anonymous) if _is_timeseries_call(n)]
    # innermost first, so a call nested in another call's argument is translated before it
    for call in reversed(calls):
        col, _ = parse_call(call)
        call.replace(translate(call, _column_type(col, schemas, current_db)))
    return tree


def translate_sql(sql: str, schemas: Mapping | None = None, current_db: str = "default") -> str:
    """Any statement: replace all timeseries() calls with Spark SQL. Text without a
    timeseries() call is returned unchanged (same string). With `schemas`, columns are typed
    from their FROM clause so DATE-only rules are enforced; unknown types skip that check."""
    if not _HAS_TIMESERIES.search(sql):
        return sql
    try:
        tree = sqlglot.parse_one(sql, read="spark")
    except sqlglot.errors.ParseError as e:
        raise ValueError(f"cannot parse statement with timeseries(): {e}") from None
    if not any(_is_timeseries_call(n) for n in tree.find_all(exp.Anonymous)):
        return sql
    return translate_tree(tree, schemas, current_db).sql(dialect="spark")
