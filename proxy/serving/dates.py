"""Dates and timestamps in the serving tier's translation (pure): each Spark date-time
function -> (DuckDB SQL, Spark type), as Spark computes it in the session time zone, or
NotServable. Registered in proxy/serving/expressions.py's DISPATCH; `t` is the translator
(an Expressions with `zone`, the session's proxy.serving.timestamps.Zone, or None and
`zone_problem`). Timestamps are instants; every trip through local wall-clock time goes
through the Zone (proxy/serving/timestamps.py).

A date Spark would compute outside 0001-01-01..9999-12-31 (date_add of a large number,
make_date of an invalid day) raises in the engine: Spark answers, with its own NULL or
error (ANSI on or off)."""
from __future__ import annotations

from sqlglot import exp

from proxy.serving.sqltypes import NotServable, date_literal
from proxy.serving.timestamps import Zone, timestamp_literal

# Spark's date_trunc units (DateTimeUtils.parseTruncLevel, any casing) -> DuckDB's; weeks
# start on Monday in both
TIME_UNITS = {"MICROSECOND": "microseconds", "MILLISECOND": "milliseconds",
              "SECOND": "second", "MINUTE": "minute", "HOUR": "hour", "DAY": "day",
              "DD": "day"}
DATE_UNITS = {"WEEK": "week", "MON": "month", "MONTH": "month", "MM": "month",
              "QUARTER": "quarter", "YEAR": "year", "YYYY": "year", "YY": "year"}
# EXTRACT / date_part fields (DatePart.parseExtractField) -> (DuckDB SQL of a local
# timestamp or a date `{}`, Spark type, needs a time of day)
_INT = "CAST({} AS INTEGER)"
FIELDS = {}
for _names, _sql, _time in [
        ("YEAR Y YEARS YR YRS", "year({})", False),
        ("YEAROFWEEK", "isoyear({})", False),
        ("QUARTER QTR", "quarter({})", False),
        ("MONTH MON MONS MONTHS", "month({})", False),
        ("WEEK W WEEKS", "week({})", False),
        ("DAY D DAYS", "day({})", False),
        ("DAYOFWEEK DOW", "(dayofweek({}) + 1)", False),
        ("DAYOFWEEK_ISO DOW_ISO", "isodow({})", False),
        ("DOY", "dayofyear({})", False),
        ("HOUR H HOURS HR HRS", "hour({})", True),
        ("MINUTE M MIN MINS MINUTES", "minute({})", True)]:
    for _n in _names.split():
        FIELDS[_n] = (_INT.format(_sql), "int", _time)
for _n in "SECOND S SEC SECONDS SECS".split():     # SecondWithFraction
    FIELDS[_n] = ("CAST(CAST(date_part('microseconds', {}) AS DECIMAL(8,0)) * "
                  "CAST(0.000001 AS DECIMAL(7,6)) AS DECIMAL(8,6))", "decimal(8,6)", True)
# the functions of one field, by sqlglot node
_FUNCTION_FIELD = {exp.Year: "YEAR", exp.Quarter: "QUARTER", exp.Month: "MONTH",
                   exp.Day: "DAY", exp.DayOfMonth: "DAY", exp.DayOfWeek: "DOW",
                   exp.DayOfYear: "DOY", exp.WeekOfYear: "WEEK"}
_TIME_FUNCTIONS = {exp.Hour: "hour", exp.Minute: "minute", exp.Second: "second"}
_WEEKDAYS = {"MO": 1, "MON": 1, "MONDAY": 1, "TU": 2, "TUE": 2, "TUESDAY": 2, "WE": 3,
             "WED": 3, "WEDNESDAY": 3, "TH": 4, "THU": 4, "THURSDAY": 4, "FR": 5, "FRI": 5,
             "FRIDAY": 5, "SA": 6, "SAT": 6, "SATURDAY": 6, "SU": 7, "SUN": 7, "SUNDAY": 7}
