"""The random aggregate queries of the property tests (tests/rewriter/test_properties.py and
the tests that reuse its pool): hypothesis profiles, a seeded pool of random datamaps
(DatamapSpec) and the `queries` strategy over them.

Profiles: `ci` (default, 200 examples), `quick` (25) and `deep` (HYPOTHESIS_PROFILE=deep:
2000 examples, a bigger datamap pool).
"""
from __future__ import annotations

import os
import random
import re
from dataclasses import dataclass, field

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st

from rewriter.timeseries import GRANULARITIES, is_rollup

settings.register_profile(
    "ci", max_examples=200, deadline=None, derandomize=True, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                           HealthCheck.filter_too_much])
settings.register_profile(
    "deep", max_examples=2000, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                           HealthCheck.filter_too_much])
settings.register_profile("quick", settings.get_profile("ci"), max_examples=25)
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
settings.load_profile(PROFILE)
POOL_SIZE = 36 if PROFILE == "deep" else 14
POOL_SEED = int(os.environ.get("REWRITER_POOL_SEED", "7"))


# --- the shapes: tables, joins and their columns ----------------------------------------------

@dataclass(frozen=True)
class Shape:
    from_sql: str
    dims: dict[str, list[str]]       # grouping column -> literal values for filters
    measures: dict[str, str]         # measure column -> kind: "int" | "dec" | "dbl"
    times: dict[str, str]            # time column -> "timestamp" | "date"
    ranges: dict[str, tuple[int, int]] = field(default_factory=dict)  # numeric dims


COUNTRY = ["'china'", "'usa'", "'india'", "'UK'", "''"]
CITY = ["'beijing'", "'ny'", "'la'", "'paris'", "'Paris'"]
SALES_DIMS = {"s.country": COUNTRY, "s.city": CITY, "s.sex": ["'m'", "'f'"],
              "s.year": ["2026", "2025"], "s.month": ["3", "4", "12"],
              "s.store_id": ["1", "2", "13"], "s.item_id": ["1", "3", "55"]}
SALES_MEAS = {"s.quantity": "int", "s.price": "dec", "s.discount": "dbl", "s.id": "int"}
SALES_TIME = {"s.ts": "timestamp", "s.day": "date"}
SALES_RANGES = {"s.month": (1, 12), "s.store_id": (0, 15), "s.item_id": (0, 58),
                "s.year": (2024, 2027)}

SHAPES = [
    Shape("default.sales s", SALES_DIMS, SALES_MEAS, SALES_TIME, SALES_RANGES),
    Shape("default.sales s JOIN default.item i ON s.item_id = i.item_id",
          {**SALES_DIMS, "i.category": ["'food'", "'toys'"], "i.brand": ["'acme'", "'zeta'"]},
          {**SALES_MEAS, "i.weight": "dbl"}, SALES_TIME, SALES_RANGES),
    Shape("default.sales s JOIN default.store st ON s.store_id = st.store_id",
          {**SALES_DIMS, "st.region": ["'north'", "'south'"], "st.store_name": ["'store1'"]},
          {**SALES_MEAS, "st.size": "int"}, SALES_TIME, {**SALES_RANGES}),
    Shape("default.sales s JOIN default.item i ON s.item_id = i.item_id "
          "JOIN default.store st ON s.store_id = st.store_id",
          {**SALES_DIMS, "i.category": ["'food'", "'books'"], "st.region": ["'north'", "'east'"]},
          {**SALES_MEAS, "i.weight": "dbl", "st.size": "int"}, SALES_TIME, SALES_RANGES),
    Shape("default.events e",
          {"e.user_id": ["1", "-3", "7"], "e.kind": ["'click'", "'buy'"],
           "e.event_date": ["DATE'2026-03-30'", "DATE'2026-04-01'"]},
          {"e.amount": "dec", "e.score": "dbl", "e.event_id": "int"},
          {"e.event_time": "timestamp", "e.event_date": "date"}, {"e.user_id": (-5, 45)}),
    Shape("shop.orders o JOIN shop.customers c ON o.customer = c.customer",
          {"o.status": ["'open'", "'paid'"], "c.segment": ["'retail'", "'smb'"],
           "c.country": COUNTRY, "o.customer": ["'c1'", "'c2'"]},
          {"o.total": "dec", "o.order_id": "int"}, {"o.order_date": "date"}),
]

AGG_FUNCS = ["sum", "count", "min", "max", "avg"]


@dataclass
class DatamapSpec:
    name: str
    shape: Shape
    groups: list[str]                # grouping expressions (columns or timeseries calls)
    bucket: tuple[str, str] | None   # (time column, granularity) when grouped by a bucket
    aggs: list[str]                  # aggregate calls
    where: str | None

    def sql(self) -> str:
        outs = [f"{g} AS g{i}" for i, g in enumerate(self.groups)]
        outs += [f"{a} AS a{i}" for i, a in enumerate(self.aggs)]
        w = f" WHERE {self.where}" if self.where else ""
        return (f"SELECT {', '.join(outs)} FROM {self.shape.from_sql}{w} "
                f"GROUP BY {', '.join(self.groups)}")


