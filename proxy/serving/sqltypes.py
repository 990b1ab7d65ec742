"""Types of the serving tier's translation (pure): the Spark types it serves and their
DuckDB spelling, Spark's decimal rules, literals, and NotServable. Used by
proxy/serving/expressions.py and translate.py."""
from __future__ import annotations

import re
from datetime import date

from sqlglot import exp

from rewriter.sparktypes import INTEGRAL, decimal_of, norm

TYPES = ("boolean", "tinyint", "smallint", "int", "bigint", "double", "decimal", "string",
         "date", "timestamp (in a fixed-offset or a checked named session time zone)")
DUCK = {"boolean": "BOOLEAN", "tinyint": "TINYINT", "smallint": "SMALLINT", "int": "INTEGER",
         "bigint": "BIGINT", "double": "DOUBLE", "string": "VARCHAR", "date": "DATE",
         "timestamp": "TIMESTAMP"}
# A stored column outside TYPES is left out of the read; its type is this prefix and the
# reason, and the query is NotServable only if it uses the column.
UNSERVED = "!"
DEC = re.compile(r"^decimal\((\d+),(\d+)\)$")
DATE_LITERAL = re.compile(r"^\d{4}-\d{2}-\d{2}$")
INT_MAX = 2**31 - 1
BIGINT_MAX = 2**63 - 1

# What the tier evaluates; docs/serving.md lists it for users. Keep the two in step.


class NotServable(Exception):
    """The query is outside the allow-list; the message says what (EXPLAIN shows it)."""


def q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def lit(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def duck_type(spark_type: str) -> str:
    m = DEC.match(spark_type)
    if m:
        return f"DECIMAL({m.group(1)},{m.group(2)})"
    return DUCK[spark_type]


def spark_type(t: str | None) -> str:
    t = norm(t)
    if not t:
        raise NotServable("a column of unknown type")
    if DEC.match(t):
        p, s = map(int, DEC.match(t).groups())
        if p > 38:
            raise NotServable(f"type {t}")
        return t
    if t not in DUCK:
        raise NotServable(f"type {t} is not served locally")
    return t


def dec(t: str) -> tuple[int, int] | None:
    """decimal(p,s) of a decimal or integral type (Spark's widening of integers)."""
    if t in INTEGRAL or DEC.match(t):
        return decimal_of(t)
    return None


def is_num(t: str) -> bool:
    return t in INTEGRAL or t == "double" or bool(DEC.match(t))


INT_ORDER = ("tinyint", "smallint", "int", "bigint")


def common(types, what: str) -> str:
    """The one type of CASE branches / COALESCE / IF / greatest arguments, by Spark's wider-
    type rule: equal types; integral types widened to the widest; integral and decimal types
    to the decimal holding the most integer digits and the largest scale of any (an int as
    decimal(10,0), a bigint as decimal(20,0)); integral types and double to double. A
    decimal over 38 digits (Spark would drop digits to fit), a decimal with a double, and
    anything else -> Spark."""
    known = {t for t in types if t is not None}
    if len(known) > 1 and known <= set(INT_ORDER):
        return max(known, key=INT_ORDER.index)
    if len(known) > 1 and all(dec(t) is not None for t in known):
        parts = [dec(t) for t in known]
        scale = max(s for _, s in parts)
        digits = max(p - s for p, s in parts) + scale
        if digits > 38:
            raise NotServable(f"{what} over {sorted(known)}: their common decimal type "
                              "needs over 38 digits")
        return f"decimal({digits},{scale})"
    if len(known) > 1 and "double" in known and known - {"double"} <= set(INT_ORDER):
        return "double"
    if len(known) != 1:
        raise NotServable(f"{what} over values of types {sorted(known) or ['NULL']}")
    return known.pop()


def fits_one_decimal(types: list[str]) -> None:
    """Values compared with a decimal meet in one decimal type. Spark's wider type is
    bounded to 38 digits and still answers; DuckDB's cast to it fails (decimal(38,10) vs
    a 29-digit literal): a comparison whose exact common type needs more than 38 digits
    goes to Spark."""
    if not any(DEC.match(t) for t in types):
        return
    parts = [dec(t) for t in types if dec(t) is not None]
    if max(p - s for p, s in parts) + max(s for _, s in parts) > 38:
        raise NotServable("a comparison of decimals whose common type needs over 38 digits")


def dec_operand(e: exp.Expression, t: str) -> tuple[int, int]:
    """Spark's decimal view of an operand: an integer literal takes its own digits
    (DecimalPrecision's literal rule; `-3` is one literal in Spark too), an integral
    column its type's."""
    text = int_literal(e)
    if text is not None:
        return max(1, len(text.lstrip("-").lstrip("0") or "0")), 0
    d = dec(t)
    if d is None:
        raise NotServable(f"decimal arithmetic with {t}")
    return d


def int_literal(e: exp.Expression) -> str | None:
    """The text of an integer literal, `-` included when Spark's parser takes it in
    (`-3`, not `-(3)`); None for anything else."""
    if isinstance(e, exp.Literal) and not e.is_string and e.this.isdigit():
        return e.this
    if isinstance(e, exp.Neg) and isinstance(e.this, exp.Literal) \
            and not e.this.is_string and e.this.this.isdigit():
        return "-" + e.this.this
    return None


def decimal_div_type(p1: int, s1: int, p2: int, s2: int) -> tuple[int, int]:
    """Spark's decimal division result type (DecimalPrecision, allowPrecisionLoss=true)."""
    s = max(6, s1 + p2 + 1)
    p = p1 - s1 + s2 + s
    if p <= 38:
        return p, s
    int_digits = p - s
    return 38, max(38 - int_digits, min(s, 6))


def date_literal(e: exp.Expression) -> str:
    if not (isinstance(e, exp.Literal) and e.is_string and DATE_LITERAL.match(e.this)):
        raise NotServable("a date compared with a string that is not a 'YYYY-MM-DD' literal")
    try:
        date.fromisoformat(e.this)
    except ValueError:
        raise NotServable(f"date literal {e.this!r}") from None
    return f"DATE {lit(e.this)}"


def short(e: exp.Expression) -> str:
    text = e.sql("spark")
    return text if len(text) <= 60 else text[:57] + "..."


def limit_sql(limit: exp.Limit) -> str:
    n = limit.expression
    if not (isinstance(n, exp.Literal) and not n.is_string and n.this.isdigit()) \
            or limit.args.get("offset"):
        raise NotServable("LIMIT other than a whole number")
    if int(n.this) > INT_MAX:
        raise NotServable("LIMIT over the int range (Spark raises)")
    return f"LIMIT {int(n.this)}"
