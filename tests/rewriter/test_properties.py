"""Property-based meaning tests: random aggregate queries against random datamaps.

A pool of random datamaps (single-table and star-join SPJG definitions, random grouping sets,
aggregates, optional filters and timeseries buckets) is drawn once per run from a seed and
materialised twice: one row per group, and as partial segments (see spark_tier). Hypothesis
then draws queries over the same tables -- grouping subsets, coarser time buckets,
subtotals now and then (ROLLUP / CUBE / GROUPING SETS, grouping_id()),
aggregates the datamap may or may not be able to answer (sum/count/count(*)/min/max/avg/
count distinct), filters with ranges/equalities/IN on grouping and non-grouping columns,
tables read through BI-style derived tables of themselves (_wrapped) -- and every rewrite the rewriter produces must return the same rows on Spark as the original.
Queries it refuses are fine; wrong rows never are.

Profiles: `ci` (default, 200 examples) and `deep` (HYPOTHESIS_PROFILE=deep: 2000 examples,
a bigger datamap pool).
"""
from __future__ import annotations


import pytest
from hypothesis import assume, event, given
from hypothesis import strategies as st

import rewriter as core  # noqa: E402 - a missing core fails the tier, never skips it

from rewriter.api import DatamapDefinitionError  # noqa: E402
from tests.support.rewriter_queries import POOL, queries
from tests.support.spark_tier import Materialiser, compare  # noqa: E402


@pytest.fixture(scope="module")
def compiled(spark, schemas):
    """name -> {"full": Candidate, "segmented": Candidate} for the pool (or the compile
    error). Each spec is compiled twice under two names so both layouts exist at once."""
    m = Materialiser(spark, schemas)
    out: dict = {}
    for spec in POOL:
        try:
            full = core.compile_datamap(spec.name, spec.sql(), schemas, "default")
            seg = core.compile_datamap(spec.name + "seg", spec.sql(), schemas, "default")
        except DatamapDefinitionError as e:
            out[spec.name] = e
            continue
        cands = {"full": m.full(full)}
        if m.sliceable(seg) and seg.is_aggregate:
            cands["segmented"] = m.segmented(seg)
        out[spec.name] = cands
    yield out
    m.drop_all()


@pytest.mark.spark
@given(data=st.data())
def test_rewrites_return_the_same_rows(data, spark, schemas, compiled):
    dm, sql = data.draw(queries(POOL), label="datamap, query")
    cands = compiled[dm.name]
    assume(not isinstance(cands, Exception))
    variant = data.draw(st.sampled_from(sorted(cands)), label="variant")
    cand = cands[variant]
    result = core.rewrite(sql, [cand], schemas, "default")
    event(f"rewritten={bool(result.used)} variant={variant}")
    if not result.used:
        return
    outcome = compare(spark, sql, result.sql, schemas, "default")
    assert not outcome.problems, f"datamap {dm.name}: {dm.sql()}\n{outcome.report()}"


@pytest.mark.spark
def test_pool_definitions_compile(compiled):
    """Every pool definition is one the rewriter must accept (they are all plain SPJG)."""
    bad = {k: str(v) for k, v in compiled.items() if isinstance(v, Exception)}
    assert not bad, bad
