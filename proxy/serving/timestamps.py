"""Timestamps in the serving tier (pure): the session time zone, and the one way served SQL
moves between instants and local wall-clock times.

Spark's TIMESTAMP is an instant, shown, truncated and split into fields in the session time
zone. In served SQL a timestamp value is always the instant, a DuckDB TIMESTAMP holding its
UTC wall-clock time (the engine's own TimeZone is UTC). `Zone` is the only place that
converts:

  * `local(instant)`: the wall-clock time in the session zone (a TIMESTAMP): fields (hour,
    day, ...), CAST to DATE, and what a client is sent (the output of the outermost SELECT);
  * `instant(local)`: a local time back to an instant as java.time's `ZonedDateTime.of`
    does (Spark's cast of a string): in a gap (spring forward) the time moves forward by
    the gap's length, in an overlap (fall back) the earlier instant is taken;
  * `instant_near(local, instant)`: the same, preferring the offset `instant` had
    (`ZonedDateTime.truncatedTo`: date_trunc to minute, hour, day keeps the repeated hour's
    two occurrences apart);
  * `start_of_day(date)`: `LocalDate.atStartOfDay(zone)`, a date's first instant (CAST of a
    date to a timestamp, date_trunc to week and longer). Midnight inside a gap is the
    transition's instant; a gap that does not start at midnight raises (Spark answers).

Everything else is computed on instants: comparisons, min/max, grouping, ordering (a local
time is not monotonic at a fall-back: two instants an hour apart print the same).

Two kinds of zone are served:
  * a fixed UTC offset (UTC, GMT, +05:30, Etc/GMT-14, ...): the conversions are additions;
  * a named zone of NAMED_ZONES: the conversions are the engine's macros (ZONE_MACROS) over
    DuckDB's ICU time-zone rules (statically linked into DuckDB: nothing is downloaded).
    tests/proxy/serving/test_zones_spark.py holds that ICU's rules equal the JVM's (Spark's)
    for each of these zones at every transition and every day of [SERVED_FROM, SERVED_TO),
    and that the zone's transitions are over two days apart there, which the
    local-to-instant macros rely on (they look one day either side for the offsets in play).
    Outside those years (LMT offsets, future rules the two databases predict differently)
    a conversion raises and Spark answers. Zones whose rules disagree within them
    (America/Sao_Paulo 1965, America/Vancouver and America/Havana from 2026,
    Africa/Casablanca from 2027, Europe/Dublin 1925, Asia/Tehran 1978, America/Bogota 1992,
    EST5EDT and PST8PDT before 1967) and zones not on the list go to Spark.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime

_UTC_NAMES = {"utc", "gmt", "z", "zulu", "uct", "universal", "greenwich", "etc/utc", "etc/gmt",
              "etc/uct", "etc/universal", "etc/zulu", "etc/greenwich", "gmt0", "etc/gmt0",
              "etc/gmt+0", "etc/gmt-0", "gmt+0", "gmt-0"}
_OFFSET = re.compile(r"^(?:utc|gmt)?([+-])(\d{1,2})(?::?(\d{2}))?$")
_ETC = re.compile(r"^etc/gmt([+-])(\d{1,2})$")
_TS_LITERAL = re.compile(r"^\d{4}-\d{2}-\d{2}(?:[ T]\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?)?$")

# Named zones whose rules in DuckDB's ICU equal the JVM's over the served years (region
# names exactly as Spark's ZoneId.of takes them).
NAMED_ZONES = frozenset("""
America/New_York America/Chicago America/Denver America/Los_Angeles America/Phoenix
America/Anchorage America/Toronto America/Mexico_City America/Argentina/Buenos_Aires
America/Santiago America/St_Johns America/Caracas America/Lima America/Nuuk Pacific/Honolulu
US/Eastern US/Central US/Mountain US/Pacific
Europe/London Europe/Paris Europe/Berlin Europe/Madrid Europe/Rome Europe/Amsterdam
Europe/Moscow Europe/Istanbul Europe/Kiev Europe/Warsaw Europe/Lisbon Europe/Zurich
Europe/Stockholm Europe/Athens Europe/Helsinki CET EET MET WET
Asia/Kolkata Asia/Calcutta Asia/Tokyo Asia/Shanghai Asia/Singapore Asia/Hong_Kong Asia/Seoul
Asia/Dubai Asia/Jerusalem Asia/Kathmandu Asia/Karachi Asia/Dhaka Asia/Bangkok Asia/Jakarta
Asia/Manila Asia/Taipei Asia/Riyadh Asia/Gaza
Australia/Sydney Australia/Melbourne Australia/Adelaide Australia/Brisbane Australia/Perth
Australia/Lord_Howe Australia/Darwin Pacific/Auckland Pacific/Chatham Pacific/Apia
Pacific/Kiritimati Africa/Johannesburg Africa/Cairo Africa/Lagos Africa/Nairobi
Atlantic/Reykjavik Antarctica/Troll
""".split())
SERVED_FROM, SERVED_TO = "1900-01-01", "2100-01-01"    # instants (UTC) a named zone serves
OUT_OF_RANGE = (f"a timestamp outside {SERVED_FROM[:4]}-{int(SERVED_TO[:4]) - 1} in a named "
                "time zone")

# The engine's macros for named zones (registered by proxy/serving/engine.py); `z` is the
# zone name, `i` an instant, `l` a local time. tz_off: the UTC offset at an instant.
# tz_instant: around `l` there is at most one transition (they are over two days apart in
# the served zones), so the offsets in play are those one day before and after (ob, oa):
# ob is right if it is valid (in an overlap: the earlier instant) or if neither is (a
# gap: java moves the local time forward by the gap, which is l - ob).
ZONE_MACROS = (   # list_transform([x], lambda v: ...)[1] binds x once: macros are inlined
    "CREATE OR REPLACE MACRO spark_tz_local(z, i) AS list_transform([i], lambda v: CASE WHEN "
    f"v < TIMESTAMP '{SERVED_FROM}' OR v >= TIMESTAMP '{SERVED_TO}' THEN error('{OUT_OF_RANGE}') "
    "ELSE timezone(z, CAST(v AS TIMESTAMPTZ)) END)[1]",
    "CREATE OR REPLACE MACRO spark_tz_off(z, i) AS list_transform([i], lambda v: "
    "spark_tz_local(z, v) - v)[1]",
    "CREATE OR REPLACE MACRO spark_tz_pick(z, l, ob, oa) AS list_transform([{'l': l, 'ob': ob, "
    "'oa': oa}], lambda s: CASE WHEN spark_tz_off(z, s.l - s.ob) <> s.ob AND "
    "spark_tz_off(z, s.l - s.oa) = s.oa THEN s.l - s.oa ELSE s.l - s.ob END)[1]",
    "CREATE OR REPLACE MACRO spark_tz_instant(z, l) AS list_transform([l], lambda v: "
    "spark_tz_pick(z, v, spark_tz_off(z, v - INTERVAL 1 DAY), "
    "spark_tz_off(z, v + INTERVAL 1 DAY)))[1]",
    "CREATE OR REPLACE MACRO spark_tz_near(z, l, p) AS list_transform([{'l': l, 'p': p}], "
    "lambda s: CASE WHEN spark_tz_off(z, s.l - s.p) = s.p THEN s.l - s.p "
    "ELSE spark_tz_instant(z, s.l) END)[1]",
    # a gap holding midnight: java's start of day is the transition, l - ob when the gap
    # starts at midnight (the instant before it still has offset ob); else Spark answers
    "CREATE OR REPLACE MACRO spark_tz_day_gap(z, l, ob, oa) AS list_transform([{'l': l, "
    "'ob': ob, 'oa': oa}], lambda s: CASE WHEN s.l IS NULL THEN NULL "
    "WHEN spark_tz_off(z, s.l - s.ob) = s.ob OR spark_tz_off(z, s.l - s.oa) = s.oa THEN "
    "spark_tz_pick(z, s.l, s.ob, s.oa) "
    "WHEN spark_tz_off(z, s.l - s.ob - INTERVAL 1 MICROSECOND) = s.ob THEN s.l - s.ob "
    "ELSE error('midnight inside a time-zone gap that starts before it') END)[1]",
    "CREATE OR REPLACE MACRO spark_tz_day(z, d) AS list_transform([CAST(d AS TIMESTAMP)], "
    "lambda v: spark_tz_day_gap(z, v, spark_tz_off(z, v - INTERVAL 1 DAY), "
    "spark_tz_off(z, v + INTERVAL 1 DAY)))[1]",
)


@dataclass(frozen=True)
class Zone:
    """The session time zone as served SQL uses it: `offset` seconds for a fixed offset,
    else `name` is one of NAMED_ZONES. Each method takes and returns DuckDB SQL."""
    name: str
    offset: int | None = None

    def _shift(self, sql: str, sign: str) -> str:
        if not self.offset:
            return f"CAST({sql} AS TIMESTAMP)"
        return f"CAST(({sql} {sign} INTERVAL ({self.offset}) SECOND) AS TIMESTAMP)"

    def _z(self) -> str:
        return "'" + self.name.replace("'", "''") + "'"

    def local(self, instant: str) -> str:
        if self.offset is not None:
            return self._shift(instant, "+")
        return f"spark_tz_local({self._z()}, {instant})"

    def instant(self, local: str) -> str:
        if self.offset is not None:
            return self._shift(local, "-")
        return f"spark_tz_instant({self._z()}, {local})"

    def instant_near(self, local: str, instant: str) -> str:
        if self.offset is not None:
            return self._shift(local, "-")
        return f"spark_tz_near({self._z()}, {local}, spark_tz_off({self._z()}, {instant}))"

    def start_of_day(self, day: str) -> str:
        if self.offset is not None:
            return self._shift(f"CAST({day} AS TIMESTAMP)", "-")
        return f"spark_tz_day({self._z()}, {day})"

    @property
    def injective(self) -> bool:
        """Whether two instants always print differently (no fall-back overlap)."""
        return self.offset is not None


def session_zone(zone: str | None) -> tuple[Zone | None, str | None]:
    """(Zone, None) for a zone the tier serves timestamps in; (None, why not) otherwise."""
    offset, problem = fixed_offset(zone)
    if offset is not None:
        return Zone(zone or "UTC", offset), None
    if zone in NAMED_ZONES:       # spelled exactly as ZoneId.of takes it
        return Zone(zone), None
    return None, problem


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
    return None, (f"timestamps in time zone {zone}, which is neither a fixed UTC offset nor "
                  "a named zone whose rules are checked against Spark's")


def timestamp_literal(text: str) -> str | None:
    """A string Spark casts to a timestamp the same way -> DuckDB literal of its local
    wall-clock time, else None."""
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
