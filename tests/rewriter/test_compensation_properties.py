"""Union compensation (rows appended since the refresh), differential vs Spark: hypothesis draws appends between
a datamap's refresh and a query, and the compensated rewrite must answer what Spark
answers from all the base rows.

Base tables: copies of the Spark tier's tables (same generated rows) in databases cmpd
(default) and cmps (shop), written as Parquet with one file per slice: `b0`..`b3` (the
generated rows, dealt round-robin), `fresh` (rows whose every string, number and date is
new: groups no other file has; in dimension tables the keys that fact rows had no match
for), `nulls` (mostly NULL keys and values), `dups` (existing groups, negated measures) and
`empty` (no rows). cmpd.events is partitioned by `kind`, as production tables often are:
a slice is then one file per partition, and new groups arrive in new directories (and in
the NULL partition).

Each example draws a datamap from the pool of test_properties.py (plus left-join and
projection-only datamaps) and a query over it (its `queries` strategy), one base table
that got new rows, and a slot per file of that table: segment 0, 1 or 2 (covered) or new.
Then, as production does:
  * the datamap table is written as the pipeline writes it: each segment is the build
    SELECT over its files only (the other base tables whole), cast to the stored types,
    one partition per segment, plus a hidden segment `9` (a copy of the first, which a
    correct rewrite never reads);
  * the freshness guard (proxy/datamaps/freshness/guard.py) lists the table's directory
    against the covered files and gives its verdict: FRESH (nothing new), NEW (the delta
    is its relation, `(SELECT * FROM t WHERE _metadata.file_path IN (...))`) or CHANGED
    (plan_delta would rebuild: the rewriter must refuse that delta too);
  * Candidate(segments=<covered ids>, delta=<relation>, one_row_per_group drawn: with a
    delta the rewriter must re-aggregate whatever the caller says).
The rewrite must return the same names, types and rows as the ORIGINAL query over all
the files (spark_tier.compare). Refused queries are fine; wrong rows never are; and a
query the datamap answers without the delta must also be answered with it (compensation
never sends a hit to the base tables).

Examples: 60 by default, 2000 with HYPOTHESIS_PROFILE=deep.
"""
from __future__ import annotations

import random
import re
import shutil
import tempfile
import time
from dataclasses import replace
from datetime import date, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from pipeline import plan_delta
from proxy.datamaps.freshness.guard import CHANGED, FRESH, NEW, Covered, FreshnessGuard
import rewriter as core
from rewriter.api import SEGMENT_COLUMN, Candidate, DatamapDefinitionError
from tests.support.rewriter_data import SEED, generate_rows
from tests.support.rewriter_queries import (
    COUNTRY, POOL, PROFILE, SALES_DIMS, SALES_MEAS, SALES_RANGES, SALES_TIME, DatamapSpec,
    Shape, queries,
)
from tests.support.spark_tier import HIDDEN_SEGMENT, compare

EXAMPLES = 2000 if PROFILE == "deep" else 60
DBS = {"default": "cmpd", "shop": "cmps"}
FILES = ("b0", "b1", "b2", "b3", "fresh", "nulls", "dups", "empty")
SLOTS = ("0", "1", "2", "new")
# dimension keys the fact rows had no match for: new dimension rows make old facts join
NEW_KEYS = {"default.item": ("item_id", [str(k) for k in range(51, 58)]),
            "default.store": ("store_id", ["13", "14"]),
            "shop.customers": ("customer", [f"c{k}" for k in range(35, 45)])}
FACT_KEYS = {"item_id", "store_id", "customer"}
# copies partitioned as many production tables are: new groups arrive as new directories
PARTITIONED = {"default.events": ("kind",)}
SEEN: dict[str, int] = {}
# Every example is a new plan over a few thousand rows: compiling whole-stage code for
# each costs more than running it interpreted (a quarter of this module's Spark CPU time;
# fewer shuffle partitions saved nothing).
TIER_CONF = {"spark.sql.codegen.wholeStage": "false"}
SPENT = {"setup": 0.0, "write segments": 0.0, "compare": 0.0}     # seconds, for the summary


class ProjectionSpec(DatamapSpec):
    """A projection-only datamap: its columns, no grouping (queries aggregate over it)."""

    def sql(self) -> str:
        cols = ", ".join(dict.fromkeys(self.groups + [m for m in self.shape.measures]))
        w = f" WHERE {self.where}" if self.where else ""
        return f"SELECT {cols} FROM {self.shape.from_sql}{w}"