def _granularities(kind: str) -> list[str]:
    return ["day", "week", "month", "year"] if kind == "date" else list(GRANULARITIES)


def make_pool(seed: int, size: int) -> list[DatamapSpec]:
    rng = random.Random(seed)
    pool = []
    for n in range(size):
        shape = SHAPES[n % len(SHAPES)] if n < len(SHAPES) else rng.choice(SHAPES)
        dims = list(shape.dims)
        groups = rng.sample(dims, rng.randint(1, min(4, len(dims))))
        bucket = None
        if rng.random() < 0.5:
            col, kind = rng.choice(sorted(shape.times.items()))
            gran = rng.choice(_granularities(kind))
            bucket = (col, gran)
            groups.append(f"timeseries({col}, '{gran}')")
        aggs = ["count(*)"]
        for m in rng.sample(sorted(shape.measures), rng.randint(1, len(shape.measures))):
            for f in rng.sample(AGG_FUNCS, rng.randint(1, 4)):
                aggs.append(f"{f}({m})")
        where = None
        if rng.random() < 0.3:
            g = rng.choice([c for c in groups if c in shape.dims])
            vals = rng.sample(shape.dims[g], min(len(shape.dims[g]), 2))
            where = f"{g} IN ({', '.join(vals)})"
        pool.append(DatamapSpec(f"pdm{n}", shape, groups, bucket, sorted(set(aggs)), where))
    return pool


# --- query strategy ----------------------------------------------------------------------------

@st.composite
def queries(draw, pool: list[DatamapSpec]):
    dm = draw(st.sampled_from(pool))
    shape = dm.shape
    plain_groups = [g for g in dm.groups if g in shape.dims]
    # grouping: mostly a subset of the datamap's, sometimes a column it lacks
    groups = draw(st.lists(st.sampled_from(plain_groups), unique=True, max_size=len(plain_groups)))
    if draw(st.integers(0, 9)) == 0:
        groups.append(draw(st.sampled_from(sorted(shape.dims))))
        groups = list(dict.fromkeys(groups))
    if dm.bucket and draw(st.booleans()):
        col, fine = dm.bucket
        kind = shape.times[col]
        coarse = draw(st.sampled_from(_granularities(kind)))
        groups.append(f"timeseries({col}, '{coarse.upper() if draw(st.booleans()) else coarse}')")
        event(f"bucket {fine}->{coarse} rollup={is_rollup(fine, coarse)}")
    # aggregates: mostly ones the datamap stores (or derives), sometimes anything
    aggs = []
    for _ in range(draw(st.integers(1, 4))):
        if draw(st.integers(0, 3)) > 0:
            aggs.append(draw(st.sampled_from(dm.aggs)))
        else:
            f = draw(st.sampled_from(AGG_FUNCS + ["count_distinct", "count_star", "equal"]))
            if f == "equal":
                aggs.append(_equal_aggregate(draw, shape, plain_groups))
            elif f == "count_star":
                aggs.append("count(*)")
            elif f == "count_distinct":
                aggs.append(f"count(DISTINCT {draw(st.sampled_from(sorted(shape.dims)))})")
            else:
                aggs.append(f"{f}({draw(st.sampled_from(sorted(shape.measures)))})")
    aggs = list(dict.fromkeys(aggs))
    # filters
    preds = []
    if dm.where and draw(st.integers(0, 4)) > 0:
        preds.append(dm.where)
    for _ in range(draw(st.integers(0, 2))):
        on_group = draw(st.integers(0, 4)) > 0
        col = draw(st.sampled_from(plain_groups if on_group and plain_groups else sorted(shape.dims)))
        vals = shape.dims[col]
        form = draw(st.sampled_from(["eq", "in", "range", "ne"]))
        if form == "range" and col in shape.ranges:
            lo, hi = shape.ranges[col]
            a = draw(st.integers(lo, hi))
            preds.append(draw(st.sampled_from([f"{col} >= {a}", f"{col} < {a}",
                                               f"{col} BETWEEN {a} AND {a + 3}"])))
        elif form == "in":
            preds.append(f"{col} IN ({', '.join(draw(st.lists(st.sampled_from(vals), min_size=1, max_size=3, unique=True)))})")
        elif form == "ne":
            preds.append(f"{col} <> {draw(st.sampled_from(vals))}")
        else:
            preds.append(f"{col} = {draw(st.sampled_from(vals))}")
    if dm.bucket and draw(st.integers(0, 5)) == 0:
        col, fine = dm.bucket
        if shape.times[col] == "timestamp":
            preds.append(f"{col} >= TIMESTAMP'2026-03-30 00:00:00'")
        else:
            preds.append(f"{col} < DATE'2026-04-01'")
    gby = _grouping(draw, groups) if groups else ""
    outs = []
    for i, g in enumerate(groups):
        outs.append(f"{g} AS k{i}" if draw(st.booleans()) else g)
    if gby != ", ".join(groups) and draw(st.booleans()):
        outs.append("grouping_id() AS gid")      # Spark allows it with subtotals only
    for i, a in enumerate(aggs):
        outs.append(f"{a} AS m{i}" if draw(st.booleans()) or "DISTINCT" in a or "*" in a else a)
    sql = f"SELECT {', '.join(outs)} FROM {_wrapped(draw, shape)}"
    if preds:
        sql += " WHERE " + " AND ".join(preds)
    if groups:
        sql += " GROUP BY " + gby
        if draw(st.integers(0, 4)) == 0:
            sql += " HAVING count(*) > 1"
        if draw(st.integers(0, 3)) == 0:
            sql += " ORDER BY " + ", ".join(f"{i + 1}" for i in range(len(groups)))
    return dm, sql


