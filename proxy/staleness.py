"""Durations of the freshness contract (docs/freshness.md): how old a datamap's data may
be before the query-time freshness guard must list the base tables' files again.

One grammar wherever a duration is written: `[datamaps] max_staleness` (TOML, env),
`SET datamap.max_staleness = ...` and the JDBC URL's hiveconf part. A number alone is
seconds; `s`, `m`, `h` and `d` are units; quotes around the value are allowed. The value
kept is seconds as a decimal string ("300"), so that the session's settings hold one
spelling however the user wrote it. Pure: no I/O.
"""
from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

MAX_STALENESS_KEY = "datamap.max_staleness"
ACCEPTED = "a duration such as 0, 300 (seconds), 30s, 5m, 1h or 1d"
_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*([smhd]?)", re.IGNORECASE)
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


class BadDuration(ValueError):
    """The message names the value and the accepted forms (42000 where a client sent it)."""


def parse_duration(raw: object, key: str = MAX_STALENESS_KEY) -> str:
    """`raw` (as written, or a TOML number) -> seconds as a decimal string, e.g. "5m" ->
    "300", "1.5s" -> "1.5", "0" -> "0"."""
    if isinstance(raw, bool):
        raise BadDuration(f"Invalid value '{raw}' for {key}: expected {ACCEPTED}")
    text = str(raw).strip().strip("'\"`").strip()
    m = _DURATION.fullmatch(text)
    if m is None:
        raise BadDuration(f"Invalid value '{raw}' for {key}: expected {ACCEPTED}")
    try:
        seconds = Decimal(m.group(1)) * _UNIT_SECONDS[m.group(2).lower()]
    except InvalidOperation:        # not reachable through the pattern; stay a clear error
        raise BadDuration(f"Invalid value '{raw}' for {key}: expected {ACCEPTED}") from None
    return format(seconds.normalize(), "f") if seconds else "0"


def seconds(normalised: str) -> float:
    """A value parse_duration returned -> float seconds."""
    return float(Decimal(normalised))