_SMALL_INTEGRAL = ("tinyint", "smallint", "int")
# interval units Spark reads as a day-time interval (microseconds) or a year-month one
_DAY_TIME = {"DAY": 86_400_000_000, "DAYS": 86_400_000_000, "HOUR": 3_600_000_000,
             "HOURS": 3_600_000_000, "MINUTE": 60_000_000, "MINUTES": 60_000_000,
             "SECOND": 1_000_000, "SECONDS": 1_000_000}
_YEAR_MONTH = {"MONTH": 1, "MONTHS": 1, "YEAR": 12, "YEARS": 12}


def zone(t) -> Zone:
    """The session zone, or NotServable: a timestamp (or a date's local midnight) is
    served only where the zone is (proxy/serving/timestamps.py)."""
    if t.zone is None:
        raise NotServable(t.zone_problem or "the session time zone is not known")
    return t.zone


def in_range(sql: str) -> str:
    """A date Spark holds (years 1-9999), else an error: Spark answers. `sql` is written
    twice, not three times (NOT of a NULL's BETWEEN is NULL: the ELSE gives NULL)."""
    return (f"(CASE WHEN NOT (({sql}) BETWEEN DATE '0001-01-01' AND DATE '9999-12-31') "
            f"THEN error('a date outside years 1-9999') ELSE CAST({sql} AS DATE) END)")


def timestamp_operand(t, e: exp.Expression, sql: str, typ: str) -> str:
    """A date or a timestamp literal string compared with (or cast to) a timestamp, as
    Spark casts it: a date is its first instant, a string a local time in the zone."""
    z = zone(t)
    if typ == "date":
        return z.start_of_day(sql)
    literal = (timestamp_literal(e.this) if isinstance(e, exp.Literal) and e.is_string
               else None)
    if literal is None:
        raise NotServable("a timestamp compared with a string that is not a "
                          "'YYYY-MM-DD[ HH:MM:SS[.ffffff]]' literal")
    return z.instant(literal)


def cast_date_time(t, sql: str, src: str, dst: str) -> str:
    """CAST between date and timestamp: a date's first instant, an instant's local date."""
    z = zone(t)
    if dst == "timestamp":
        return z.start_of_day(sql)
    return f"CAST({z.local(sql)} AS DATE)"


def as_date(t, e: exp.Expression, scope, what: str) -> str:
    """A date argument, as Spark casts it: a date, a timestamp's local date, or a
    'YYYY-MM-DD' literal."""
    if isinstance(e, exp.TsOrDsToDate) and not e.args.get("format"):
        e = e.this                          # sqlglot's wrapper of dayofweek(<date>) ...
    if isinstance(e, exp.Literal) and e.is_string:
        return date_literal(e)
    sql, typ = t.expr(e, scope)
    if typ == "date":
        return sql
    if typ == "timestamp":
        return f"CAST({zone(t).local(sql)} AS DATE)"
    raise NotServable(f"{what} of {typ}")


def as_timestamp(t, e: exp.Expression, scope, what: str) -> str:
    """A timestamp argument (an instant): a timestamp, or a date's first instant."""
    if isinstance(e, exp.TsOrDsToDate) and not e.args.get("format"):
        e = e.this
    sql, typ = t.expr(e, scope)
    if typ == "timestamp":
        return sql
    if typ == "date":
        return zone(t).start_of_day(sql)
    raise NotServable(f"{what} of {typ}")


def _days(t, e: exp.Expression, scope, what: str) -> str:
    sql, typ = t.expr(e, scope)
    if typ not in _SMALL_INTEGRAL:
        raise NotServable(f"{what} by a {typ}")
    return f"CAST({sql} AS INTEGER)"


def _unit(e) -> str:
    return (e.name if isinstance(e, (exp.Var, exp.Literal)) else "").upper()


# ------------------------------------------------------------------------------ fields
def field_function(t, e, scope):
    """year, quarter, month, day / dayofmonth, dayofweek, dayofyear, weekofyear of a date
    or timestamp; hour, minute, second of a timestamp."""
    if type(e) in _TIME_FUNCTIONS:
        sql, typ = t.expr(e.this, scope)
        if typ != "timestamp":
            raise NotServable(f"{e.key.upper()} of {typ}")
        return f"CAST(date_part('{_TIME_FUNCTIONS[type(e)]}', {zone(t).local(sql)}) AS INTEGER)", "int"
    template, typ, _ = FIELDS[_FUNCTION_FIELD[type(e)]]
    return template.format(as_date(t, e.this, scope, e.key.upper())), typ


