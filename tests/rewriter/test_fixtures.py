"""Data-driven rewriter cases: tests/fixtures/rewriter/<rule>.yaml (must hit, exact SQL)
and <rule>__nomatch.yaml (must come back unchanged, with the reason). The Spark tier runs
the same must-hit cases on real Spark and compares rows."""
from __future__ import annotations


import pytest

from tests.support.rewriter_cases import CASES, check_case


@pytest.mark.parametrize("stem,i,case", CASES, ids=[f"{s}[{i}]" for s, i, _ in CASES])
def test_fixture(stem, i, case):
    check_case(stem, case)


def test_fixture_suite_size():
    mine = [(s, c) for s, _, c in CASES if not s.startswith("timeseries")]
    nomatch = [c for s, c in mine if s.endswith("__nomatch")]
    assert len(mine) >= 200
    assert len(nomatch) >= 0.4 * len(mine)


def test_every_case_has_a_title():
    assert all(c.get("title") for _, _, c in CASES)
