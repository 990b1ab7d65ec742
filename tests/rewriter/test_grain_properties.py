"""Property tests of BI time grains (rewriter/grains.py): a random grain expression of a DATE
column, grouped (and maybe filtered on the raw column) over a datamap that stores a random
bucket of it.

The oracle is calendar arithmetic in Python, independent of the rewriter: a grain is
answerable from a stored bucket when it takes the same value on every day of each bucket
(checked day by day over four years). The rewriter must never hit where the oracle says a
bucket mixes grain values, nor read a date filter off a bucket it is not aligned on;
and for these shapes (all claimed by grains.py) it must hit whenever the oracle allows.
The Spark tier runs a sample of the hits, original vs rewritten.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rewriter as core
from tests.support.rewriter_cases import SCHEMA

STORED = ("day", "week", "month", "year")
DATAMAP = ("SELECT segment, timeseries(visit_date, '{g}') AS b, sum(revenue) AS r, "
           "count(*) AS n FROM visits GROUP BY segment, timeseries(visit_date, '{g}')")


def _dow(d: date) -> int:
    """Spark's dayofweek: 1 = Sunday .. 7 = Saturday."""
    return d.isoweekday() % 7 + 1


def _monday(d: date) -> date:
    return d - timedelta(days=d.weekday())


def _quarter(d: date) -> int:
    return (d.month - 1) // 3 + 1


@dataclass(frozen=True)
class Grain:
    sql: str                         # {d} is the column
    key: Callable[[date], object]    # a value equal exactly when Spark's values are equal


def _grains() -> list[Grain]:
    return [
        Grain("date_trunc('YEAR', CAST({d} AS TIMESTAMP))", lambda d: d.year),
        Grain("date_trunc('QUARTER', CAST({d} AS TIMESTAMP))", lambda d: (d.year, _quarter(d))),
        Grain("date_trunc('MONTH', {d})", lambda d: (d.year, d.month)),
        Grain("date_trunc('WEEK', {d})", _monday),
        Grain("trunc({d}, 'MM')", lambda d: (d.year, d.month)),
        Grain("trunc({d}, 'WEEK')", _monday),
        Grain("year({d})", lambda d: d.year),
        Grain("quarter({d})", _quarter),
        Grain("month({d})", lambda d: d.month),
        Grain("dayofmonth({d})", lambda d: d.day),
        Grain("dayofweek({d})", _dow),
        Grain("weekofyear({d})", lambda d: d.isocalendar()[1]),
        Grain("EXTRACT(YEAR FROM {d})", lambda d: d.year),
        Grain("EXTRACT(WEEK FROM {d})", lambda d: d.isocalendar()[1]),
        Grain("date_format({d}, 'yyyy-MM')", lambda d: (d.year, d.month)),
        Grain("date_format({d}, 'yyyy')", lambda d: d.year),
        Grain("from_unixtime(unix_timestamp({d}), 'yyyy-MM-01 00:00:00')",
              lambda d: (d.year, d.month)),
        Grain("CONCAT(year({d}), '-Q', quarter({d}))", lambda d: (d.year, _quarter(d))),
        Grain("make_date(year({d}), month({d}), 1)", lambda d: (d.year, d.month)),
        Grain("CASE WHEN month({d}) <= 6 THEN 'H1' ELSE 'H2' END", lambda d: d.month <= 6),
        Grain("{d}", lambda d: d),
        # weekday-offset week starts: Monday weeks roll up from weeks, others only from days
        *(Grain(f"date_sub({{d}}, dayofweek({{d}}) - {k})",
                lambda d, k=k: d - timedelta(days=_dow(d) - k)) for k in (1, 2, 3)),
        *(Grain(f"date_add({{d}}, -((dayofweek({{d}}) + {m}) % 7))",
                lambda d, m=m: d - timedelta(days=(_dow(d) + m) % 7)) for m in range(7)),
        *(Grain(f"date_sub({{d}}, pmod(dayofweek({{d}}) - {k}, 7))",
                lambda d, k=k: d - timedelta(days=(_dow(d) - k) % 7)) for k in (1, 2, 5)),
        # not a week start at all: constant on days only
        Grain("date_sub({d}, dayofweek({d}) % 3)", lambda d: d - timedelta(days=_dow(d) % 3)),
    ]


