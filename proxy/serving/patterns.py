"""Spark datetime patterns (Spark 3+/4, java.time based: sql-ref-datetime-pattern) -> DuckDB
SQL that prints or parses exactly as Spark does, or NotServable. Pure.

Formatting (date_format, from_unixtime) is written out field by field rather than handed
to strftime, whose padding, names and 12-hour clock are C's: each letter of FORMAT below
was compared with Spark over edge values (tests/proxy/serving/test_patterns_spark.py).
Spark 4 rejects week-based letters (Y w W u e c), counts it does not know (MMMMM, ddd,
EEEEE, aa, ...), and '#', '{', '}': such a pattern raises in Spark, so here it is
NotServable and Spark raises its own error. Zone letters (z Z X x O V), eras, standalone
forms and optional sections are refused too: not proven.

Years: Spark prints a year outside 1..9999 with a sign ('+10000', '-0044'); the served
text is raised as an error there, so the query goes to Spark.

Parsing (to_date, to_timestamp, unix_timestamp of a string) is served for numeric
patterns only: a year (yyyy, yy; the year 0 raises), and optionally month, day, hour, minute, second and a
fraction, each present only with the one before it (in any order: dd/MM/yyyy), with
literal text between. The
pattern becomes an anchored regular expression; text it does not match raises, and so do
out-of-range fields. Spark with ANSI on (the engine's setting; sessions that change it
are not served) raises on such text too, and where it is more lenient than the
expression (a lower-case literal, say), the error sends the query to Spark, which answers.
"""
from __future__ import annotations

from typing import NamedTuple, Union

from proxy.serving.sqltypes import NotServable, lit


class Field(NamedTuple):
    letter: str
    count: int


Token = Union[str, Field]

# letter -> the counts Spark accepts and the tier prints as Spark does
FORMAT = {
    "y": (1, 2, 3, 4), "M": (1, 2, 3, 4), "d": (1, 2), "D": (1, 2, 3), "Q": (1, 2, 3, 4),
    "E": (1, 2, 3, 4), "a": (1,), "H": (1, 2), "h": (1, 2), "k": (1, 2), "K": (1, 2),
    "m": (1, 2), "s": (1, 2), "S": tuple(range(1, 10)),
}
# Spark 4 raises on these (SparkUpgradeException / INVALID_DATETIME_PATTERN)
_REJECTED = {"Y": "week-based year", "w": "week of week-based year", "W": "week of month",
             "u": "day number of week", "e": "localized day of week",
             "c": "localized day of week"}
_RESERVED = "#{}"
_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December"]
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
_QUARTERS = ["1st quarter", "2nd quarter", "3rd quarter", "4th quarter"]


def lex(pattern: str) -> list[Token]:
    """Spark's reading of a pattern: fields and literal text ('quoted', '' is a quote)."""
    out: list[Token] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "'":
            # java.time's reading: up to the next lone quote, '' inside standing for one;
            # an empty section ('') is a quote
            j = i + 1
            while j < n:
                if pattern[j] == "'":
                    if j + 1 < n and pattern[j + 1] == "'":
                        j += 2
                        continue
                    break
                j += 1
            if j >= n:
                raise NotServable(f"datetime pattern {pattern!r}: unterminated quote")
            text = pattern[i + 1:j]
            out.append(text.replace("''", "'") if text else "'")
            i = j + 1
        elif c.isascii() and c.isalpha():
            j = i
            while j < n and pattern[j] == c:
                j += 1
            out.append(Field(c, j - i))
            i = j
        elif c in _RESERVED or c in "[]":
            raise NotServable(f"datetime pattern {pattern!r}: {c!r} (reserved, or an "
                              "optional section)")
        else:
            out.append(c)
            i += 1
    return out


def _check(pattern: str, f: Field, allowed: dict) -> None:
    if f.letter in _REJECTED:
        raise NotServable(f"datetime pattern {pattern!r}: {f.letter!r} "
                          f"({_REJECTED[f.letter]}: Spark 4 rejects it)")
    if f.letter not in allowed:
        raise NotServable(f"datetime pattern {pattern!r}: letter {f.letter!r} is not served")
    if f.count not in allowed[f.letter]:
        raise NotServable(f"datetime pattern {pattern!r}: {f.letter * f.count!r} is not "
                          "served")


def _pad(value: str, width: int) -> str:
    return f"CAST({value} AS VARCHAR)" if width == 1 else f"printf('%0{width}d', {value})"