def weekday(t, e, scope):
    """weekday(d): 0 for Monday ... 6 for Sunday."""
    (arg,) = _args(e, 1)
    return f"CAST(isodow({as_date(t, arg, scope, 'WEEKDAY')}) - 1 AS INTEGER)", "int"


def extract(t, e: exp.Extract, scope):
    return _field(t, _unit(e.this), e.expression, scope)


def date_part(t, e, scope):
    field, source = _args(e, 2)
    if not (isinstance(field, exp.Literal) and field.is_string):
        raise NotServable("date_part with a field that is not a literal")
    return _field(t, field.this.upper(), source, scope)


def _field(t, name: str, source, scope):
    if name not in FIELDS:
        raise NotServable(f"EXTRACT field {name or '?'}")
    template, typ, time = FIELDS[name]
    sql, src = t.expr(source, scope)
    if src == "timestamp":
        return template.format(zone(t).local(sql)), typ
    if src == "date" and not time:
        return template.format(sql), typ
    raise NotServable(f"EXTRACT {name} of {src}")


# ------------------------------------------------------------------------------ truncation
def trunc_timestamp(t, e: exp.TimestampTrunc, scope):
    """date_trunc(unit, ts): below a minute the instant itself (offsets are whole seconds);
    minute, hour, day the local time truncated, back with the instant's own offset where it
    is valid (ZonedDateTime.truncatedTo); week and longer the local date's first instant."""
    name = _unit(e.args.get("unit"))
    if e.args.get("zone") or (name not in TIME_UNITS and name not in DATE_UNITS):
        raise NotServable(f"date_trunc unit {name.lower() or '?'}")
    sql = as_timestamp(t, e.this, scope, "date_trunc")
    z = zone(t)
    if name in ("MICROSECOND", "MILLISECOND", "SECOND"):
        return f"CAST(date_trunc('{TIME_UNITS[name]}', {sql}) AS TIMESTAMP)", "timestamp"
    if name in TIME_UNITS:
        local = f"CAST(date_trunc('{TIME_UNITS[name]}', {z.local(sql)}) AS TIMESTAMP)"
        return z.instant_near(local, sql), "timestamp"
    day = f"CAST(date_trunc('{DATE_UNITS[name]}', CAST({z.local(sql)} AS DATE)) AS DATE)"
    return z.start_of_day(day), "timestamp"


def trunc_date(t, e: exp.DateTrunc, scope):
    """trunc(date, fmt): week, month, quarter, year (a shorter or unknown unit is NULL in
    Spark: not served)."""
    name = _unit(e.args.get("unit"))
    if name not in DATE_UNITS:
        raise NotServable(f"trunc unit {name.lower() or '?'}")
    day = as_date(t, e.this, scope, "trunc")
    return f"CAST(date_trunc('{DATE_UNITS[name]}', {day}) AS DATE)", "date"


# ------------------------------------------------------------------------------ arithmetic
def date_add(t, e: exp.TsOrDsAdd, scope):
    """date_add(d, n) / date_sub(d, n) (sqlglot: d + n * -1) of an int, smallint or
    tinyint number of days."""
    if _unit(e.args.get("unit")) not in ("DAY", ""):
        raise NotServable(f"date_add by {_unit(e.args.get('unit')).lower()}")
    day = as_date(t, e.this, scope, "date_add")
    n = e.expression
    sign = ""
    if isinstance(n, exp.Mul) and isinstance(n.expression, exp.Neg) \
            and isinstance(n.expression.this, exp.Literal) and n.expression.this.this == "1":
        n, sign = n.this, "-"               # date_sub
    return in_range(f"{day} + {sign}{_days(t, n, scope, 'date_add')}"), "date"


