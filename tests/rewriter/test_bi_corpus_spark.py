"""Spark tier of the per-tool BI corpora (tests/rewriter/corpus.py): every case that is
rewritten runs original vs rewritten on Spark over the tpch tables, as
test_spark_equivalence.py does for the fixtures: the datamaps one row per group, and,
when every datamap of the file is an aggregate, the segmented layout (3 hash slices of
the fact table plus a hidden full copy a correct rewrite never reads). Same names, types
and rows, zero differences: a difference is a bug in the rewriter, never in the case.

Every datamap of the file is a candidate, as in the fast tier, so the rewrite chosen
here is the one test_bi_corpus.py checks. One Materialiser for the module: the files
share their datamaps, and a table built once serves every case."""
from __future__ import annotations

import pytest

import rewriter as core
from tests.rewriter.corpus import load_corpus
from tests.rewriter.spark_tier import Materialiser, compare_many

SEG = "__seg"
CASES = [c for c in load_corpus() if c.must_hit and not c.pending]


@pytest.fixture(scope="module")
def materialiser(spark, schemas):
    m = Materialiser(spark, schemas)
    yield m
    m.drop_all()


def _rewrite(case, materialiser, schemas, suffix: str, layout) -> str | None:
    defs = [core.compile_datamap(n + suffix, sql, schemas, case.current_db) for n, sql in case.datamaps]
    if suffix and not all(d.is_aggregate and materialiser.sliceable(d) for d in defs):
        return None
    result = core.rewrite(case.query, [layout(d) for d in defs], schemas, case.current_db)
    if not result.rewritten:
        return None
    for name in result.used:
        table = next(d.table for d in defs if d.qualified == name)
        assert table.split(".")[-1] in result.sql, f"{name}: does not read {table}"
    return result.sql


@pytest.mark.spark
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_corpus_rewrite_returns_the_same_rows(case, spark, schemas, materialiser):
    rewrites = {}
    full = _rewrite(case, materialiser, schemas, "", materialiser.full)
    assert full is not None, f"{case.title}: must-hit case not rewritten"
    rewrites["one row per group"] = full
    seg = _rewrite(case, materialiser, schemas, SEG, materialiser.segmented)
    if seg is not None:
        rewrites["partial segments"] = seg
    outcomes = compare_many(spark, case.query, rewrites, schemas, case.current_db)
    bad = {label: o.report() for label, o in outcomes.items() if o.problems}
    assert not bad, "\n".join(f"[{label}] {text}" for label, text in bad.items())
