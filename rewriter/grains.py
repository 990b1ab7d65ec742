"""BI tools' time-grain expressions, evaluated on a stored time bucket.

BI tools never send ``timeseries()``; each writes its time grain its own way:
``date_trunc('month', col)`` (Superset's Spark SQL grains, and its Hive spec with the
``TIME_GRAIN_ADDON_EXPRESSIONS`` of docs/clients.md), ``date_trunc('month', CAST(col AS
TIMESTAMP))``, ``CAST(DATE_TRUNC('MONTH', CAST(col AS TIMESTAMP)) AS DATE)`` (Tableau),
``trunc(col, 'MM')``, ``to_date(col)``, ``year(col), month(col)``,
``date_format(col, 'yyyy-MM')`` (Looker),
``from_unixtime(unix_timestamp(col), 'yyyy-MM-01 00:00:00')`` (Superset's Hive grains),
``EXTRACT(year FROM col)`` (MetricFlow), week starts written as a weekday offset
(``date_sub(col, dayofweek(col) - 2)``, ``date_add(col, -((dayofweek(col) + 5) % 7))``).
Expressions built on top of them (CONCAT quarter labels, CASE on month(), make_date of
year and month) need nothing here: the rule rebuilds them from their derived parts.

Each of them is ``f(col)`` where ``f`` is constant on every bucket of some granularity
``g`` of the lattice (rewriter.timeseries): ``f(col) = f(bucket_g(col))``. A datamap that
stores a bucket ``b`` of ``col`` at a granularity ``fine`` with ``is_rollup(fine, g)``
then answers ``f(col)`` exactly as ``f(rollup(b, g))``: the rolled bucket is the start of
col's g-bucket, which lies in the same g-bucket as col.

Why only DATE and TIMESTAMP (LTZ) columns: both the stored bucket and ``f`` read the value
in the session time zone (a DATE becomes local midnight), so ``f`` sees the same
calendar fields. A TIMESTAMP_NTZ, a string or an unknown type is refused: the cast to
TIMESTAMP there depends on the zone or on parsing, and "when unsure, refuse".

Week starts matter: a Monday week is the lattice's ``week`` (date_trunc's); a week starting
on any other day straddles Monday weeks, months and years, so only a day bucket answers it.
A DATE column is recovered exactly from its day bucket (date_from_day_bucket), which is how
anything else of that column is answered from a day datamap.
"""
from __future__ import annotations

import re
from sqlglot import exp

from rewriter import timeseries as ts

_KINDS = frozenset({"date", "timestamp", "timestamp_ltz"})

# date_trunc / trunc units -> the granularity whose buckets the unit is constant on.
# QUARTER is not a timeseries granularity, but quarters are unions of months.
_TRUNC_UNITS: dict[str, str] = {
    "YEAR": "year", "YYYY": "year", "YY": "year",
    "QUARTER": "month",
    "MONTH": "month", "MON": "month", "MM": "month",
    "WEEK": "week",
    "DAY": "day", "DD": "day",
    "HOUR": "hour", "MINUTE": "minute", "SECOND": "second",
}
# trunc(date, fmt) accepts only these (Spark's TruncDate)
_DATE_TRUNC_UNITS = frozenset({"YEAR", "YYYY", "YY", "QUARTER", "MONTH", "MON", "MM", "WEEK"})

# calendar-field functions -> the granularity they are constant on
_FIELDS: dict[type, str] = {
    exp.Year: "year", exp.Quarter: "month", exp.Month: "month",
    exp.DayOfMonth: "day", exp.DayOfWeek: "day", exp.DayOfYear: "day",
    exp.WeekOfYear: "week",               # ISO weeks run Monday to Sunday, as date_trunc's
    exp.Hour: "hour", exp.Minute: "minute",
}

# EXTRACT(field FROM col) / date_part fields (Spark's aliases) -> granularity. SECOND is left
# out: it returns the fraction too.
_EXTRACT_FIELDS: dict[str, str] = {
    **dict.fromkeys(("YEAR", "Y", "YEARS", "YR", "YRS"), "year"),
    **dict.fromkeys(("QUARTER", "QTR"), "month"),
    **dict.fromkeys(("MONTH", "MON", "MONS", "MONTHS"), "month"),
    **dict.fromkeys(("WEEK", "W", "WEEKS", "YEAROFWEEK"), "week"),     # ISO, Monday weeks
    **dict.fromkeys(("DAY", "D", "DAYS", "DAYOFWEEK", "DOW", "DAYOFWEEK_ISO", "DOW_ISO", "DOY"),
                    "day"),
    **dict.fromkeys(("HOUR", "H", "HOURS", "HR", "HRS"), "hour"),
    **dict.fromkeys(("MINUTE", "M", "MIN", "MINS", "MINUTES"), "minute"),
}