def add_months(t, e: exp.AddMonths, scope):
    """add_months(d, n): LocalDate.plusMonths, a day past the month's end is its last."""
    day = as_date(t, e.this, scope, "add_months")
    n = _days(t, e.expression, scope, "add_months")
    return in_range(f"CAST({day} + to_months({n}) AS DATE)"), "date"


def last_day(t, e: exp.LastDay, scope):
    if e.args.get("unit"):
        raise NotServable("last_day with a unit")
    return f"last_day({as_date(t, e.this, scope, 'last_day')})", "date"


def next_day(t, e: exp.NextDay, scope):
    """next_day(d, 'Mon'): the first such day after d (an unknown name: not served)."""
    name = e.expression
    if not (isinstance(name, exp.Literal) and name.is_string
            and name.this.strip().upper() in _WEEKDAYS):
        raise NotServable("next_day with a day of week that is not a literal day name")
    day = as_date(t, e.this, scope, "next_day")
    want = _WEEKDAYS[name.this.strip().upper()]
    return in_range(f"{day} + CAST(((({want} - isodow({day})) + 6) % 7) + 1 AS INTEGER)"), "date"


def make_date(t, e, scope):
    """make_date(y, m, d) of integers; an invalid date raises (Spark: NULL or an error
    by its ANSI setting, so Spark answers)."""
    parts = [_days(t, a, scope, "make_date") for a in _args(e, 3)]
    y = parts[0]
    return (f"(CASE WHEN {y} < 1 OR {y} > 9999 THEN error('make_date: year out of range') "
            f"ELSE make_date({', '.join(parts)}) END)"), "date"


def months_between(t, e: exp.MonthsBetween, scope):
    """months_between(a, b[, roundOff]) as DateTimeUtils.monthsBetween: whole months when
    the days of month are equal or both are month ends, else plus the difference in
    seconds (from each day's first instant) over 31 days; rounded to 8 digits unless
    roundOff is false (Math.round: floor(x + 0.5), exact for these magnitudes)."""
    z = zone(t)
    a = as_timestamp(t, e.this, scope, "months_between")
    b = as_timestamp(t, e.expression, scope, "months_between")
    roundoff = e.args.get("roundoff")
    if roundoff is not None and not isinstance(roundoff, exp.Boolean):
        raise NotServable("months_between with a roundOff that is not a literal")
    da, db = (f"CAST({z.local(x)} AS DATE)" for x in (a, b))

    def seconds(i, d):
        return f"((epoch_us({i}) - epoch_us({z.start_of_day(d)})) // 1000000)"
    months = (f"CAST((year({da}) * 12 + month({da})) - (year({db}) * 12 + month({db})) "
              f"AS DOUBLE)")
    diff = (f"({months} + CAST((day({da}) - day({db})) * 86400 + {seconds(a, da)} - "
            f"{seconds(b, db)} AS DOUBLE) / 2678400.0)")
    if roundoff is None or roundoff.this:
        diff = f"(CAST(floor({diff} * 1e8 + 0.5) AS DOUBLE) / 1e8)"
    return (f"(CASE WHEN {a} IS NULL OR {b} IS NULL THEN CAST(NULL AS DOUBLE) "
            f"WHEN day({da}) = day({db}) OR ({da} = last_day({da}) AND {db} = last_day({db})) "
            f"THEN {months} ELSE {diff} END)"), "double"


