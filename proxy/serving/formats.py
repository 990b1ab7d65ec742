"""Datetime functions with patterns, and CASTs between strings and dates/timestamps, as
Spark computes them (pure): date_format, from_unixtime, unix_timestamp / to_unix_timestamp,
to_date, to_timestamp. Each handler takes (translator, node, scope) like the others of
expressions.DISPATCH and returns (DuckDB SQL, Spark type), or raises NotServable.

Timestamps are instants (proxy/serving/timestamps.py): a TIMESTAMP value in served SQL is
the instant's UTC wall-clock time, so an epoch second n is make_timestamp(n * 10^6). The
session's Zone gives the local time a pattern prints (Zone.local) and the instant of a
local time a pattern or CAST reads (Zone.instant: in a gap forward, in an overlap the
earlier, as java.time). Served only where timestamps are (dates.zone).

Strings: Spark's CAST of a string to a date or timestamp (ANSI on) accepts many shapes
('2024', '2024-1-5', ' 2024-01-05T10:00Z', '2024-01-05 junk' for a date, ...). The tier
reads 'yyyy-MM-dd' and 'yyyy-MM-dd HH:mm:ss[.f..ffffff]' (hours 00-23) and raises on
anything else, so that Spark answers the rest (its value, or its error).
"""
from __future__ import annotations

from typing import Callable

from sqlglot import exp

from proxy.serving.dates import zone
from proxy.serving.patterns import format_sql, grain_unit, parse_sql
from proxy.serving.sqltypes import NotServable
from rewriter.sparktypes import INTEGRAL

_DATE_TEXT = r"^\d{4}-\d{2}-\d{2}( ([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{1,6})?)?$"


def _pattern(e: exp.Expression, what: str) -> str:
    fmt = e.args.get("format")
    if fmt is None and isinstance(e, exp.StrToUnix):
        return "yyyy-MM-dd HH:mm:ss"          # to_unix_timestamp(x): Spark's default
    if not (isinstance(fmt, exp.Literal) and fmt.is_string):
        raise NotServable(f"{what} with a pattern that is not a string literal")
    return fmt.this


def _unwrap(e: exp.Expression) -> exp.Expression:
    # sqlglot wraps date_format's argument in a string->timestamp conversion Spark does
    # only for a string: the type decides below
    if isinstance(e, exp.TimeStrToTime) and not e.args.get("format") \
            and not e.args.get("zone"):
        return e.this
    return e


def string_to_timestamp(sql: str) -> str:
    """A string Spark's CAST reads as this local wall-clock TIMESTAMP; raises otherwise."""
    return (f"(CASE WHEN {sql} IS NULL THEN NULL WHEN regexp_full_match({sql}, "
            f"'{_DATE_TEXT}') AND {sql}[1:4] <> '0000' THEN CAST({sql} AS TIMESTAMP) "
            f"ELSE error('a string in a shape the tier does not cast: Spark answers') END)")


def local_timestamp(self, e: exp.Expression, scope, what: str) -> tuple[str, str]:
    """A timestamp, date (its first instant) or string (Spark's cast to an instant) as the
    local wall-clock TIMESTAMP of that instant; and the type it was."""
    sql, t = self.expr(e, scope)
    z = zone(self)
    if t == "timestamp":
        return z.local(sql), t
    if t == "date":
        return z.local(z.start_of_day(sql)), t
    if t == "string":
        return z.local(z.instant(string_to_timestamp(sql))), t
    raise NotServable(f"{what} of {t}")


def _checked_date(e: exp.Expression) -> bool:
    """Is `e` a date the tier computes through dates.in_range (date_add / date_sub,
    add_months, next_day, a date +/- INTERVAL of days, months or years), which raises
    outside years 1..9999? Its local midnight is then within them too, in any zone."""
    if isinstance(e, (exp.Add, exp.Sub)):
        return isinstance(e.this, exp.Interval) or isinstance(e.expression, exp.Interval)
    return isinstance(e, (exp.TsOrDsAdd, exp.AddMonths, exp.NextDay))


def _printed(self, pattern: str, t: str, in_years: bool = False) -> str:
    """format_sql; a pattern that tells values apart at a unit (patterns.grain_unit) is
    noted in the translator's `grains`: its text -> (`t` truncated to the unit, the text
    printed from that), which a GROUP BY of the text groups by instead (translate.py)."""
    sql = format_sql(pattern, t, in_years)
    unit = grain_unit(pattern)
    if unit is not None:
        truncated = f"date_trunc('{unit}', {t})"
        self.grains[sql] = (truncated, format_sql(pattern, truncated, in_years))
    return sql


def truncated_keys(grains: dict[str, tuple[str, str]], keys: list[str]
                   ) -> tuple[list[str], Callable[[str], str]]:
    """GROUP BY `keys`: one that prints a datetime by a pattern injective at a unit
    (`grains`, noted by _printed) groups by the datetime truncated to that unit instead:
    the same groups, and the text is printed once a group, not once a row. The keys, and
    what makes an output's, HAVING's or ORDER BY's SQL read the text off the truncated
    key."""
    found = {k: grains[k] for k in keys if k in grains}
    if not found:
        return keys, lambda sql: sql

    def regroup(sql: str) -> str:
        for k in sorted(found, key=len, reverse=True):
            sql = sql.replace(k, found[k][1])
        return sql
    return [found[k][0] if k in found else k for k in keys], regroup