LEFT_ITEM = Shape("default.sales s LEFT JOIN default.item i ON s.item_id = i.item_id",
                  {**SALES_DIMS, "i.category": ["'food'", "'toys'"], "i.brand": ["'acme'"]},
                  {**SALES_MEAS, "i.weight": "dbl"}, SALES_TIME, SALES_RANGES)
LEFT_CUSTOMERS = Shape("shop.orders o LEFT JOIN shop.customers c ON o.customer = c.customer",
                       {"o.status": ["'open'", "'paid'"], "c.segment": ["'retail'", "'smb'"],
                        "c.country": COUNTRY}, {"o.total": "dec", "o.order_id": "int"},
                       {"o.order_date": "date"})
STORE_JOIN = Shape("default.sales s JOIN default.store st ON s.store_id = st.store_id",
                   {"s.country": COUNTRY, "st.region": ["'north'", "'south'"]},
                   {"s.quantity": "int", "s.price": "dec", "st.size": "int"}, {}, {})
EXTRA = [
    DatamapSpec("cdm_l0", LEFT_ITEM, ["s.country", "i.category", "timeseries(s.ts, 'hour')"],
                ("s.ts", "hour"), ["count(*)", "sum(s.quantity)", "avg(i.weight)",
                                   "min(s.price)", "max(s.discount)"], None),
    DatamapSpec("cdm_l1", LEFT_CUSTOMERS, ["o.status", "c.segment", "c.country"], None,
                ["count(*)", "sum(o.total)", "avg(o.total)", "max(o.order_id)"], None),
    ProjectionSpec("cdm_p0", Shape("default.sales s", SALES_DIMS, SALES_MEAS, {}, SALES_RANGES),
                   ["s.country", "s.city", "s.year", "s.store_id"], None,
                   ["count(*)", "sum(s.quantity)", "avg(s.price)", "min(s.discount)"],
                   "s.year IN (2026, 2025)"),
    ProjectionSpec("cdm_p1", STORE_JOIN, ["s.country", "st.region"], None,
                   ["count(*)", "sum(st.size)", "max(s.price)"], None),
]
SPECS = POOL + EXTRA


def retarget(sql: str) -> str:
    return re.sub(r"\b(default|shop)\.", lambda m: DBS[m.group(1)] + ".", sql)


# --- the base tables' files -----------------------------------------------------------------

def _fresh_value(col: str, ty: str, v, rng: random.Random):
    if col in FACT_KEYS and rng.random() < 0.5:
        return v                       # still joins: new groups come from the other columns
    if ty == "string":
        return f"{v}+" if v else "nova"
    if ty in ("int", "bigint"):
        return str(int(v or 0) + 1000)
    if ty == "date":
        return (date.fromisoformat(v or "2026-03-30") + timedelta(days=400)).isoformat()
    if ty == "timestamp":
        return str(datetime.fromisoformat(v or "2026-03-30 00:00:00") + timedelta(days=400))
    return v


def _negated(ty: str, v):
    if v is None or not (ty in ("int", "bigint", "double") or ty.startswith("decimal")):
        return v
    return v[1:] if v.startswith("-") else "-" + v