def _names(names: list[str], index: str) -> str:
    return f"[{', '.join(lit(x) for x in names)}][{index}]"


def _field_sql(f: Field, t: str) -> str:
    letter, n = f
    if letter == "y":
        return _pad(f"(year({t}) % 100)", 2) if n == 2 else _pad(f"year({t})", n)
    if letter == "M":
        if n == 3:
            return _names([m[:3] for m in _MONTHS], f"month({t})")
        return _names(_MONTHS, f"month({t})") if n == 4 else _pad(f"month({t})", n)
    if letter == "Q":
        if n == 3:
            return f"('Q' || CAST(quarter({t}) AS VARCHAR))"
        return _names(_QUARTERS, f"quarter({t})") if n == 4 else _pad(f"quarter({t})", n)
    if letter == "E":
        return _names(_DAYS if n == 4 else [d[:3] for d in _DAYS], f"isodow({t})")
    if letter == "a":
        return f"(CASE WHEN hour({t}) < 12 THEN 'AM' ELSE 'PM' END)"
    if letter == "S":
        micros = f"printf('%06d', microsecond({t}) % 1000000)"
        return f"substr({micros} || '000', 1, {n})"
    value = {"d": f"day({t})", "D": f"dayofyear({t})", "H": f"hour({t})",
             "h": f"((hour({t}) + 11) % 12 + 1)", "k": f"((hour({t}) + 23) % 24 + 1)",
             "K": f"(hour({t}) % 12)", "m": f"minute({t})", "s": f"second({t})"}[letter]
    return _pad(value, n)


# fields strftime prints as Spark does for a year in 1..9999: zero-padded numbers
# (DuckDB's %Y pads the year to 4 digits, as yyyy does there)
_STRFTIME = {Field("y", 4): "%Y", Field("M", 2): "%m", Field("d", 2): "%d",
             Field("H", 2): "%H", Field("m", 2): "%M", Field("s", 2): "%S"}


def _strftime(tokens: list[Token], t: str) -> str | None:
    """strftime of `t` when every field of the pattern is one of _STRFTIME (one call
    instead of a printf per field: the Hive grains' patterns); None otherwise."""
    if not any(isinstance(tok, Field) for tok in tokens):
        return None
    out = []
    for tok in tokens:
        if isinstance(tok, Field):
            if tok not in _STRFTIME:
                return None
            out.append(_STRFTIME[tok])
        else:
            out.append(tok.replace("%", "%%"))
    return f"strftime({t}, {lit(''.join(out))})"


_CHAIN = "yMdHms"          # the fields of _STRFTIME, coarsest first
_UNITS = ("year", "month", "day", "hour", "minute", "second")


def grain_unit(pattern: str) -> str | None:
    """The date_trunc unit at which `pattern` tells values apart, when it prints by one
    strftime (_STRFTIME: numbers of fixed width in years 1..9999) the year, then the month,
    day, hour, minute, second down to that unit, each once (in any order, any literal text
    between): two values print alike exactly when they are equal truncated to that unit.
    None for any other pattern. The Hive grains' patterns are such ('yyyy-MM-dd HH:00:00':
    hour)."""
    fields = [tok for tok in lex(pattern) if isinstance(tok, Field)]
    if not fields or any(f not in _STRFTIME for f in fields):
        return None
    letters = sorted((f.letter for f in fields), key=_CHAIN.index)
    if "".join(letters) != _CHAIN[:len(letters)]:
        return None
    return _UNITS[len(letters) - 1]


def format_sql(pattern: str, t: str, in_years: bool = False) -> str:
    """DuckDB text of the local wall-clock TIMESTAMP `t` as Spark prints it with `pattern`;
    NULL for NULL; an error for a year outside 1..9999. `in_years`: `t` is known to be in
    years 1..9999 (the local midnight of a date that dates.in_range checked), so the check,
    which writes `t` out once more, is left out."""
    parts = []
    tokens = lex(pattern)
    for tok in tokens:
        if isinstance(tok, Field):
            _check(pattern, tok, FORMAT)
            parts.append(_field_sql(tok, t))
        else:
            parts.append(lit(tok))
    signed = "error('a year outside 1..9999: Spark prints it signed')"
    fast = _strftime(tokens, t)
    if fast and in_years:
        return f"({fast})"          # strftime of NULL is NULL
    if fast:
        # `t` twice, not four times (a nested argument is written out once per use): a
        # NULL's year is NULL, so the ELSE's strftime of NULL answers NULL
        return f"(CASE WHEN NOT year({t}) BETWEEN 1 AND 9999 THEN {signed} ELSE {fast} END)"
    text = " || ".join(parts) if parts else "''"
    if in_years:        # literal text and a / E print something for NULL: NULL first
        return f"(CASE WHEN {t} IS NULL THEN NULL ELSE {text} END)"
    return (f"(CASE WHEN {t} IS NULL THEN NULL WHEN year({t}) < 1 OR year({t}) > 9999 THEN "
            f"{signed} ELSE {text} END)")


