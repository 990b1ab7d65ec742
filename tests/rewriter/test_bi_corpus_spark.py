"""Spark tier of the per-tool BI corpora (tests/support/corpus.py): every case that is
rewritten runs original vs rewritten on Spark over the tpch tables, as
test_spark_equivalence.py does for the fixtures: the datamaps one row per group, and,
when every datamap of the file is an aggregate, the segmented layout (3 hash slices of
the fact table plus a hidden full copy a correct rewrite never reads). Same names, types
and rows, zero differences: a difference is a bug in the rewriter, never in the case.

Every datamap of the file is a candidate, as in the fast tier, so the rewrite chosen
here is the one test_bi_corpus.py checks. The corpora share a few datamaps, so one
Materialiser serves the module with the segmented layout written as tables, and the
cases that share their datamaps are compared in one Spark job (spark_tier.compare_batch):
a job costs seconds whatever its size. Each case still passes or fails on its own."""
from __future__ import annotations

from itertools import groupby

import pytest

import rewriter as core
from tests.support.corpus import load_corpus
from tests.support.spark_tier import Materialiser, compare_batch

SEG = "__seg"
CASES = sorted((c for c in load_corpus() if c.must_hit and not c.pending),
               key=lambda c: (c.datamaps, c.current_db, c.file, c.index))


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


@pytest.fixture(scope="module")
def outcomes(spark, schemas):
    """case id -> {layout: Outcome}, or the reason the case was not rewritten. Cases are
    compared per group sharing datamaps and database: a group's tables stay as built
    until its job has run."""
    m = Materialiser(spark, schemas, persist_segments=True)
    out: dict[str, object] = {}
    try:
        for (_, db), group in groupby(CASES, key=lambda c: (c.datamaps, c.current_db)):
            items = {}
            for case in group:
                full = _rewrite(case, m, schemas, "", m.full)
                if full is None:
                    out[case.id] = "must-hit case not rewritten"
                    continue
                rewrites = {"one row per group": full}
                seg = _rewrite(case, m, schemas, SEG, m.segmented)
                if seg is not None:
                    rewrites["partial segments"] = seg
                items[case.id] = (case.query, rewrites)
            out.update(compare_batch(spark, items, schemas, db))
        yield out
    finally:
        m.drop_all()


@pytest.mark.spark
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_corpus_rewrite_returns_the_same_rows(case, outcomes):
    got = outcomes[case.id]
    assert not isinstance(got, str), f"{case.title}: {got}"
    bad = {label: o.report() for label, o in got.items() if o.problems}
    assert not bad, "\n".join(f"[{label}] {text}" for label, text in bad.items())


@pytest.mark.spark
def test_the_batched_comparison_sees_a_difference(spark, schemas):
    """The JSON round trip of compare_batch keeps NULL keys, decimals and the float
    tolerance: a dropped NULL group and a relative error of 1e-6 are both caught."""
    q = ("SELECT l_returnflag, sum(l_quantity) AS s, avg(CAST(l_discount AS DOUBLE)) AS a "
         "FROM tpch.lineitem GROUP BY l_returnflag")
    items = {"same": (q, {"x": q}),
             "no NULL group": (q, {"x": q.replace("GROUP BY", "WHERE l_returnflag IS NOT NULL GROUP BY")}),
             "float off": (q, {"x": q.replace("AS DOUBLE))", "AS DOUBLE)) * 1.000001")})}
    got = {k: v["x"].problems for k, v in compare_batch(spark, items, schemas, "tpch").items()}
    assert got["same"] == []
    assert any("only in original" in p for p in got["no NULL group"])
    assert any("rows differ" in p for p in got["float off"])