def _equal_aggregate(draw, shape: Shape, plain_groups: list[str]) -> str:
    """A BI tool's spelling of an aggregate (rewriter/rules/equal_aggregates.py), its
    condition on a grouping column of the datamap (or, now and then, on any column)."""
    col = draw(st.sampled_from(plain_groups if plain_groups and draw(st.integers(0, 4)) else sorted(shape.dims)))
    p = f"{col} = {draw(st.sampled_from(shape.dims[col]))}"
    m = draw(st.sampled_from(sorted(shape.measures)))
    return draw(st.sampled_from([
        "sum(1)", f"count_if({p})", f"sum(CASE WHEN {p} THEN {m} ELSE 0 END)",
        f"sum(CASE WHEN {p} THEN 1 ELSE 0 END)", f"avg(CASE WHEN {p} THEN {m} END)",
        f"sum({m}) FILTER (WHERE {p})", f"count(*) FILTER (WHERE {p})",
        f"sum(CASE WHEN {m} IS NOT NULL THEN 1 ELSE 0 END)", f"max(IF({p}, {m}, NULL))",
        f"sum({col})" if col in shape.ranges else f"count(CASE WHEN {p} THEN 1 END)"]))


def _grouping(draw, groups: list[str]) -> str:
    """Mostly a plain GROUP BY; now and then subtotals over the same expressions
    (rewriter/subtotals.py): ROLLUP, CUBE, GROUPING SETS with the empty set, or the first
    expression plain and a ROLLUP of the rest."""
    form = draw(st.sampled_from(["plain"] * 6 + ["rollup", "cube", "sets", "mixed"]))
    if form == "plain":
        return ", ".join(groups)
    event(f"subtotals {form}")
    if form == "mixed" and len(groups) > 1:
        return f"{groups[0]}, ROLLUP({', '.join(groups[1:])})"
    if form == "cube":
        return f"CUBE({', '.join(groups)})"
    if form == "sets":
        return f"GROUPING SETS (({', '.join(groups)}), ({groups[-1]}), ())"
    return f"ROLLUP({', '.join(groups)})"


_TABLE = re.compile(r"\b(default|shop)\.(\w+) (\w+)\b")


def _wrapped(draw, shape: Shape) -> str:
    """The FROM clause, sometimes with a table read through derived tables of itself the
    way BI tools wrap it (rewriter/flatten.py): SELECT *, a filter on one of its columns,
    an ORDER BY without LIMIT, two deep; a LIMIT inside now and then, which must be
    kept as written."""
    def wrap(m: re.Match) -> str:
        table, alias = f"{m.group(1)}.{m.group(2)}", m.group(3)
        kind = draw(st.sampled_from(["none", "none", "star", "filter", "two", "limit"]))
        if kind == "none":
            return m.group(0)
        event(f"wrapper {kind}")
        inner = f"SELECT * FROM {table}"
        cols = sorted(c.split(".", 1)[1] for c in shape.dims if c.startswith(alias + "."))
        if kind in ("filter", "two") and cols:
            col = draw(st.sampled_from(cols))
            inner += f" WHERE {col} IS NOT NULL ORDER BY {col}"
        if kind == "limit":
            inner += " LIMIT 1000"
        if kind == "two":
            inner = f"SELECT * FROM ({inner}) AS {alias}"
        return f"({inner}) AS {alias}"
    if draw(st.integers(0, 3)) > 0:
        return shape.from_sql
    return _TABLE.sub(wrap, shape.from_sql)


# --- the property -------------------------------------------------------------------------------

POOL = make_pool(POOL_SEED, POOL_SIZE)