# parsing: letter -> (counts served, the regular expression of each count)
_PARSE = {
    "y": {4: r"(\d{4})", 2: r"(\d{2})"}, "M": {1: r"(\d{1,2})", 2: r"(\d{2})"},
    "d": {1: r"(\d{1,2})", 2: r"(\d{2})"}, "H": {1: r"(\d{1,2})", 2: r"(\d{2})"},
    "m": {1: r"(\d{1,2})", 2: r"(\d{2})"}, "s": {1: r"(\d{1,2})", 2: r"(\d{2})"},
    # a fraction of up to n digits (java.time's variable-width fraction)
    "S": {3: r"(\d{1,3})", 6: r"(\d{1,6})"},
}
_CHAIN = "yMdHmsS"
_RE_SPECIAL = set("\\.^$|?*+()[]{}")


def _escape(text: str) -> str:
    return "".join("\\" + c if c in _RE_SPECIAL else c for c in text)


def parse_sql(pattern: str, s: str) -> str:
    """DuckDB TIMESTAMP (local wall-clock time) of the string `s` parsed as Spark parses it
    with `pattern`; NULL for NULL; an error for text Spark would not parse the same way."""
    regex, fields = "", []
    for tok in lex(pattern):
        if isinstance(tok, Field):
            _check(pattern, tok, {k: tuple(v) for k, v in _PARSE.items()})
            if tok.letter in (f.letter for f in fields):
                raise NotServable(f"datetime pattern {pattern!r}: {tok.letter!r} twice")
            if fields and regex.endswith(")") and (tok.count != 2 or fields[-1].count == 1
                                                   or tok.letter == "S"):
                # adjacent numbers of varying width: java.time's adjacent-value parsing
                raise NotServable(f"datetime pattern {pattern!r}: adjacent fields of "
                                  "varying width")
            regex += _PARSE[tok.letter][tok.count]
            fields.append(tok)
        else:
            regex += _escape(tok)
    letters = sorted((f.letter for f in fields), key=_CHAIN.index)
    if not letters or "".join(letters) != _CHAIN[:len(letters)]:
        # (without a year Spark reads 1970, and ignores a month without a day's year...)
        raise NotServable(f"datetime pattern {pattern!r}: parsed only with a year, and "
                          "each of month, day, hour, minute, second, fraction only with "
                          "the one before it")
    anchored = lit("^" + regex + "$")
    g = {f.letter: f"regexp_extract({s}, {anchored}, {i})" for i, f in enumerate(fields, 1)}
    num = {k: f"CAST({v} AS INTEGER)" for k, v in g.items()}
    two_digit = any(f.letter == "y" and f.count == 2 for f in fields)
    year = f"(2000 + {num['y']})" if two_digit else num["y"]
    month, day = num.get("M", "1"), num.get("d", "1")
    hour, minute, second = num.get("H", "0"), num.get("m", "0"), num.get("s", "0")
    frac = f"CAST(rpad({g['S']}, 6, '0') AS BIGINT)" if "S" in g else "0"
    micros = (f"(CAST({hour} AS BIGINT) * 3600000000 + CAST({minute} AS BIGINT) * 60000000 "
              f"+ CAST({second} AS BIGINT) * 1000000 + {frac})")
    # make_date raises on a day the month lacks (Feb 30), as Spark does
    return (f"(CASE WHEN {s} IS NULL THEN NULL "
            f"WHEN NOT regexp_full_match({s}, {lit(regex)}) "
            f"OR {year} < 1 OR {hour} > 23 OR {minute} > 59 OR {second} > 59 "
            f"THEN error('text does not match the datetime pattern: Spark answers') "
            f"ELSE CAST(make_date({year}, {month}, {day}) AS TIMESTAMP) "
            f"+ to_microseconds({micros}) END)")
