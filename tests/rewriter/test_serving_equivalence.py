"""Serving tier, differential: every must-hit fixture case, rewritten onto datamaps stored as
real Parquet files and answered by the in-process engine, against Spark answering the
ORIGINAL query on the base tables. Names, Spark types and rows must be equal.

Layouts (as tests/rewriter/test_spark_equivalence.py, but written as Parquet by Spark,
`df.write.partitionBy("dm_segment_id")`, so the engine reads files the way it does in
production, `<dir>/dm_segment_id=<id>/part-*.parquet`):
  one row per group   segment '0' = build_sql(definition) (not for `partial: true` cases);
  partial segments    for partial cases and every aggregate case: segments '0', '1', '2'
                      built over disjoint hash slices of the first base table, plus a
                      hidden segment '9' holding a full copy that must never be read
                      (files_of refuses it, and a read of it would double-count).

Base tables the rewritten query reads whole (a dimension joined to the datamap, the
narrow-window union's base rows) are read from the files the freshness guard lists for
them, as in the proxy.

Per layout: rewrite (Candidate(..., segments=...)), translate; NotServable is a normal
outcome (recorded; the summary test prints the counts); a servable plan runs in
LocalEngine and is compared with Spark (spark_tier's rules: floats within 1e-9 relative,
ORDER BY key sequence, LIMIT ties) plus the exact scale of every decimal and the sign of
every zero double. Zero
differences allowed: a difference is a serving-tier bug (translate.py / engine.py).

A datamap is written only once a dry translation says the query is servable, and each
written layout is reused by every case that asks for the same definition.
"""
from __future__ import annotations

import datetime
from zoneinfo import ZoneInfo

import pytest
import sqlglot

from proxy.datamaps.freshness.guard import FreshnessGuard
from proxy.serving.engine import EngineFailure
from proxy.serving.newfiles import BaseReads
from proxy.serving.timestamps import OUT_OF_RANGE
from proxy.serving.translate import NotServable, translate
import rewriter as core
from rewriter.api import Candidate, DatamapDefinition
from rewriter.timeseries import translate_sql
from tests.support.parquet_datamaps import VISIBLE, parquet_datamaps, segment_files
from tests.support.serving import (  # noqa: F401 - engine: a fixture
    engine, scale_problems, zero_sign_problems,
)
from tests.support.spark_cases import SPARK_CASES, SEG
from tests.support.spark_tier import diff_rows, fmt_rows, df_schema

# (case id, layout) -> "served" | "not servable: <reason>" | "not rewritten: ..."
REPORT: dict[tuple[str, str], str] = {}