def date_format(self, e: exp.TimeToStr, scope):
    pattern = _pattern(e, "date_format")
    arg = _unwrap(e.this)
    t, typ = local_timestamp(self, arg, scope, "date_format")
    # a date whose years dates.in_range checked: the check is not written out again
    return _printed(self, pattern, t, in_years=typ == "date" and _checked_date(arg)), "string"


def from_unixtime(self, e: exp.UnixToStr, scope):
    pattern = _pattern(e, "from_unixtime")
    inner = e.this
    sql, t = self.expr(inner, scope)
    if t not in INTEGRAL:
        raise NotServable(f"from_unixtime of {t}")
    # overflowing seconds make DuckDB raise: Spark answers
    local = zone(self).local(f"make_timestamp(CAST({sql} AS BIGINT) * 1000000)")
    return _printed(self, pattern, local), "string"


def _epoch_seconds(instant: str) -> str:
    """Epoch seconds of an instant, rounded towards zero as Spark's long division does
    (1969-12-31 23:59:59.5 UTC is 0, not -1); DuckDB's // does the same."""
    return f"CAST(epoch_us({instant}) // 1000000 AS BIGINT)"


def unix_timestamp(self, e: exp.StrToUnix, scope):
    pattern = _pattern(e, "unix_timestamp")
    if isinstance(e.this, exp.CurrentTimestamp) or e.this is None:
        raise NotServable("unix_timestamp() (the current time)")
    sql, t = self.expr(e.this, scope)
    z = zone(self)
    if t == "timestamp":          # the pattern is not read (nor checked) for a timestamp
        instant = sql
    elif t == "date":
        instant = z.start_of_day(sql)
    elif t == "string":
        instant = z.instant(parse_sql(pattern, sql))
    else:
        raise NotServable(f"unix_timestamp of {t}")
    return _epoch_seconds(instant), "bigint"


def to_timestamp(self, e: exp.StrToTime, scope):
    pattern = _pattern(e, "to_timestamp")
    sql, t = self.expr(e.this, scope)
    z = zone(self)
    if t == "string":
        return z.instant(parse_sql(pattern, sql)), "timestamp"
    if t == "timestamp":          # the pattern is not read for a date or timestamp
        return sql, "timestamp"
    if t == "date":
        return z.start_of_day(sql), "timestamp"
    raise NotServable(f"to_timestamp of {t}")


def _to_date(self, arg: exp.Expression, pattern: str | None, scope):
    sql, t = self.expr(arg, scope)
    if t == "date":
        return sql, "date"
    z = zone(self)
    if t == "timestamp":
        return f"CAST({z.local(sql)} AS DATE)", "date"
    if t != "string":
        raise NotServable(f"to_date of {t}")
    if pattern is None:
        return string_to_date(sql), "date"
    # Spark parses to an instant, then takes its local date (a gap moves the time forward)
    return f"CAST({z.local(z.instant(parse_sql(pattern, sql)))} AS DATE)", "date"


def to_date(self, e: exp.TsOrDsToDate, scope):
    pattern = _pattern(e, "to_date") if e.args.get("format") is not None else None
    return _to_date(self, e.this, pattern, scope)


def to_date_call(self, e: exp.Anonymous, scope):
    """to_date(x, 'yyyy-MM-dd'), kept as the call written (rewriter/normalize.py)."""
    args = e.expressions
    if len(args) != 2 or not (isinstance(args[1], exp.Literal) and args[1].is_string):
        raise NotServable("to_date with a pattern that is not a string literal")
    return _to_date(self, args[0], args[1].this, scope)


def string_to_date(sql: str) -> str:
    return f"CAST({string_to_timestamp(sql)} AS DATE)"


def timestamp_to_string(t: str) -> str:
    """CAST(timestamp AS STRING) of a local wall-clock TIMESTAMP: seconds, then the fraction
    without trailing zeros."""
    micros = f"(microsecond({t}) % 1000000)"
    return (f"({format_sql('yyyy-MM-dd HH:mm:ss', t)} || CASE WHEN {micros} = 0 THEN '' "
            f"ELSE '.' || rtrim(printf('%06d', {micros}), '0') END)")


def cast(self, sql: str, src: str, dst: str) -> str | None:
    """CAST between strings and dates/timestamps of non-literal values; None when the pair
    is not one of them."""
    if (src, dst) == ("string", "date"):
        zone(self)      # no zone is read, but a date string is served where timestamps are
        return string_to_date(sql)
    if (src, dst) == ("string", "timestamp"):
        return zone(self).instant(string_to_timestamp(sql))
    if (src, dst) == ("timestamp", "string"):
        return timestamp_to_string(zone(self).local(sql))
    return None


ANONYMOUS = {"to_date": to_date_call}



DISPATCH = {
    exp.TimeToStr: date_format, exp.UnixToStr: from_unixtime, exp.StrToUnix: unix_timestamp,
    exp.StrToTime: to_timestamp, exp.TsOrDsToDate: to_date,
}