# Spark datetime pattern letters (as written: the parser keeps patterns verbatim,
# rewriter/normalize.py) -> the granularity they need. `Y` is the week-based year, not
# constant on calendar years (and an error in Spark 4): refused, as is any other letter.
_PATTERN_FIELDS: dict[str, str] = {
    "y": "year", "yyyy": "year", "MM": "month", "dd": "day", "HH": "hour", "mm": "minute",
    "ss": "second",
}
_PATTERN_TOKEN = re.compile(r"([A-Za-z])\1*|[-/: 0-9]")
_FINE_TO_COARSE = ("second", "minute", "hour", "day", "month", "year")


def _pattern_grain(fmt: exp.Expression | None) -> str | None:
    """The finest granularity a date_format / from_unixtime pattern reads, or None when the
    pattern has anything but year/month/day/hour/minute/second fields and separators
    (week-based years, day names, fractions, quoted text: refused)."""
    if not (isinstance(fmt, exp.Literal) and fmt.is_string):
        return None
    text, pos, need = fmt.this, 0, []
    while pos < len(text):
        m = _PATTERN_TOKEN.match(text, pos)
        if m is None:
            return None
        tok = m.group(0)
        if tok[0].isalpha():
            g = _PATTERN_FIELDS.get(tok)
            if g is None:
                return None
            need.append(g)
        pos = m.end()
    if not need:
        return None
    return min(need, key=_FINE_TO_COARSE.index)


def _strip(e: exp.Expression) -> exp.Expression | None:
    """The column under the conversions Spark applies anyway to a DATE/TIMESTAMP argument:
    CAST(col AS TIMESTAMP), to_date(col) added by the parser, the string->timestamp wrapper
    of date_format. None when something else sits in between."""
    while True:
        if isinstance(e, exp.Paren):
            e = e.this
        elif isinstance(e, (exp.Cast, exp.TryCast)) and e.to.this in (
                exp.DataType.Type.TIMESTAMPTZ, exp.DataType.Type.TIMESTAMPLTZ):
            # Spark's TIMESTAMP reads as TIMESTAMPTZ; TIMESTAMP_NTZ (and to_timestamp's
            # plain TIMESTAMP) would move the wall clock into another type: refused
            e = e.this
        elif isinstance(e, (exp.TsOrDsToDate, exp.TimeStrToTime)) and not e.args.get("format"):
            e = e.this
        else:
            return e if isinstance(e, exp.Column) else None


def _unit(node: exp.Expression) -> str | None:
    u = node.args.get("unit")
    return u.name.upper() if isinstance(u, (exp.Var, exp.Literal)) and u.name else None


def grain_of(node: exp.Expression) -> tuple[exp.Column, str] | None:
    """(column, granularity g) when `node` is a time-grain expression of the column that is
    constant on every g-bucket; None otherwise."""
    arg, gran = node.this if isinstance(node.this, exp.Expression) else None, None
    if isinstance(node, exp.TimestampTrunc):
        gran = _TRUNC_UNITS.get(_unit(node) or "")
    elif isinstance(node, exp.DateTrunc):
        unit = _unit(node)
        gran = _TRUNC_UNITS[unit] if unit in _DATE_TRUNC_UNITS else None
    elif isinstance(node, (exp.Cast, exp.TryCast)) and node.to.this == exp.DataType.Type.DATE:
        gran = "day"
    elif isinstance(node, exp.TsOrDsToDate) and not node.args.get("format"):
        gran = "day"
    elif type(node) in _FIELDS:
        gran = _FIELDS[type(node)]
    elif isinstance(node, exp.TimeToStr):
        gran = _pattern_grain(node.args.get("format"))
    elif isinstance(node, exp.TsOrDsAdd):
        gran = _week_grain(node)
    elif isinstance(node, exp.Extract) and isinstance(node.this, (exp.Var, exp.Literal)):
        arg, gran = node.expression, _EXTRACT_FIELDS.get(node.this.name.upper())
    elif isinstance(node, exp.UnixToStr) and isinstance(node.this, exp.StrToUnix):
        # from_unixtime(unix_timestamp(col), fmt): unix_timestamp ignores its format for a
        # DATE/TIMESTAMP argument, and whole seconds are all a pattern without fractions reads
        arg, gran = node.this.this, _pattern_grain(node.args.get("format"))
    col = _strip(arg) if gran and arg is not None else None
    return (col, gran) if col is not None else None


def _week_grain(node: exp.TsOrDsAdd) -> str | None:
    """The grain of date_add(col, k(dayofweek(col))) / date_sub(...), the week-start idioms
    of Looker and hand-written dashboards (`date_sub(d, dayofweek(d) - 2)`,
    `date_add(d, -((dayofweek(d) + 5) % 7))`). The day offset is evaluated for all seven
    weekdays: the result is constant on weeks starting on weekday s when offset + position
    in the week is the same for the seven days from s. A Monday week is the lattice's
    `week`; a week starting on any other day is constant only on days (it straddles
    Monday weeks), so it needs a day bucket. date_add reads its argument's date, so even
    for a TIMESTAMP the result is constant on days."""
    unit = node.args.get("unit")
    if unit is not None and unit.name.upper() != "DAY" or not isinstance(node.this, exp.Column):
        return None
    try:
        offsets = [_weekday_offset(node.expression, node.this, dow) for dow in range(1, 8)]
    except ValueError:
        return None
    for start in range(1, 8):                     # Spark's dayofweek: 1 = Sunday
        days = [(start - 1 + j) % 7 for j in range(7)]
        if len({offsets[d] + j for j, d in enumerate(days)}) == 1:
            return "week" if start == 2 else "day"
    return None


