"""Value ranges of one column: a union of disjoint intervals over one ordered domain.

Built from `col op literal` conjuncts (=, <, <=, >, >=, IN). Used to prove that a query's
range lies inside a datamap's (Goldstein & Larson's range subsumption). A conjunct whose
literal cannot be compared with the column's type exactly is not a range but a residual.
NULL never satisfies a range predicate, so NULLs need no representation.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from sqlglot import exp

from rewriter import sparktypes

# An interval: (lo, lo_inclusive, hi, hi_inclusive); lo/hi None = unbounded.
Interval = tuple


@dataclass(frozen=True)
class Range:
    intervals: tuple[Interval, ...]   # sorted, disjoint; () = empty

    @staticmethod
    def full() -> "Range":
        return Range(((None, False, None, False),))

    def intersect(self, other: "Range") -> "Range":
        out = []
        for a in self.intervals:
            for b in other.intervals:
                lo, lo_inc = _max_lo((a[0], a[1]), (b[0], b[1]))
                hi, hi_inc = _min_hi((a[2], a[3]), (b[2], b[3]))
                if _nonempty(lo, lo_inc, hi, hi_inc):
                    out.append((lo, lo_inc, hi, hi_inc))
        return Range(tuple(sorted(out, key=_sort_key)))

    def within(self, other: "Range") -> bool:
        """Every value in self is in other."""
        return all(any(_contains(b, a) for b in other.intervals) for a in self.intervals)


def _sort_key(iv):
    lo = iv[0]
    return (lo is not None, lo if lo is not None else 0, not iv[1])


def _max_lo(a, b):
    if a[0] is None:
        return b
    if b[0] is None:
        return a
    if a[0] != b[0]:
        return a if a[0] > b[0] else b
    return (a[0], a[1] and b[1])


def _min_hi(a, b):
    if a[0] is None:
        return b
    if b[0] is None:
        return a
    if a[0] != b[0]:
        return a if a[0] < b[0] else b
    return (a[0], a[1] and b[1])


def _nonempty(lo, lo_inc, hi, hi_inc) -> bool:
    if lo is None or hi is None:
        return True
    return lo < hi or (lo == hi and lo_inc and hi_inc)


def _contains(outer, inner) -> bool:
    olo, olo_inc, ohi, ohi_inc = outer
    ilo, ilo_inc, ihi, ihi_inc = inner
    if olo is not None:
        if ilo is None or ilo < olo or (ilo == olo and ilo_inc and not olo_inc):
            return False
    if ohi is not None:
        if ihi is None or ihi > ohi or (ihi == ohi and ihi_inc and not ohi_inc):
            return False
    return True


def literal_value(e: exp.Expression, column_type: str | None):
    """The comparable Python value of a constant compared with a column of `column_type`,
    or None when the comparison's semantics are not a plain order on that value."""
    t = sparktypes.norm(column_type)
    if t is None:
        return None
    neg = False
    while isinstance(e, (exp.Neg, exp.Paren)):
        if isinstance(e, exp.Neg):
            neg = not neg
        e = e.this
    if sparktypes.is_numeric(t):
        if isinstance(e, exp.Literal) and not e.is_string:
            try:
                v = Decimal(e.this)
            except InvalidOperation:
                return None
            return -v if neg else v
        return None
    if neg:
        return None
    text = None
    if isinstance(e, exp.Literal) and e.is_string:
        text = e.this
    elif isinstance(e, exp.Cast) and isinstance(e.this, exp.Literal) and e.this.is_string:
        target = sparktypes.norm(e.to.sql("spark"))
        if target != t:
            return None
        text = e.this.this
    if text is None:
        return None
    if t == "string":
        return ("s", text) if isinstance(e, exp.Literal) else None
    if t == "date":
        try:
            return ("d", dt.date.fromisoformat(text.strip()))
        except ValueError:
            return None
    if t == "timestamp":
        try:
            return ("t", dt.datetime.fromisoformat(text.strip()))
        except ValueError:
            return None
    return None


def range_of(op: type, value) -> Range | None:
    if op is exp.EQ:
        return Range(((value, True, value, True),))
    if op is exp.GT:
        return Range(((value, False, None, False),))
    if op is exp.GTE:
        return Range(((value, True, None, False),))
    if op is exp.LT:
        return Range(((None, False, value, False),))
    if op is exp.LTE:
        return Range(((None, False, value, True),))
    return None


def points(values) -> Range:
    uniq = sorted(set(values))
    return Range(tuple((v, True, v, True) for v in uniq))