GRAINS = _grains()


def _start(d: date, gran: str) -> date:
    return {"day": d, "week": _monday(d), "month": d.replace(day=1),
            "year": d.replace(month=1, day=1)}[gran]


DAYS = [date(2023, 1, 1) + timedelta(days=i) for i in range(4 * 365 + 1)]


@functools.lru_cache(maxsize=None)
def answerable(i: int, gran: str) -> bool:
    """The oracle: grain i takes one value on every `gran` bucket."""
    key = GRAINS[i].key
    return all(key(d) == key(_start(d, gran)) for d in DAYS)


@functools.lru_cache(maxsize=None)
def _candidate(gran: str):
    return core.Candidate(core.compile_datamap(f"g_{gran}", DATAMAP.format(g=gran), SCHEMA,
                                               "default"))


@st.composite
def grain_queries(draw):
    i = draw(st.integers(0, len(GRAINS) - 1))
    gran = draw(st.sampled_from(STORED))
    expr = GRAINS[i].sql.format(d="visit_date")
    bound = None
    where = ""
    if draw(st.booleans()):
        bound = draw(st.sampled_from(DAYS[300:1200]))
        op = draw(st.sampled_from([">=", "<", "<=", ">"]))
        where = f" WHERE visit_date {op} DATE '{bound.isoformat()}'"
        if op in ("<=", ">"):             # on a DATE: < / >= the next day
            bound += timedelta(days=1)
    sql = f"SELECT {expr} AS g, sum(revenue) AS rev, count(*) AS n FROM visits{where} GROUP BY {expr}"
    return i, gran, bound, sql


def _aligned(bound: date | None, gran: str) -> bool:
    return bound is None or gran == "day" or _start(bound, gran) == bound


@settings(max_examples=150, deadline=None, derandomize=True)
@given(grain_queries())
def test_a_grain_hits_only_when_every_bucket_has_one_value(q):
    i, gran, bound, sql = q
    result = core.rewrite(sql, [_candidate(gran)], SCHEMA, "default")
    ok = answerable(i, gran) and _aligned(bound, gran)
    if result.rewritten:
        assert ok, f"{sql}\n  from a {gran} bucket: {result.sql}"
    elif ok:
        pytest.fail(f"{sql}\n  answerable from a {gran} bucket, refused: {result.skipped}")


def test_the_oracle_knows_its_weeks():
    """Guards the oracle itself: Monday weeks roll up from weeks, Sunday weeks do not."""
    monday = next(i for i, g in enumerate(GRAINS) if "+ 5) % 7" in g.sql)
    sunday = next(i for i, g in enumerate(GRAINS) if g.sql.endswith("- 1)"))
    assert answerable(monday, "week") and not answerable(sunday, "week")
    assert answerable(sunday, "day") and not answerable(monday, "month")


# --- Spark tier: a sample of the hits, original vs rewritten -----------------------------------

@pytest.fixture(scope="module")
def materialised(spark, schemas):
    from tests.support.spark_tier import Materialiser
    m = Materialiser(spark, schemas)
    out = {g: m.full(core.compile_datamap(f"gp_{g}", DATAMAP.format(g=g), schemas, "default"))
           for g in STORED}
    yield out
    m.drop_all()


@pytest.mark.spark
@settings(max_examples=20, deadline=None, derandomize=True)
@given(q=grain_queries())
def test_grain_rewrites_return_the_same_rows(q, spark, schemas, materialised):
    from tests.support.spark_tier import compare
    i, gran, bound, sql = q
    result = core.rewrite(sql, [materialised[gran]], schemas, "default")
    if not result.rewritten:
        return
    outcome = compare(spark, sql, result.sql, schemas, "default")
    assert not outcome.problems, f"from a {gran} bucket\n{outcome.report()}"
