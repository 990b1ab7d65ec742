"""The hypothesis suite through the serving tier (in-process DuckDB): random aggregate queries over
the random datamap pool of test_properties.py, rewritten onto datamaps stored as Parquet
segments (test_serving_equivalence.ParquetDatamaps: one row per group, or three partial
slices plus a hidden full copy that must never be read), answered by the in-process engine
whenever the tier serves them, and compared with Spark answering the ORIGINAL query on the
base tables: names, Spark types and rows (spark_tier's rules). Queries the tier refuses
are fine; wrong rows never are. Now and then a query gets a window function over its
groups (_with_window): ranks of count(*), running and partition totals, lag, ntile,
percent_rank over the group keys (a total order: row_number, lag and ntile over ties are
whichever order a sort leaves, in Spark too).

Examples: 60 by default (the CI budget; each serving example costs a Spark query), the
`deep` profile's count with HYPOTHESIS_PROFILE=deep.
"""
from __future__ import annotations

import pytest
import sqlglot
from sqlglot import exp
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from proxy.serving.engine import EngineFailure
from proxy.serving.translate import NotServable, translate
import rewriter as core
from rewriter.api import Candidate, DatamapDefinitionError
from rewriter.timeseries import translate_sql
from tests.support.parquet_datamaps import VISIBLE, segment_files, parquet_datamaps
from tests.support.rewriter_queries import POOL, PROFILE, queries
from tests.support.serving import engine  # noqa: F401 - a fixture
from tests.support.spark_tier import diff_rows, df_schema

def _with_window(draw, sql: str) -> str:
    """`sql` with one window output over its groups appended, or as it is (subtotals)."""
    tree = sqlglot.parse_one(sql, read="spark")
    group = tree.args.get("group")
    if group is not None and (any(group.args.get(k) for k in ("rollup", "cube",
                                                               "grouping_sets"))
                              or any(isinstance(g, (exp.Rollup, exp.Cube, exp.GroupingSets))
                                     for g in group.expressions)):
        return sql
    keys = [g.sql("spark") for g in group.expressions] if group is not None else []
    aggs = [(e.this if isinstance(e, exp.Alias) else e).sql("spark") for e in tree.expressions
            if e.find(exp.AggFunc) is not None]
    by = ", ".join(keys)
    choices = ["rank() OVER (ORDER BY count(*) DESC)", "count(*) OVER ()",
               "percent_rank() OVER (ORDER BY count(*))", "cume_dist() OVER (ORDER BY count(*))",
               f"sum({draw(st.sampled_from(aggs))}) OVER ()" if aggs else "count(*) OVER ()"]
    if keys:
        choices += [f"dense_rank() OVER (PARTITION BY {keys[0]} ORDER BY count(*))",
                    f"row_number() OVER (ORDER BY {by})", f"ntile(3) OVER (ORDER BY {by})",
                    f"sum(count(*)) OVER (ORDER BY {by})",
                    f"sum(count(*)) OVER (PARTITION BY {keys[-1]} ORDER BY {by} ROWS "
                    "BETWEEN 1 PRECEDING AND 1 FOLLOWING)"]
        if aggs:
            agg = draw(st.sampled_from(aggs))
            choices += [f"lag({agg}, 1) OVER (ORDER BY {by})",
                        f"max({agg}) OVER (PARTITION BY {keys[0]})"]
    window = draw(st.sampled_from(choices))
    event(f"window {window.split('(')[0]}")
    cut = sql.index(" FROM ")       # the outer SELECT's: outputs hold no subquery
    return f"{sql[:cut]}, {window} AS w{sql[cut:]}"


EXAMPLES = 2000 if PROFILE == "deep" else 60
SERVED: dict[str, int] = {"served": 0, "refused": 0, "not rewritten": 0}


@pytest.fixture(scope="module")
def definitions(schemas):
    """name -> (full definition, segmented definition) for the pool, or the compile error."""
    out: dict = {}
    for spec in POOL:
        try:
            out[spec.name] = (core.compile_datamap(spec.name, spec.sql(), schemas, "default"),
                              core.compile_datamap(spec.name + "seg", spec.sql(), schemas,
                                                   "default"))
        except DatamapDefinitionError as e:
            out[spec.name] = e
    return out


@pytest.mark.spark
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, print_blob=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                 HealthCheck.filter_too_much])
@given(data=st.data())
def test_served_answers_equal_spark(data, spark, schemas, definitions, parquet_datamaps, engine):
    dm, sql = data.draw(queries(POOL), label="datamap, query")
    if data.draw(st.integers(0, 3), label="window?") == 0:
        sql = _with_window(data.draw, sql)
    defs = definitions[dm.name]
    assume(not isinstance(defs, Exception))
    full, seg = defs
    layouts = ["full"]
    if seg.is_aggregate and parquet_datamaps.slices.sliceable(seg):
        layouts.append("segments")
    layout = data.draw(st.sampled_from(layouts), label="layout")
    d = full if layout == "full" else seg
    cand = Candidate(definition=d, one_row_per_group=(layout == "full"),
                     segments=("0",) if layout == "full" else VISIBLE)
    result = core.rewrite(sql, [cand], schemas, "default")
    if not result.used:
        SERVED["not rewritten"] += 1
        return
    tree = result.tree if result.tree is not None else sqlglot.parse_one(result.sql, read="spark")
    tables = {d.table.lower(): {c.name: c.type for c in d.columns}}
    zone = spark.conf.get("spark.sql.session.timeZone")
    try:   # dry run: only a servable query makes Spark write the datamap
        translate(tree, tables, lambda table, ids: ["/nonexistent.parquet"], zone)
    except NotServable as e:
        SERVED["refused"] += 1
        event(f"refused: {str(e)[:60]}")
        return
    SERVED["served"] += 1
    event(f"served layout={layout}")
    directory = parquet_datamaps.directory(d, layout)
    plan = translate(tree, tables, lambda table, ids: segment_files(directory, ids), zone)
    original = translate_sql(sql, schemas, "default")
    odf = spark.sql(original)
    oschema = [tuple(c) for c in df_schema(odf)]
    orows = [tuple(r) for r in odf.collect()]
    try:
        rows = engine.run_blocking(plan)
    except EngineFailure as e:
        raise AssertionError(f"engine failed where Spark answered: {e}\n  query: {sql}\n"
                             f"  duckdb: {plan.sql}") from None
    problems = []
    if list(plan.columns) != oschema:
        problems.append(f"schema: Spark {oschema} vs served {list(plan.columns)}")
    problems += diff_rows(sqlglot.parse_one(original, read="spark"),
                           [n for n, _ in oschema], orows, rows)
    assert not problems, "\n".join(problems) + (f"\n  datamap: {dm.sql()}\n  query: {sql}\n"
                                                f"  rewritten: {result.sql}\n  duckdb: {plan.sql}")


@pytest.mark.spark
def test_the_property_served_some_queries():
    """Runs after the property (file order): it must have exercised the tier."""
    assert SERVED["served"] > 0, SERVED
    print(f"serving property: {SERVED}")