@pytest.mark.spark
@pytest.mark.parametrize("case", SPARK_CASES)
def test_served_answer_equals_spark(case, request, spark, schemas, parquet_datamaps, engine):
    case_id = request.node.callspec.id
    current_db = case.get("current_db", "default")
    datamaps = case["datamaps"]
    partial = bool(case.get("partial", False))
    plans = {}
    zone = spark.conf.get("spark.sql.session.timeZone")     # the datamaps' and queries' zone

    def attempt(layout: str, definitions: list[DatamapDefinition]) -> None:
        segments = ("0",) if layout == "full" else VISIBLE
        candidates = [Candidate(definition=d, one_row_per_group=(layout == "full"),
                                segments=segments) for d in definitions]
        result = core.rewrite(case["query"], candidates, schemas, current_db)
        if not result.rewritten or not result.used:
            REPORT[(case_id, layout)] = f"not rewritten ({result.skipped})"
            return
        tree = result.tree if result.tree is not None else sqlglot.parse_one(result.sql, read="spark")
        by_table = {d.table.lower(): d for d in definitions}
        tables = {t: {c.name: c.type for c in d.columns} for t, d in by_table.items()}
        table_of = _base_tables(spark, schemas, current_db)
        try:   # dry run first: only a servable query makes Spark write its datamaps
            translate(tree, tables, lambda table, ids: ["/nonexistent.parquet"], zone,
                      table_of=table_of)
        except NotServable as e:
            REPORT[(case_id, layout)] = f"not servable: {e}"
            return

        def files_of(table, ids):
            return segment_files(parquet_datamaps.directory(by_table[table], layout), ids)
        plans[layout] = (translate(tree, tables, files_of, zone, table_of=table_of),
                         result.sql)
        REPORT[(case_id, layout)] = "served"

    full_defs = [core.compile_datamap(n, q, schemas, current_db) for n, q in datamaps.items()]
    if not partial:
        attempt("full", full_defs)
    if partial or all(d.is_aggregate for d in full_defs):
        seg_defs = [core.compile_datamap(n + SEG, q, schemas, current_db)
                    for n, q in datamaps.items()]
        if all(parquet_datamaps.slices.sliceable(d) for d in seg_defs):
            attempt("segments", seg_defs)
    if not plans:
        return

    spark.sql(f"USE {current_db}")
    original = translate_sql(case["query"], schemas, current_db)
    otree = sqlglot.parse_one(original, read="spark")
    odf = spark.sql(original)
    oschema = [tuple(c) for c in df_schema(odf)]
    orows = [tuple(_wall_time(v, zone) for v in r) for r in odf.collect()]
    bad = []
    for layout, (plan, rewritten) in plans.items():
        problems = []
        if list(plan.columns) != oschema:
            problems.append(f"schema differs: Spark {oschema} vs served {list(plan.columns)}")
        try:
            rows = engine.run_blocking(plan)
        except EngineFailure as e:
            if OUT_OF_RANGE in str(e):    # a run-time refusal: the proxy asks Spark instead
                REPORT[(case_id, layout)] = f"falls back at run time: {OUT_OF_RANGE}"
                continue
            problems.append(f"engine failed where Spark answered: {e}")
        else:
            problems += scale_problems(plan.columns, rows)
            problems += diff_rows(otree, [n for n, _ in oschema], orows, rows)
            if not problems and otree.args.get("limit") is None:
                problems += zero_sign_problems(plan.columns, orows, rows)
        if problems:
            bad.append(f"[{layout}] " + "\n".join(problems) + f"\n  original:  {original}"
                       f"\n  rewritten: {rewritten}\n  duckdb:    {plan.sql}"
                       f"\n  spark rows: {fmt_rows(orows)}")
    assert not bad, "\n".join(bad)


_GUARDS: dict[int, FreshnessGuard] = {}


def _base_tables(spark, schemas, current_db: str):
    """A TableOf over the Spark tier's base tables as the proxy has it: their layouts from
    the metastore (pipeline.table_layout), their files from the freshness guard's listing
    of their directories (a bare name is the current database's)."""
    guard = _GUARDS.get(id(spark))
    if guard is None:
        from pipeline.files import table_layout
        guard = _GUARDS[id(spark)] = FreshnessGuard(lambda t: table_layout(spark, t),
                                                    lambda _t: None)
        guard.load_layouts([f"{db}.{t}".lower() for db, ts in schemas.items() for t in ts])
    return BaseReads(guard.layout, guard.table_files, 1 << 40, [], current_db).table


def _wall_time(v, zone: str):
    """PySpark's collect() turns a timestamp into a naive datetime in the Python process's
    own zone; a client of the Thrift Server (and the serving tier) sees the session zone's
    wall-clock time."""
    if not isinstance(v, datetime.datetime):
        return v
    return v.astimezone().astimezone(ZoneInfo(zone)).replace(tzinfo=None)


@pytest.mark.spark
def test_summary_of_served_cases(capsys):
    """Runs after the cases (file order): how many layouts the tier serves, and why not."""
    served = sum(1 for v in REPORT.values() if v == "served")
    refused = {k: v for k, v in REPORT.items() if v.startswith("not servable")}
    at_run = sum(1 for v in REPORT.values() if v.startswith("falls back"))
    other = len(REPORT) - served - len(refused) - at_run
    reasons: dict[str, int] = {}
    for v in refused.values():
        reasons[v] = reasons.get(v, 0) + 1
    with capsys.disabled():
        print(f"\nserving tier over {len({c for c, _ in REPORT})} fixture cases: "
              f"{served} layouts served, {len(refused)} not servable, {at_run} falling back to "
              f"Spark at run time, {other} not rewritten")
        for why, n in sorted(reasons.items(), key=lambda kv: -kv[1]):
            print(f"  {n:3d}  {why}")
    if len({c for c, _ in REPORT}) == len(SPARK_CASES):
        assert served > 0, "the serving tier served no fixture case at all"
