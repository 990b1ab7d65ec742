"""Pure parts of a datamap audit (auditor.py): which query is audited, its
digest, and whether two answers are the same.

Two answers are the same when their column names and types are, and their rows are equal
as multisets (order never matters): exactly, except `double` and `float` values, which
may differ by a relative 1e-9 (REL_TOL; ABS_TOL near zero), since a sum of doubles depends
on the order it is added in, and a datamap adds partial sums in another order than a
scan of the base tables does. Decimals, integers, strings, dates and timestamps are exact.
NaN equals NaN, -0.0 equals 0.0.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import math
from collections import defaultdict
from dataclasses import dataclass
from decimal import Decimal
from typing import Sequence

REL_TOL = 1e-9
ABS_TOL = 1e-12
_FLOATING = ("double", "float")
# Functions whose value differs between two runs of the same query: such a query is not
# audited (two runs never need to agree).
_VOLATILE = frozenset({"rand", "random", "randn", "uuid", "shuffle", "current_timestamp",
                       "now", "current_date", "localtimestamp", "unix_timestamp",
                       "monotonically_increasing_id", "spark_partition_id",
                       "input_file_name", "curdate", "current_time", "first", "last",
                       "first_value", "last_value", "any_value", "collect_list",
                       "array_agg"})


class NotAuditable(Exception):
    """The query's answer is not a function of the tables' rows (a LIMIT inside it,
    rand(), ...): two correct runs may differ, so it is not audited."""


def digest(text: str) -> str:
    """First 12 hex digits of sha256 of the query with its blanks collapsed and keywords,
    names and spacing normalised by sqlglot when it parses."""
    return hashlib.sha256(normalised(text).encode()).hexdigest()[:12]


def normalised(text: str) -> str:
    import sqlglot
    try:
        return sqlglot.parse_one(text, read="spark").sql("spark", normalize=True)
    except Exception:  # noqa: BLE001 - unparseable text is still a query the client sent
        return " ".join(text.split())


def audited_form(statement: str) -> str:
    """The query an audit runs: the statement without its outermost LIMIT / OFFSET (with
    ties, two correct runs may keep different rows; without it, every row is compared).
    Raises NotAuditable for queries whose answer may change between runs."""
    import sqlglot
    from sqlglot import exp
    try:
        tree = sqlglot.parse_one(statement, read="spark")
    except Exception as e:  # noqa: BLE001
        raise NotAuditable(f"the query does not parse ({type(e).__name__})") from None
    for node in tree.find_all(exp.Func):
        name = (node.sql_name() if not isinstance(node, exp.Anonymous) else node.name).lower()
        if name in _VOLATILE or isinstance(node, (exp.Rand, exp.Randn)):
            raise NotAuditable(f"the query calls {name}(), which differs between runs")
    if tree.find(exp.TableSample):
        raise NotAuditable("the query samples a table (TABLESAMPLE)")
    for key in ("limit", "offset"):
        if tree.args.get(key) is not None:
            tree.set(key, None)
    if tree.find(exp.Limit, exp.Offset):
        raise NotAuditable("the query has a LIMIT inside it")
    if tree.find(exp.RowNumber):
        raise NotAuditable("the query numbers rows (row_number()), which ties make differ "
                           "between runs")
    return tree.sql("spark")


@dataclass(frozen=True)
class Difference:
    """Why two answers are not the same, in one line for the history and the result set."""
    text: str


def _typed(value, spark_type: str):
    """A value as its Spark type reads in Python: the in-process engine may hand some back
    as text (a decimal division, a timestamp), Spark never does."""
    if not isinstance(value, str):
        return value
    t = spark_type.lower()
    try:
        if t.startswith("decimal"):
            return Decimal(value)
        if t == "timestamp":
            return dt.datetime.fromisoformat(value)
        if t == "date":
            return dt.date.fromisoformat(value)
        if t in ("tinyint", "smallint", "int", "bigint"):
            return int(value)
    except ValueError:
        pass
    return value


def _exact(value, floating: bool):
    """The value's exact part: a hashable stand-in, None for a floating value."""
    if floating:
        return None
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat(sep=" ") if isinstance(value, dt.datetime) else value.isoformat()
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, (list, dict)):
        return repr(value)
    return value