def _weekday_offset(e: exp.Expression, col: exp.Column, dow: int) -> int:
    """Integer value of `e` when dayofweek(col) is `dow`, with Spark's integer semantics
    (remainder takes the dividend's sign). ValueError for anything else."""
    if isinstance(e, exp.Paren):
        return _weekday_offset(e.this, col, dow)
    if isinstance(e, exp.Literal) and not e.is_string and e.this.lstrip("-").isdigit():
        return int(e.this)
    if isinstance(e, exp.DayOfWeek) and _strip(e.this) == col:
        return dow
    if isinstance(e, exp.Neg):
        return -_weekday_offset(e.this, col, dow)
    if isinstance(e, exp.Anonymous) and e.name.lower() == "pmod" and len(e.expressions) == 2:
        a, b = (_weekday_offset(x, col, dow) for x in e.expressions)
        if b <= 0:
            raise ValueError("pmod by a non-positive number")
        return a % b                              # Python's % is pmod for b > 0
    if isinstance(e, (exp.Add, exp.Sub, exp.Mul, exp.Mod)):
        a, b = _weekday_offset(e.this, col, dow), _weekday_offset(e.expression, col, dow)
        if isinstance(e, exp.Add):
            return a + b
        if isinstance(e, exp.Sub):
            return a - b
        if isinstance(e, exp.Mul):
            return a * b
        if b == 0:
            raise ValueError("remainder by zero")
        r = abs(a) % abs(b)
        return r if a >= 0 else -r
    raise ValueError(f"not a weekday offset: {e.sql('spark')}")


def date_from_day_bucket(col_type: str | None, fine: str,
                         stored: exp.Expression) -> exp.Expression | None:
    """A DATE column itself, from its stored day bucket: the bucket is the local midnight
    of that date, and casting it back in the same session time zone gives the date, so
    any expression of the column (Sunday weeks, date arithmetic, filters) can be computed
    from it. None for other types and granularities."""
    if (col_type or "").lower() != "date" or fine != "day":
        return None
    return exp.Cast(this=stored.copy(), to=exp.DataType.build("date"))


_PLAIN_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def next_day(text: str) -> str | None:
    """The day after a plain 'yyyy-MM-dd' literal, or None (time parts, other forms).

    Why: on a DATE, `d <= X` is `d < X + 1 day` and `d > X` is `d >= X + 1 day` when X is a
    plain date, which turns BETWEEN's upper end into a bound a month or week bucket can
    answer when X + 1 day starts a bucket (1995-04-30 -> 1995-05-01). A literal with a time
    part is refused: Spark's reading of it against a DATE is not worth guessing."""
    import datetime as _dt
    if not _PLAIN_DATE.fullmatch(text):
        return None
    try:
        return (_dt.date.fromisoformat(text) + _dt.timedelta(days=1)).isoformat()
    except ValueError:
        return None


def date_of(e: exp.Expression) -> exp.Column | None:
    """The column of CAST(col AS DATE) / to_date(col) (its local date), else None."""
    if isinstance(e, (exp.Cast, exp.TryCast)) and e.to.this == exp.DataType.Type.DATE \
            or isinstance(e, exp.TsOrDsToDate) and not e.args.get("format"):
        return e.this if isinstance(e.this, exp.Column) else None
    return None


def typed(col_type: str | None) -> bool:
    """A column type whose grains this module can read off a stored bucket."""
    return (col_type or "").lower() in _KINDS


def derive_grain(node: exp.Expression, col_type: str | None, fine: str,
                 stored: exp.Expression) -> exp.Expression | None:
    """`node` (a grain of a column of `col_type`) computed from `stored`, that column's
    `fine` bucket; None when not provably equal (type, lattice)."""
    found = grain_of(node)
    if found is None or not typed(col_type):
        return None
    col, gran = found
    try:
        ts.check_granularity(gran, col_type)
        ts.check_granularity(fine, col_type)
    except ValueError:
        return None
    if not ts.is_rollup(fine, gran):
        return None
    rolled = ts.rollup_expr(stored, fine, gran, col_type)
    if isinstance(node, exp.TimestampTrunc) and _unit(node) != "QUARTER":
        return rolled
    return _replace_column(node, col, stored)


def _replace_column(node: exp.Expression, col: exp.Column,
                    by: exp.Expression) -> exp.Expression:
    new = node.copy()
    for n in list(new.walk()):
        if isinstance(n, exp.Column) and n == col:
            if n is new:
                return by.copy()
            n.replace(by.copy())
    return new
