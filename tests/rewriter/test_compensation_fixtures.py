"""Union compensation (Candidate.delta), data-driven: tests/fixtures/rewriter/compensation/
holds must-hit cases (exact SQL: the new rows' relation appears as a UNION ALL inside the
datamap relation and the result is re-aggregated, even over one visible segment) and
__nomatch cases (a delta the union cannot compensate exactly, or an aggregate that does
not re-aggregate, must leave the query unchanged, with the reason). Kept out of the main
fixture directory: the Spark tiers there build candidates without a delta. Their meaning on
Spark is checked by test_compensation_properties.py."""
from __future__ import annotations

import pytest

from tests.support.rewriter_cases import FIXTURES, check_case, load_cases

CASES = load_cases(FIXTURES / "compensation")


@pytest.mark.parametrize("stem,i,case", CASES, ids=[f"{s}[{i}]" for s, i, _ in CASES])
def test_compensation_fixture(stem, i, case):
    check_case(stem, case)


def test_both_kinds_of_case_exist():
    stems = {s for s, _, _ in CASES}
    assert stems == {"compensation", "compensation__nomatch"}
    assert all(c.get("delta") for _, _, c in CASES)