def _float_key(value) -> tuple:
    if value is None:
        return (0, 0.0)
    f = float(value)
    return (1, 0.0) if math.isnan(f) else (2, f)


def _close(a, b) -> bool:
    if a is None or b is None:
        return a is b
    fa, fb = float(a), float(b)
    if math.isnan(fa) or math.isnan(fb):
        return math.isnan(fa) and math.isnan(fb)
    return math.isclose(fa, fb, rel_tol=REL_TOL, abs_tol=ABS_TOL)


def _rows_close(a: tuple, b: tuple) -> bool:
    return all(_close(x, y) for x, y in zip(a, b))


def _split(rows, floating: Sequence[bool]):
    groups: dict[tuple, list[tuple]] = defaultdict(list)
    for row in rows:
        key = tuple(_exact(v, f) for v, f in zip(row, floating))
        groups[key].append(tuple(v for v, f in zip(row, floating) if f))
    return groups


def _groups_match(a: list[tuple], b: list[tuple]) -> bool:
    if len(a) != len(b):
        return False
    sa = sorted(a, key=lambda r: tuple(_float_key(v) for v in r))
    sb = sorted(b, key=lambda r: tuple(_float_key(v) for v in r))
    if all(_rows_close(x, y) for x, y in zip(sa, sb)):
        return True
    left = list(sb)                # sorted pairing can cross near-ties: match greedily
    for row in sa:
        hit = next((i for i, other in enumerate(left) if _rows_close(row, other)), None)
        if hit is None:
            return False
        left.pop(hit)
    return True


def _show(row) -> str:
    text = "(" + ", ".join("NULL" if v is None else repr(v) if isinstance(v, str)
                           else str(v) for v in row) + ")"
    return text if len(text) <= 200 else text[:197] + "..."


def compare(columns_a, rows_a, columns_b, rows_b, what_a: str = "base tables",
            what_b: str = "datamap") -> Difference | None:
    """None when the two answers are the same (module docstring), else the difference."""
    if [c.lower() for c, _ in columns_a] != [c.lower() for c, _ in columns_b]:
        return Difference(f"column names differ: {what_a} {[c for c, _ in columns_a]}, "
                          f"{what_b} {[c for c, _ in columns_b]}")
    types_a, types_b = [t for _, t in columns_a], [t for _, t in columns_b]
    if types_a != types_b:
        return Difference(f"column types differ: {what_a} {types_a}, {what_b} {types_b}")
    floating = [t.lower() in _FLOATING for t in types_a]
    rows_a = [tuple(_typed(v, t) for v, t in zip(r, types_a)) for r in rows_a]
    rows_b = [tuple(_typed(v, t) for v, t in zip(r, types_a)) for r in rows_b]
    ga, gb = _split(rows_a, floating), _split(rows_b, floating)
    only_a = [k for k in ga if k not in gb or not _groups_match(ga[k], gb[k])]
    only_b = [k for k in gb if k not in ga]
    if not only_a and not only_b:
        return None
    head = f"{len(rows_a)} rows from the {what_a}, {len(rows_b)} from the {what_b}"
    sample = []
    for k in only_a[:2]:
        theirs = (f"{what_b} has {_show(_join(k, gb[k][0], floating))} x{len(gb[k])}"
                  if gb.get(k) else f"{what_b} none")
        sample.append(f"{what_a} has {_show(_join(k, ga[k][0], floating))} x{len(ga[k])}, "
                      + theirs)
    for k in only_b[:2]:
        sample.append(f"{what_b} has {_show(_join(k, gb[k][0], floating))} x{len(gb[k])}, "
                      f"{what_a} none")
    return Difference(f"{head}; " + "; ".join(sample))


def _join(exact: tuple, floats: tuple, floating: Sequence[bool]) -> tuple:
    it = iter(floats)
    return tuple(next(it, None) if f else v for v, f in zip(exact, floating))

