"""Timestamps in the serving tier (pure): which session time zones it serves them in, and
the literals and truncation units it understands.

Spark's TIMESTAMP is an instant, shown, truncated and split into fields in the session
time zone. The tier serves timestamps only in a zone with one fixed UTC offset (UTC, GMT,
Etc/GMT+N, +HH:MM, ...): there every instant maps to one local wall-clock time, in order,
so the datamap's values are read as local wall-clock times (UTC + offset) and compared,
truncated and printed as such. A zone with daylight saving time or a history of offset
changes (America/New_York, Europe/Berlin, Asia/Tokyo, ...) would need the zone's rules at
every step: its timestamps go to Spark.
"""
from __future__ import annotations

import re
from datetime import date, datetime

_UTC_NAMES = {"utc", "gmt", "z", "zulu", "uct", "universal", "greenwich", "etc/utc", "etc/gmt",
              "etc/uct", "etc/universal", "etc/zulu", "etc/greenwich", "gmt0", "etc/gmt0",
              "etc/gmt+0", "etc/gmt-0", "gmt+0", "gmt-0"}
_OFFSET = re.compile(r"^(?:utc|gmt)?([+-])(\d{1,2})(?::?(\d{2}))?$")
_ETC = re.compile(r"^etc/gmt([+-])(\d{1,2})$")
_TS_LITERAL = re.compile(r"^\d{4}-\d{2}-\d{2}(?:[ T]\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?)?$")

# Spark's date_trunc units -> DuckDB's (weeks start on Monday in both)
TRUNC_UNITS = {"year": "year", "yyyy": "year", "yy": "year", "quarter": "quarter",
               "month": "month", "mm": "month", "mon": "month", "week": "week",
               "day": "day", "dd": "day", "hour": "hour", "minute": "minute",
               "second": "second"}


def fixed_offset(zone: str | None) -> tuple[int | None, str | None]:
    """(offset in seconds, None) for a fixed-offset zone; (None, why not) otherwise."""
    if not zone:
        return None, "the session time zone is not known"
    z = zone.strip().lower()
    if z in _UTC_NAMES:
        return 0, None
    m = _OFFSET.match(z)
    if m:
        sign = -1 if m.group(1) == "-" else 1
        hours, minutes = int(m.group(2)), int(m.group(3) or 0)
        if hours <= 18 and minutes < 60:
            return sign * (hours * 3600 + minutes * 60), None
    m = _ETC.match(z)
    if m:   # POSIX style: Etc/GMT+5 is five hours *behind* UTC
        hours = int(m.group(2))
        if hours <= 14:
            return (-1 if m.group(1) == "+" else 1) * hours * 3600, None
    return None, f"timestamps in time zone {zone}, which is not a fixed UTC offset"


def timestamp_literal(text: str) -> str | None:
    """A string Spark casts to a timestamp the same way -> DuckDB literal, else None."""
    if not _TS_LITERAL.match(text):
        return None
    try:
        if len(text) == 10:
            date.fromisoformat(text)
        else:
            datetime.fromisoformat(text.replace("T", " "))
    except ValueError:
        return None
    return "TIMESTAMP '" + text.replace("T", " ") + "'"
