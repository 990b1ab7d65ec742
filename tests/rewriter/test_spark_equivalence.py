"""Meaning tier: every must-hit fixture case runs on real Spark, original vs rewritten.

For each case the datamaps are compiled with the core's compile_datamap and materialised
as their layout says:
  full       CREATE TABLE <definition.table> AS build_sql(definition, {}) -- one row per
             group (skipped for `partial: true` cases);
  segmented  for partial cases and for every aggregate datamap: 3 segments built over
             disjoint hash slices of the first base table (several rows per group) plus an
             invisible 4th segment holding a full copy; Candidate(one_row_per_group=False,
             segments=('0','1','2')).
Then rewrite() runs against those candidates, and the original and the rewritten SQL must
give the same column names, types and rows (spark_tier.compare). Zero differences allowed:
a difference is a correctness bug in the rewriter, never a reason to edit the fixture.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "rewriter"

core = pytest.importorskip("rewriter", reason="rewriter core not importable")
if not all(hasattr(core, n) for n in ("compile_datamap", "rewrite")):
    pytest.skip("rewriter core (compile_datamap, rewrite) not implemented yet",
                allow_module_level=True)

from tests.rewriter.spark_tier import Materialiser, compare  # noqa: E402


def _cases():
    out = []
    for f in sorted(FIXTURES.glob("*.yaml")):
        if f.name == "schema.yaml" or "__nomatch" in f.name:
            continue
        data = yaml.safe_load(f.read_text()) or {}
        for i, case in enumerate(data.get("cases") or []):
            title = case.get("title", f"case {i}")
            partial = bool(case.get("partial", False))
            variants = ["segmented"] if partial else ["full", "segmented"]
            for v in variants:
                out.append((v, f.stem, i, title, case))
    # group by variant, then by datamap set, so materialised tables are reused across cases
    out.sort(key=lambda c: (c[0], sorted((c[4].get("datamaps") or {}).items()), c[1], c[2]))
    return [pytest.param(v, case, id=f"{v}:{stem}:{i}:{title}") for v, stem, i, title, case in out]


CASES = _cases()


@pytest.fixture(scope="module")
def materialiser(spark, schemas):
    m = Materialiser(spark, schemas)
    yield m
    m.drop_all()


@pytest.mark.spark
@pytest.mark.parametrize("variant,case", CASES)
def test_rewrite_returns_the_same_rows(variant, case, spark, schemas, materialiser):
    current_db = case.get("current_db", "default")
    definitions = [core.compile_datamap(name, sql, schemas, current_db)
                   for name, sql in case["datamaps"].items()]
    if variant == "segmented":
        if not all(d.is_aggregate for d in definitions) and not case.get("partial"):
            pytest.skip("segmented variant applies to aggregate datamaps and partial cases")
        if not all(materialiser.sliceable(d) for d in definitions):
            pytest.skip("no base table can be sliced without changing the join result "
                        "(self join or right/full outer join)")
        candidates = [materialiser.segmented(d) for d in definitions]
    else:
        candidates = [materialiser.full(d) for d in definitions]
    result = core.rewrite(case["query"], candidates, schemas, current_db)
    if not result.rewritten or not result.used:
        if variant == "full":
            pytest.fail(f"must-hit case not rewritten; skipped: {result.skipped}")
        # partial aggregates may legitimately be refused (e.g. count distinct needs an exact match)
        pytest.skip(f"not rewritten over partial segments: {result.skipped}")
    for name in result.used:
        d = next(d for d in definitions if d.name == name)
        assert d.table.split(".")[-1] in result.sql, f"{name}: rewrite does not read {d.table}"
    outcome = compare(spark, case["query"], result.sql, schemas, current_db)
    assert not outcome.problems, outcome.report()