def interval(t, e: exp.Binary, scope):
    """date/timestamp +/- INTERVAL 'n' unit (one unit, an integer n): whole days and months
    move the local date-time (plusDays, plusMonths) and keep the offset where it is valid,
    the rest of a day-time interval adds microseconds to the instant; a date plus whole
    days stays a date."""
    if isinstance(e.this, exp.Interval):
        if isinstance(e, exp.Sub):
            raise NotServable("an interval minus a date-time")
        base, iv = e.expression, e.this
    else:
        base, iv = e.this, e.expression
    text = iv.this.this if isinstance(iv.this, exp.Literal) else None
    unit = _unit(iv.args.get("unit"))
    sign = -1 if isinstance(e, exp.Sub) else 1
    if text is None or not text.lstrip("-").isdigit() or len(text) > 9 \
            or unit not in _DAY_TIME and unit not in _YEAR_MONTH:
        raise NotServable(f"INTERVAL {short_interval(iv)}")
    n = sign * int(text)
    sql, typ = t.expr(base, scope)
    if typ == "date" and unit in ("DAY", "DAYS"):
        return in_range(f"{sql} + CAST({n} AS INTEGER)"), "date"
    if typ == "date" and unit in _YEAR_MONTH:
        return in_range(f"CAST({sql} + to_months({n * _YEAR_MONTH[unit]}) AS DATE)"), "date"
    if typ == "date":
        sql = zone(t).start_of_day(sql)
    elif typ != "timestamp":
        raise NotServable(f"{typ} + INTERVAL")
    z = zone(t)
    if unit in _DAY_TIME:
        # timestampAddDayTime: whole days move the local date (plusDays, keeping the
        # offset where valid), the rest is added to the instant
        total = n * _DAY_TIME[unit]
        days = abs(total) // 86_400_000_000 * (1 if total >= 0 else -1)
        rest = total - days * 86_400_000_000
        if days:
            local = f"CAST({z.local(sql)} + to_days({days}) AS TIMESTAMP)"
            sql = z.instant_near(local, sql)
        return f"CAST({sql} + to_microseconds({rest}) AS TIMESTAMP)", "timestamp"
    local = f"CAST({z.local(sql)} + to_months({n * _YEAR_MONTH[unit]}) AS TIMESTAMP)"
    return z.instant_near(local, sql), "timestamp"


def is_make_dt_interval(e: exp.Expression) -> bool:
    return isinstance(e, exp.Anonymous) and e.name.lower() == "make_dt_interval"


def plus_minutes(t, e: exp.Binary, scope):
    """timestamp +/- make_dt_interval(0, 0, m, 0) (timeseries()' n-minute buckets,
    rewriter/timeseries.py): no whole days, so m minutes are added to (taken from) the
    instant; a NULL m is NULL."""
    args = e.expression.expressions
    if len(args) != 4 or any(not (isinstance(a, exp.Literal) and a.this in ("0", "0.0"))
                             for a in (args[0], args[1], args[3])):
        raise NotServable("make_dt_interval other than of minutes alone")
    sql, typ = t.expr(e.this, scope)
    m_sql, mt = t.expr(args[2], scope)
    if typ != "timestamp" or mt not in _SMALL_INTEGRAL:
        raise NotServable(f"{typ} + make_dt_interval of {mt} minutes")
    op = "-" if isinstance(e, exp.Sub) else "+"
    return (f"CAST({sql} {op} to_microseconds(CAST({m_sql} AS BIGINT) * 60000000) "
            "AS TIMESTAMP)"), "timestamp"


def short_interval(iv: exp.Interval) -> str:
    return iv.sql("spark").removeprefix("INTERVAL ")


def _args(e, n: int):
    args = list(e.expressions) if isinstance(e, exp.Anonymous) else [e.this]
    if len(args) != n:
        raise NotServable(f"{e.name if isinstance(e, exp.Anonymous) else e.key} with "
                          f"{len(args)} arguments")
    return args


# functions sqlglot leaves anonymous, by lower-case name
ANONYMOUS = {"weekday": weekday, "date_part": date_part, "make_date": make_date}
DISPATCH = {
    exp.Year: field_function, exp.Quarter: field_function, exp.Month: field_function,
    exp.Day: field_function, exp.DayOfMonth: field_function, exp.DayOfWeek: field_function,
    exp.DayOfYear: field_function, exp.WeekOfYear: field_function, exp.Hour: field_function,
    exp.Minute: field_function, exp.Second: field_function, exp.Extract: extract,
    exp.TimestampTrunc: trunc_timestamp, exp.DateTrunc: trunc_date, exp.TsOrDsAdd: date_add,
    exp.AddMonths: add_months, exp.LastDay: last_day, exp.NextDay: next_day,
    exp.MonthsBetween: months_between,
}