def slices(schemas) -> dict[str, dict[str, list[dict]]]:
    """table -> file name -> rows (string values, as conftest generates them)."""
    rng = random.Random(SEED + 13)
    out = {}
    for name, rows in generate_rows(schemas).items():
        db, t = name.split(".")
        if db not in DBS:               # the BI corpora's tpch tables: no spec reads them
            continue
        types = schemas[db][t]
        n = max(6, len(rows) // 100)
        files = {f"b{k}": rows[k::4] for k in range(4)}
        files["fresh"] = [{c: _fresh_value(c, ty, r[c], rng) for c, ty in types.items()}
                          for r in rng.sample(rows, n)]
        if name in NEW_KEYS:
            key, values = NEW_KEYS[name]
            for r in files["fresh"]:
                r[key] = rng.choice(values)
        files["nulls"] = [{c: r[c] if rng.random() < 0.3 else None for c in types}
                          for r in rng.sample(rows, n)]
        files["dups"] = [{c: _negated(ty, r[c]) for c, ty in types.items()}
                         for r in rng.sample(rows, n)]
        files["empty"] = []
        out[name] = files
    return out


def table_columns(schemas, name: str) -> dict[str, str]:
    """A copy's columns in Spark's order (partition columns last)."""
    db, t = name.split(".")
    cols = dict(schemas[db][t])
    for c in PARTITIONED.get(name, ()):
        cols[c] = cols.pop(c)
    return cols


def write_tables(spark, schemas, root: Path) -> dict[str, dict[str, list[str]]]:
    """Create the cmpd/cmps copies, one Parquet file per slice (per partition of a
    partitioned table); table -> slice -> its files."""
    from pyspark.sql.types import StringType, StructField, StructType
    # A file of no rows (what a write of nothing leaves): its footer's schema does not
    # matter, a scan reads the table's columns from it as NULL, of which it has none.
    spark.range(0).selectExpr("id AS dm__none").coalesce(1).write.parquet(
        str(root / "staging" / "empty"))
    empty = next((root / "staging" / "empty").glob("part-*.parquet"))
    paths: dict[str, dict[str, list[str]]] = {}
    for name, files in slices(schemas).items():
        db, t = name.split(".")
        types = table_columns(schemas, name)
        keys = PARTITIONED.get(name, ())
        target = f"{DBS[db]}.{t}"
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {DBS[db]}")
        st_ = StructType([StructField(c, StringType(), True) for c in [*types, "dm__file"]])
        data = [tuple(r[c] for c in types) + (f,) for f, rows in files.items() for r in rows]
        cast = [f"CAST(`{c}` AS {ty}) AS `{c}`" for c, ty in types.items()]
        df = spark.createDataFrame(data, st_).selectExpr(*cast, "dm__file")
        staging, home = root / "staging" / target, root / target
        df.coalesce(1).write.partitionBy("dm__file", *keys).parquet(str(staging))
        paths[target] = {f: [] for f in FILES}
        for part in sorted(staging.rglob("part-*.parquet")):
            f, *where = part.relative_to(staging).parts[:-1]
            (home / Path(*where)).mkdir(parents=True, exist_ok=True)
            moved = home / Path(*where) / f"{f.split('=', 1)[1]}.parquet"
            part.rename(moved)
            paths[target][f.split("=", 1)[1]].append(str(moved))
        # next to the other files of a (registered) partition
        where = Path(paths[target]["b0"][0]).parent
        shutil.copy(empty, where / "empty.parquet")
        paths[target]["empty"] = [str(where / "empty.parquet")]
        assert all(paths[target].values()), paths[target]
        cols = ", ".join(f"`{c}` {ty}" for c, ty in types.items())
        by = f" PARTITIONED BY ({', '.join(keys)})" if keys else ""
        spark.sql(f"CREATE TABLE {target} ({cols}) USING parquet{by} LOCATION '{home}'")
        if keys:
            spark.sql(f"ALTER TABLE {target} RECOVER PARTITIONS")
    shutil.rmtree(root / "staging")
    return paths


@pytest.fixture(scope="module")
def bases(spark, schemas):
    root = Path(tempfile.mkdtemp(prefix="compensation-"))
    defs: dict = {}
    saved = {k: spark.conf.get(k) for k in TIER_CONF}
    for k, v in TIER_CONF.items():
        spark.conf.set(k, v)
    try:
        started = time.perf_counter()
        paths = write_tables(spark, schemas, root)
        cschemas = {**schemas, **{DBS[db]: {t: table_columns(schemas, f"{db}.{t}")
                                            for t in tables} for db, tables in schemas.items() if db in DBS}}
        for spec in SPECS:
            try:
                defs[spec.name] = core.compile_datamap("c" + spec.name, retarget(spec.sql()),
                                                       cschemas, "cmpd")
            except DatamapDefinitionError as e:
                defs[spec.name] = e
        guard = FreshnessGuard(lambda t: {"roots": ["file:" + str(root / t)]},
                               lambda t: None)
        guard.load_layouts(paths)
        SPENT["setup"] = time.perf_counter() - started
        yield paths, cschemas, defs, guard, Segments(spark)
    finally:
        for k, v in saved.items():
            spark.conf.set(k, v)
        spark.sql("USE default")
        for db in DBS.values():
            spark.sql(f"DROP DATABASE IF EXISTS {db} CASCADE")
        shutil.rmtree(root, ignore_errors=True)


class Segments:
    """Writes a datamap table as the pipeline does (each segment the build SELECT over its
    own files, cast to the stored types, one partition per segment); rewrites it only
    when an example asks for other segments than the last one."""

    def __init__(self, spark):
        self.spark = spark
        self.last: dict[str, tuple] = {}

    def write(self, d, parts: dict[str, dict[str, str]]) -> None:
        """parts: segment id -> sources for build_sql (base table -> relation)."""
        key = tuple(sorted((sid, tuple(sorted(src.items()))) for sid, src in parts.items()))
        if self.last.get(d.table) == key:
            return
        cols = ", ".join(f"CAST(b.`{c.name}` AS {c.type}) AS `{c.name}`" if c.type
                         else f"b.`{c.name}`" for c in d.columns)
        sql = " UNION ALL ".join(f"SELECT {cols}, '{sid}' AS {SEGMENT_COLUMN} FROM "
                                 f"({d.build_sql(src)}) b" for sid, src in sorted(parts.items()))
        (self.spark.sql(sql).write.mode("overwrite").partitionBy(SEGMENT_COLUMN)
         .format("parquet").saveAsTable(d.table))
        self.last[d.table] = key


# --- the property ---------------------------------------------------------------------------

def _count(what: str) -> None:
    SEEN[what] = SEEN.get(what, 0) + 1
    event(what)


@pytest.mark.spark
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, print_blob=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                 HealthCheck.filter_too_much])
@given(data=st.data())
def test_compensated_answers_equal_spark(data, spark, bases):
    paths, cschemas, defs, guard, segments = bases
    spec, sql = data.draw(queries(SPECS), label="datamap, query")
    d = defs[spec.name]
    assume(not isinstance(d, Exception))
    sql = retarget(sql)
    changed = data.draw(st.sampled_from(d.base_tables), label="table with new rows")
    slots = data.draw(st.lists(st.sampled_from(SLOTS), min_size=len(FILES),
                               max_size=len(FILES)), label="file slots")
    files = dict(zip(FILES, slots))
    whole = {t: frozenset(p for ps in paths[t].values() for p in ps) for t in d.base_tables}
    covered = {**whole, changed: frozenset(p for f, s in files.items() if s != "new"
                                           for p in paths[changed][f])}
    ids = tuple(sorted({s for s in slots if s != "new"}))

    def compensable(table):
        plan = plan_delta(d, [table])
        return plan.reason if plan.full_rebuild else None
    verdict = guard.check(d.qualified, Covered(covered, 0.0, d), 0.0, compensable)
    new_files = sorted(whole[changed] - covered[changed])
    delta = ((changed, guard.relation(changed, new_files)),) if new_files else ()
    # a delta makes the rewriter re-aggregate whatever the caller says of the segments
    one_row = bool(delta) and data.draw(st.booleans(), label="one_row_per_group")
    cand = Candidate(d, one_row_per_group=one_row, segments=ids, delta=delta)
    plain = core.rewrite(sql, [replace(cand, delta=(), one_row_per_group=False)], cschemas,
                         "cmpd")
    result = core.rewrite(sql, [cand], cschemas, "cmpd")
    if verdict.kind == CHANGED:
        # production answers from the base tables; the rewriter must not union it either
        assert new_files and not result.used and "union compensation refused" in \
            result.skipped.get(d.qualified, ""), (verdict, result.skipped)
        _count("refused: plan_delta rebuilds")
        return
    assert verdict.kind == (NEW if new_files else FRESH), verdict
    if not plain.used:
        _count("not rewritten")
        return
    assert result.used, f"compensation lost the hit: {result.skipped}\n  query: {sql}"
    assert not delta or "_metadata.file_path IN" in result.sql, result.sql
    parts = {sid: {changed: guard.relation(changed, [p for f, s in files.items() if s == sid
                                                     for p in paths[changed][f]])}
             for sid in ids}
    # a hidden copy of the first segment: a rewrite that reads it double-counts (the same
    # build, so Spark reuses its shuffle and the copy costs next to nothing)
    parts[HIDDEN_SEGMENT] = parts[ids[0]] if ids else {}
    started = time.perf_counter()
    segments.write(d, parts)
    SPENT["write segments"] += time.perf_counter() - started
    _count(f"compared: {'compensated' if delta else 'fresh'}, {len(ids)} segments, "
           f"{'join' if len(d.base_tables) > 1 else 'single table'}"
           f"{', partitioned' if changed in map(retarget, PARTITIONED) else ''}")
    started = time.perf_counter()
    outcome = compare(spark, sql, result.sql, cschemas, "cmpd")
    SPENT["compare"] += time.perf_counter() - started
    news = [f for f, s in files.items() if s == "new"]
    assert not outcome.problems, (f"datamap {spec.name}: {retarget(spec.sql())}\n"
                                  f"  new rows of {changed}: {news}\n  segments: {ids}\n"
                                  f"{outcome.report()}")


@pytest.mark.spark
def test_the_property_compensated_some_queries():
    """Runs after the property (file order): it must have compared compensated answers."""
    print(f"compensation property: {dict(sorted(SEEN.items()))}; seconds: "
          f"{ {k: round(v, 1) for k, v in SPENT.items()} }")
    assert sum(n for k, n in SEEN.items() if k.startswith("compared: compensated")) > 0, SEEN
