"""Meaning tier: every must-hit fixture case runs on real Spark, original vs rewritten.

For each case the datamaps are compiled with the core's compile_datamap and materialised
as their layout says (spark_tier.Materialiser):
  one row per group   CREATE TABLE <definition.table> AS build_sql(definition, {})
                      (not for `partial: true` cases);
  partial segments    for partial cases and for every aggregate case: 3 segments built over
                      disjoint hash slices of the first base table (several rows per group)
                      plus an invisible 4th segment holding a full copy;
                      Candidate(one_row_per_group=False, segments=('0','1','2')). Compiled
                      under <name>__seg so both layouts exist side by side.
Then rewrite() runs against each layout, and the original and every rewritten SQL must
give the same column names, types and rows (spark_tier.compare_many, one Spark job). Zero differences allowed:
a difference is a correctness bug in the rewriter, never a reason to edit the fixture.
"""
from __future__ import annotations


import pytest

import rewriter as core  # noqa: E402 - a missing core fails the tier, never skips it

from tests.support.spark_cases import SEG, SPARK_CASES
from tests.support.spark_tier import Materialiser, compare_many  # noqa: E402


@pytest.fixture(scope="module")
def materialiser(spark, schemas):
    m = Materialiser(spark, schemas)
    yield m
    m.drop_all()


@pytest.mark.spark
@pytest.mark.parametrize("case", SPARK_CASES)
def test_rewrite_returns_the_same_rows(case, spark, schemas, materialiser):
    current_db = case.get("current_db", "default")
    datamaps = case["datamaps"]
    partial = bool(case.get("partial", False))
    rewrites: dict[str, str] = {}
    notes: list[str] = []

    def run(label: str, candidates, definitions) -> None:
        result = core.rewrite(case["query"], candidates, schemas, current_db)
        if not result.rewritten or not result.used:
            notes.append(f"{label}: not rewritten ({result.skipped})")
            return
        for name in result.used:
            d = next(d for d in definitions if d.qualified == name)
            assert d.table.split(".")[-1] in result.sql, f"{label} {name}: does not read {d.table}"
        rewrites[label] = result.sql

    full_defs = [core.compile_datamap(n, q, schemas, current_db) for n, q in datamaps.items()]
    if not partial:
        run("one row per group", [materialiser.full(d) for d in full_defs], full_defs)
        assert rewrites, f"must-hit case not rewritten: {notes}"
    if partial or all(d.is_aggregate for d in full_defs):
        seg_defs = [core.compile_datamap(n + SEG, q, schemas, current_db)
                    for n, q in datamaps.items()]
        if all(materialiser.sliceable(d) for d in seg_defs):
            run("partial segments", [materialiser.segmented(d) for d in seg_defs], seg_defs)
            if partial:
                assert rewrites, f"must-hit partial case not rewritten: {notes}"
            # otherwise partial aggregates may legitimately be refused (count distinct, ...)
    if not rewrites:
        return
    outcomes = compare_many(spark, case["query"], rewrites, schemas, current_db)
    bad = {label: o.report() for label, o in outcomes.items() if o.problems}
    assert not bad, "\n".join(f"[{label}] {text}" for label, text in bad.items())
